/**
 * A benchmark's record: what ran (command, commit, machine), every figure
 * with its unit and spread, and the text the benchmark printed. Each
 * `bench:*` script opens one, declares its figures as it measures them, and
 * saves it at the end under `bench-out/records/`; `npm run results` renders
 * docs/RESULTS.md (and README's headline table) from the newest records.
 *
 * ```ts
 * const record = openRecord('jacobi', 'Jacobi throughput')
 * record.figure('molotof 2 ranks / hand-written 2 threads', [0.99, 1.01, 0.98], '×', { headline: 'throughput against a hand-written 2-thread loop', target: '≥ 0.95' })
 * record.save()
 * ```
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { cpus, freemem, loadavg, totalmem } from 'node:os'
import { join, relative } from 'node:path'
import { format } from 'node:util'
import { summary } from '../src/bench/stats.js'

export interface Figure {
  name: string
  unit: string
  median: number
  min: number
  max: number
  /** How many measurements the median is of. */
  n: number
  /** Shown in README's headline table under this label. */
  headline?: string
  target?: string
}

export interface Machine {
  cores: number
  cpu: string
  node: string
  platform: string
  memoryGiB: number
  freeGiB: number
  /** 1, 5 and 15 minute load averages when the benchmark started. */
  loadAverage: number[]
}

export interface BenchRecord {
  bench: string
  title: string
  /** How to run it again, from the repository's root. */
  command: string
  date: string
  commit: string
  /** The work tree had uncommitted changes to tracked files. */
  dirty: boolean
  machine: Machine
  figures: Figure[]
  /** What the benchmark printed on stdout, tables and prose. */
  transcript: string
}

export interface FigureOptions {
  headline?: string
  target?: string
}

export interface Recorder {
  figure(name: string, sample: number | readonly number[], unit: string, options?: FigureOptions): void
  save(): string
}

function git(args: string[]): string {
  try {
    return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
  } catch {
    return ''
  }
}

export function machine(): Machine {
  const c = cpus()
  return {
    cores: c.length,
    cpu: c[0]?.model.trim() ?? 'unknown',
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    freeGiB: Math.round((freemem() / 2 ** 30) * 10) / 10,
    loadAverage: loadavg().map((x) => Math.round(x * 100) / 100),
  }
}

/**
 * Starts recording: from here on, what the process prints on stdout goes
 * into the record's transcript as well as to the terminal.
 */
export function openRecord(bench: string, title: string): Recorder {
  const started = machine()
  const date = new Date().toISOString()
  const figures: Figure[] = []
  let transcript = ''
  const log = console.log
  console.log = (...args: unknown[]) => {
    transcript += format(...args) + '\n'
    log(...args)
  }
  // The exact command, not the npm script: some scripts run two programs, and npm hands `-- args` to the last.
  const command = ['npx tsx', relative(process.cwd(), process.argv[1] ?? ''), ...process.argv.slice(2)].join(' ')
  return {
    figure(name, sample, unit, options = {}) {
      const xs = (typeof sample === 'number' ? [sample] : [...sample]).filter(Number.isFinite)
      if (xs.length === 0) return
      const s = summary(xs)
      figures.push({ name, unit, median: s.median, min: s.min, max: s.max, n: xs.length, ...options })
    },
    save() {
      console.log = log
      const record: BenchRecord = {
        bench,
        title,
        command,
        date,
        commit: git(['rev-parse', 'HEAD']),
        dirty: git(['status', '--porcelain', '--untracked-files=no']) !== '',
        machine: started,
        figures,
        transcript,
      }
      const dir = join('bench-out', 'records')
      mkdirSync(dir, { recursive: true })
      const file = join(dir, `${bench}-${date.replace(/[:.]/g, '-')}.json`)
      writeFileSync(file, JSON.stringify(record, null, 2) + '\n')
      process.stderr.write(`record: ${file} (npm run results renders docs/RESULTS.md from the newest records)\n`)
      return file
    },
  }
}
