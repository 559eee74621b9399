import { cpus, totalmem } from 'node:os'
import { join } from 'node:path'
import type { FaultToleranceConfig } from '../checkpoint/config.js'
import { ConfigError } from '../errors.js'
import type { RunningRanks, Transport } from '../runtime/group.js'
import { launch } from '../runtime/launch/launcher.js'
import { Supervisor, type SupervisorEvent } from '../runtime/launch/supervisor.js'
import { privateResidentBytes } from './sysmem.js'
import { withScratchDirectory } from '../util/scratch.js'

export interface BenchOptions {
  program: string
  /** The program's own options. */
  argv: string[]
  ranks: number
  transport: Transport
  /** Checkpoints per run to measure (0 = none). */
  counts: number[]
  /** Repeats of every configuration (after one warm-up run). */
  repeats: number
  /** Measure one run with a failure injected mid-run (per repeat). */
  failure: boolean
  /** Checkpoints written in the background (staging copy, later commit). */
  async?: boolean
  /** `memory`: the checkpointed configurations write to the memory level only (RAM, no disk). Default `disk`. */
  level?: 'disk' | 'memory'

  /** Also measure the failure run with this many warm spares (0 or absent: the cold restart only). */
  spares?: number
  /** Progress notes for the terminal. */
  onNote?: (text: string) => void
}

export type Contents = 'none' | 'default' | 'minimal'

/** One run of one configuration. */
export interface RunFigures {
  runtimeMs: number
  /** Rank 0's file and all ranks' bytes, write time of each committed checkpoint, the stall at its checkpoint point and its level. */
  checkpoints: { bytes: number; totalBytes: number; ms: number; stallMs?: number; level?: 'memory' | 'disk' | 'partner' | 'shared' | 'xor' }[]
  /** Per rank: the largest private resident memory seen at a checkpoint (bytes). */
  privateBytes: (number | undefined)[]
}

export interface ConfigResult {
  contents: Contents
  /** Checkpoints asked for per run, and the policy used to place them. */
  requested: number
  every: number | undefined
  runs: RunFigures[]
}

export interface RecoveryFigures {
  /** Warm spares of the run (0 or absent: every rank started cold after the failure). */
  spares?: number
  failedStep: number
  lineStep: number | undefined
  detectionMs: number
  spawnMs: number
  negotiateMs: number
  loadMs: number
  replayMs: number
  restoreMs: number
  /** From the failure to the start of the new attempt (detection, stopping the survivors). */
  stopMs?: number
  /** The first superstep computed again (from the end of the restore). */
  firstStepMs?: number
  /** From the failure to the end of the first superstep after recovery. */
  toFirstStepMs: number
  /** Supersteps computed again (after the recovery line, up to the failure). */
  lostSteps: number
  lostMs: number
  runtimeMs: number
  /** The recovered run's result equals the failure-free one (time fields aside). */
  sameResult: boolean
}

export interface BenchReport {
  program: string
  /** Checkpoints were written in the background. */
  async: boolean
  /** The level the checkpointed configurations wrote to. */
  level?: 'disk' | 'memory'
  argv: string[]
  ranks: number
  transport: Transport
  steps: number
  date: string
  machine: { cpus: number; model: string; memoryGiB: number; node: string }
  notes: string[]
  configs: ConfigResult[]
  recovery: RecoveryFigures[]
}

/**
 * Runs the comparison of `molotof bench`: no fault tolerance, default
 * checkpoint contents and the program's minimal registration at several
 * checkpoint counts, and a run with a failure injected mid-run, repeated and
 * interleaved so that machine noise hits every configuration alike.
 */
export async function runBench(o: BenchOptions): Promise<BenchReport> {
  if (!Number.isInteger(o.repeats) || o.repeats < 1) throw new ConfigError(`--repeats must be a positive integer (got ${o.repeats})`)
  if (o.counts.some((c) => !Number.isInteger(c) || c < 0)) throw new ConfigError(`--counts must be non-negative integers (got ${o.counts.join(',')})`)
  const note = o.onNote ?? (() => {})
  const notes: string[] = []
  return withScratchDirectory('molotof-bench-', async (root) => {
    let dirs = 0
    const freshDir = () => join(root, `c${dirs++}`)
    note('warm-up run (no fault tolerance)…')
    const warm = await oneRun(o, undefined)
    const steps = warm.steps
    if (steps < 1) throw new ConfigError(`${o.program} ran no superstep: nothing to measure`)
    const reference = comparable(warm.value)

    const counts = [...new Set(o.counts.filter((c) => c > 0))].sort((a, b) => a - b)
    const placements = counts.map((c) => {
      // `every` places floor(steps / every) checkpoints; not every count is reachable exactly.
      const every = Math.max(1, Math.floor(steps / c))
      const placed = Math.floor(steps / every)
      if (placed < c) notes.push(`the problem has ${steps} supersteps: ${c} checkpoints per run do not fit, ${placed} were placed (one every superstep)`)
      else if (placed !== c) notes.push(`${c} checkpoints per run cannot be spread evenly over ${steps} supersteps: ${placed} were placed (every ${every})`)
      return { requested: c, every }
    })
    const configs: ConfigResult[] = [
      { contents: 'none', requested: 0, every: undefined, runs: [] },
      ...(['default', 'minimal'] as const).flatMap((contents) => placements.map((p) => ({ contents, requested: p.requested, every: p.every, runs: [] }))),
    ]
    const recovery: RecoveryFigures[] = []
    const mid = placements[Math.floor(placements.length / 2)]
    for (let rep = 0; rep < o.repeats; rep++) {
      for (const c of configs) {
        note(`repeat ${rep + 1}/${o.repeats}: ${c.contents}${c.every ? `, ${c.requested} checkpoints (every ${c.every})` : ''}`)
        const ft: FaultToleranceConfig | undefined =
          c.contents === 'none'
            ? undefined
            : { ...levelPolicy(o, c.every!, freshDir()), keep: 2, resume: false, contents: c.contents === 'default' ? 'default' : 'program', async: o.async }
        const r = await oneRun(o, ft)
        c.runs.push(r.figures)
        if (ft && r.figures.checkpoints.length === 0 && !notes.some((n) => n.includes('registers nothing'))) {
          notes.push('no checkpoint was written: the program registers nothing (checkpoints would be empty) and recovery restarts from the beginning')
        }
      }
      if (o.failure && mid) {
        for (const spares of o.spares ? [0, o.spares] : [0]) {
          note(`repeat ${rep + 1}/${o.repeats}: failure injected at superstep ${Math.floor(steps / 2)}${spares ? `, ${spares} warm spare(s)` : ''}`)
          recovery.push(await failureRun(o, steps, mid.every, freshDir(), reference, spares))
        }
      }
    }
    // One repeat tells nothing of the noise: a second run without fault tolerance does (summarize.ts).
    if (configs[0].runs.length < 2) {
      note('a second run without fault tolerance, for the noise…')
      configs[0].runs.push((await oneRun(o, undefined)).figures)
    }
    // Work lost is priced at the failure-free time per superstep.
    const noneRuns = configs[0].runs.map((x) => x.runtimeMs).sort((a, b) => a - b)
    const stepMs = noneRuns[noneRuns.length >> 1] / Math.max(1, steps - 1)
    for (const f of recovery) f.lostMs = f.lostSteps * stepMs
    if (o.transport === 'threads') {
      notes.push('system-level size: ranks are threads of one process, so per-rank private memory cannot be told apart; use --transport processes')
    }
    return {
      program: o.program,
      async: o.async === true,
      level: o.level ?? 'disk',
      argv: o.argv,
      ranks: o.ranks,
      transport: o.transport,
      steps,
      date: new Date().toISOString(),
      machine: { cpus: cpus().length, model: cpus()[0]?.model ?? 'unknown', memoryGiB: Math.round(totalmem() / 2 ** 30), node: process.version },
      notes,
      configs,
      recovery,
    }
  })
}

/** One launch; runtime from the end of the first superstep to the end of the run. */
async function oneRun(o: BenchOptions, ft: FaultToleranceConfig | undefined): Promise<{ figures: RunFigures; steps: number; value: unknown }> {
  let firstAt: number | undefined
  let steps = 0
  let group: RunningRanks | undefined
  const checkpoints: RunFigures['checkpoints'] = []
  const privateBytes: (number | undefined)[] = new Array(o.ranks).fill(undefined)
  const r = await launch(o.program, {
    ranks: o.ranks,
    transport: o.transport,
    argv: o.argv,
    checkpoint: ft,
    onLog: () => {},
    onGroup: (g) => (group = g),
    onProgress: (_s, step, total) => {
      firstAt ??= performance.now()
      steps = Math.max(steps, total ?? step + 1, step + 1)
    },
    onCheckpoint: (e) => {
      checkpoints.push({ bytes: e.bytes, totalBytes: e.totalBytes, ms: e.ms, stallMs: e.stallMs, level: e.level })
      sample(group, privateBytes)
    },
  })
  const end = performance.now()
  return { figures: { runtimeMs: end - (firstAt ?? end), checkpoints, privateBytes }, steps, value: r.value }
}

function sample(group: RunningRanks | undefined, into: (number | undefined)[]): void {
  for (let r = 0; r < into.length; r++) {
    const pid = group?.pid?.(r)
    const b = pid === undefined ? undefined : privateResidentBytes(pid)
    if (b !== undefined) into[r] = Math.max(into[r] ?? 0, b)
  }
}

async function failureRun(o: BenchOptions, steps: number, every: number, dir: string, reference: string, spares: number): Promise<RecoveryFigures> {
  const failedStep = Math.floor(steps / 2)
  const events: Array<SupervisorEvent & { t: number }> = []
  const started = performance.now()
  const r = await new Supervisor(o.program, {
    ranks: o.ranks,
    transport: o.transport,
    argv: o.argv,
    checkpoint: { ...levelPolicy(o, every, dir), keep: 2, resume: false, async: o.async },
    inject: [{ rank: o.ranks > 1 ? 1 : 0, skeleton: 0, step: failedStep, phase: 'calculate' }],
    restarts: 1,
    spares,
    onLog: () => {},
    onEvent: (e) => events.push(e),
  }).run()
  const end = performance.now()
  const failure = events.find((e) => e.event === 'failure') as Extract<SupervisorEvent, { event: 'failure' }> & { t: number }
  const resume = events.find((e) => e.event === 'resume') as (Extract<SupervisorEvent, { event: 'resume' }> & { t: number }) | undefined
  const line = events.find((e) => e.event === 'recovery-line') as Extract<SupervisorEvent, { event: 'recovery-line' }> | undefined
  const restart = events.find((e) => e.event === 'start' && e.attempt === 1)
  const firstAfter = events.find((e) => e.event === 'progress' && e.attempt === 1)
  const recovered = events.find((e) => e.event === 'recovered') as Extract<SupervisorEvent, { event: 'recovered' }> | undefined
  const lineStep = line?.step
  const lostSteps = failedStep - (lineStep ?? -1) - 1
  return {
    spares,
    failedStep,
    lineStep,
    detectionMs: failure?.detectionMs ?? NaN,
    spawnMs: resume?.spawnMs ?? NaN,
    negotiateMs: resume?.negotiateMs ?? NaN,
    loadMs: resume?.loadMs ?? NaN,
    replayMs: resume?.replayMs ?? NaN,
    restoreMs: resume?.restoreMs ?? NaN,
    stopMs: recovered?.stopMs ?? NaN,
    firstStepMs: recovered?.firstStepMs ?? NaN,
    toFirstStepMs: recovered?.failureToFirstStepMs ?? (firstAfter && failure ? firstAfter.t - failure.t : NaN),
    lostSteps,
    lostMs: NaN,
    runtimeMs: end - started,
    sameResult: r.kind === 'done' && comparable(r.value) === reference && restart !== undefined,
  }
}

/** Checkpoint every `every` supersteps on the benchmark's level: the disk directory, or RAM only. */
function levelPolicy(o: BenchOptions, every: number, dir: string): Pick<FaultToleranceConfig, 'dir' | 'policy' | 'memory'> {
  if (o.level === 'memory') return { dir, policy: { kind: 'off' }, memory: { policy: { every } } }
  return { dir, policy: { every } }
}

/** A result without its timing fields, for equality across runs. */
function comparable(v: unknown): string {
  return JSON.stringify(v, (k, x) => (/seconds|time|ms$|wall|^resumed$/i.test(k) ? undefined : ArrayBuffer.isView(x) ? Array.from(x as Float64Array) : x))
}
