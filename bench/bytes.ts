/**
 * Bytes per checkpoint, one matrix: for each program (Jacobi, whose every
 * cell changes; swing; sparse, which changes 5 % of its state per disk
 * checkpoint), each redundancy (`partner` copies, `xor:G` parity) and each
 * way of storing disk checkpoints (a variant: raw, compressed, incremental,
 * both), on `nodes` one-rank "nodes" each with its own directory: the bytes
 * written per checkpoint on the disk level and on the redundancy level (all
 * ranks), the bytes held on each after the run (own checkpoints, partner
 * copies or parity slices), the time at the checkpoint point (the memory
 * level's stall) and in the background (to durable on disk; to the copies'
 * or slices' commit), and the --resume after node 1 lost its directory and
 * its RAM: the XOR rebuild's time (its log line) and the whole resume's.
 * Every variant writes disk checkpoints through the memory level
 * (`--async-checkpoints`), so they differ only in how the flush stores them.
 * Then the memory level's CRC32 next to its copy, per core, on the same
 * bytes (where the CRC is taken: docs/ARCHITECTURE.md), and (bytes-xor.ts)
 * a lost node's 2 × 16 MiB rebuilt, in a run and in one thread.
 *
 *   npm run bench:bytes -- [--quick] [--programs jacobi,jacobi-spread,swing,sparse|none] [--redundancies partner,xor:4] [--variants raw,compressed,incremental,incremental-compressed] [--repeats 2] [--nodes 4] [--redundancy xor:4|none]
 *
 * A new way of storing checkpoints (redundancy, incremental) is one more
 * entry of VARIANTS; a new program one more entry of PROGRAMS.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { crc32 } from 'node:zlib'
import { benchArgs } from './args.js'
import { xorRebuildFigures } from './bytes-xor.js'
import { memoryDirFor } from '../src/checkpoint/store/memory-level.js'
import { openRecord } from './record.js'
import type { FaultToleranceConfig } from '../src/checkpoint/config.js'
import type { CheckpointEvent } from '../src/checkpoint/events.js'
import { launch } from '../src/index.js'
import { summary, table } from '../src/bench/stats.js'

/** A program to checkpoint: its file, its options, its disk policy (a few disk checkpoints per run), and a checkpoint step near the end to stop at (then a node is lost and the run resumed). */
interface BytesProgram {
  file: string
  argv: string[]
  disk: FaultToleranceConfig['policy']
  stopAt: { skeleton: number; step: number }
}

const PROGRAMS: Record<string, BytesProgram> = {
  // 2048² after 50–300 sweeps: the heat has reached the top rows only, the rest is still exact zeros.
  jacobi: { file: 'examples/jacobi/jacobi.ts', argv: ['--n', '2048', '--iterations', '300'], disk: { every: 50 }, stopAt: { skeleton: 0, step: 249 } },
  // 512² after 500–3000 sweeps: every cell holds a value of its own (the worst case for a float grid).
  'jacobi-spread': { file: 'examples/jacobi/jacobi.ts', argv: ['--n', '512', '--iterations', '3000'], disk: { every: 500 }, stopAt: { skeleton: 0, step: 2499 } },
  // The large benchmark preset (180 dates): up to 25 MB of value function per rank and checkpoint.
  swing: { file: 'examples/swing/swing.ts', argv: ['--preset', 'large-g2d'], disk: { every: 45 }, stopAt: { skeleton: 0, step: 134 } },
  // 32 MiB of doubles, 1 % of them rewritten per superstep: 5 % per disk checkpoint interval (the incremental tests' fixture).
  sparse: { file: 'test/fixtures/sparse-update.ts', argv: ['--kib', '32768', '--steps', '200'], disk: { every: 5 }, stopAt: { skeleton: 0, step: 194 } },
}

/** `--quick`: the same programs, smaller and shorter (a minute or two for the whole matrix). */
const QUICK: Record<string, BytesProgram> = {
  jacobi: { ...PROGRAMS.jacobi, argv: ['--n', '512', '--iterations', '100'], disk: { every: 25 }, stopAt: { skeleton: 0, step: 74 } },
  'jacobi-spread': { ...PROGRAMS['jacobi-spread'], argv: ['--n', '256', '--iterations', '400'], disk: { every: 100 }, stopAt: { skeleton: 0, step: 299 } },
  swing: { ...PROGRAMS.swing, argv: ['--preset', 'large-g2d', '--n', '45'], disk: { every: 15 }, stopAt: { skeleton: 0, step: 29 } },
  sparse: { ...PROGRAMS.sparse, argv: ['--kib', '4096', '--steps', '40'], disk: { every: 5 }, stopAt: { skeleton: 0, step: 34 } },
}

/** How a run stores its disk checkpoints, as settings added to the run's configuration. */
const VARIANTS: Record<string, Partial<FaultToleranceConfig>> = {
  raw: {},
  compressed: { compress: true },
  // A full disk checkpoint every 8, deltas of the changed 64 KiB blocks between.
  incremental: { incremental: { every: 8 } },
  // Both: a compressed full one every 8, deltas of the changed blocks compressed each on its own between.
  'incremental-compressed': { incremental: { every: 8 }, compress: true },
}

const USAGE =
  'npm run bench:bytes -- [--quick] [--programs jacobi,jacobi-spread,swing,sparse|none] [--redundancies partner,xor:4] [--variants raw,compressed,incremental,incremental-compressed] [--repeats 2] [--nodes 4] [--redundancy xor:4|none]'
const { values } = benchArgs(USAGE, () =>
  parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      programs: { type: 'string', default: 'jacobi,swing,sparse' },
      redundancies: { type: 'string', default: 'partner,xor:4' },
      variants: { type: 'string', default: Object.keys(VARIANTS).join(',') },
      repeats: { type: 'string', default: '2' },
      nodes: { type: 'string', default: '4' },
      // A lost node's 2 × 16 MiB rebuilt (bytes-xor.ts); `none`: left out.
      redundancy: { type: 'string', default: 'xor:4' },
    },
  }),
)
const pick = <T>(all: Record<string, T>, list: string, what: string): [string, T][] =>
  list.split(',').map((k) => {
    if (!(k in all)) throw new Error(`unknown ${what} "${k}" (known: ${Object.keys(all).join(', ')})`)
    return [k, all[k]]
  })
const nodes = Number(values.nodes)
/** `partner` or `xor:G`, as run settings (one rank per node). */
function redundancyOf(name: string): Partial<FaultToleranceConfig> {
  if (name === 'partner') return { partner: { ranksPerNode: 1 } }
  const g = /^xor:(\d+)$/.exec(name)
  if (!g) throw new Error(`--redundancies: partner or xor:<G> (got ${name})`)
  return { xor: { setSize: Number(g[1]), ranksPerNode: 1 } }
}
const programs = values.programs === 'none' ? [] : pick(values.quick ? QUICK : PROGRAMS, values.programs!, 'program')
const redundancies = values.redundancies!.split(',').map((r) => [r, redundancyOf(r)] as const)
const variants = pick(VARIANTS, values.variants!, 'variant')
const repeats = Number(values.repeats)
const root = mkdtempSync(join(tmpdir(), 'molotof-bench-bytes-'))
const record = openRecord(
  'bytes',
  `Bytes per checkpoint${values.quick ? ' (quick)' : ''}: ${programs.map(([p]) => p).join(', ')} × ${redundancies.map(([r]) => r).join(', ')} × ${variants.map(([v]) => v).join(', ')}, ${nodes} nodes of 1 rank`,
)
let runs = 0

/** Bytes of the files under `dir` (recursively), 0 when it is not there. */
function bytesUnder(dir: string): number {
  if (!existsSync(dir)) return 0
  let n = 0
  for (const e of readdirSync(dir, { withFileTypes: true })) n += e.isDirectory() ? bytesUnder(join(dir, e.name)) : statSync(join(dir, e.name)).size
  return n
}

interface Cell {
  events: CheckpointEvent[]
  /** Held on disk after the stop, all nodes: own checkpoints, and the redundancy level's (partner copies or parity slices). */
  heldOwn: number
  heldRedundancy: number
  /** The XOR rebuild's time (its log line), the whole --resume's wall time; undefined when the run did not stop where asked. */
  rebuildMs?: number
  resumeMs?: number
}

/** One run stopped near its end, node 1's directory and RAM deleted, then resumed. */
async function runOnce(program: BytesProgram, redundancy: Partial<FaultToleranceConfig>, variant: Partial<FaultToleranceConfig>): Promise<Cell> {
  const base = join(root, `run-${runs++}-`)
  const events: CheckpointEvent[] = []
  const checkpoint: FaultToleranceConfig = { dir: `${base}{rank}`, policy: program.disk, keep: 2, resume: false, async: true, ...redundancy, ...variant }
  const opts = { ranks: nodes, transport: 'processes' as const, argv: program.argv, hangTimeoutMs: 120_000 }
  const nodeDirs = Array.from({ length: nodes }, (_, r) => `${base}${r}`)
  try {
    const stopped = await launch(program.file, { ...opts, checkpoint: { ...checkpoint, interrupt: program.stopAt }, onLog: () => {}, onCheckpoint: (e) => events.push(e) }).then(
      () => false,
      (e: Error) => /interrupted/.test(e.message) || (() => { throw e })(),
    )
    const sub = redundancy.xor ? 'xor' : 'partner'
    const heldRedundancy = nodeDirs.reduce((n, d) => n + bytesUnder(join(d, sub)), 0)
    const heldOwn = nodeDirs.reduce((n, d) => n + bytesUnder(d), 0) - heldRedundancy
    if (!stopped) return { events, heldOwn, heldRedundancy }
    rmSync(nodeDirs[1], { recursive: true, force: true })
    rmSync(memoryDirFor(nodeDirs[1]), { recursive: true, force: true })
    const logs: string[] = []
    const t0 = performance.now()
    await launch(program.file, { ...opts, checkpoint: { ...checkpoint, resume: true, resumeRequest: 'required' }, onLog: (_r, t) => logs.push(t) })
    const resumeMs = performance.now() - t0
    const m = /rebuilt the lost files of checkpoint \d+ .*\((\d+) ms, checksums verified\)/.exec(logs.join('\n'))
    return { events, heldOwn, heldRedundancy, resumeMs, ...(m ? { rebuildMs: Number(m[1]) } : {}) }
  } finally {
    for (const d of nodeDirs) {
      rmSync(d, { recursive: true, force: true })
      rmSync(memoryDirFor(d), { recursive: true, force: true })
    }
  }
}

const med = (xs: number[]) => (xs.length === 0 ? NaN : summary(xs).median)
const mean = (xs: number[]) => (xs.length === 0 ? NaN : xs.reduce((a, x) => a + x, 0) / xs.length)
const MiB = (b: number) => (Number.isFinite(b) ? (b / 2 ** 20).toFixed(2) : '–')
const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : '–')
const rows: string[][] = []
for (const [name, program] of programs) {
  let rawBytes: number | undefined
  for (const [rname, redundancy] of redundancies) {
    for (const [vname, variant] of variants) {
      const disk: number[] = []
      const level: number[] = []
      const stall: number[] = []
      const diskMs: number[] = []
      const levelMs: number[] = []
      const heldOwn: number[] = []
      const heldLevel: number[] = []
      const rebuild: number[] = []
      const resume: number[] = []
      for (let rep = 0; rep < repeats; rep++) {
        const cell = await runOnce(program, redundancy, variant)
        for (const e of cell.events) {
          if (e.level === 'disk') (disk.push(e.totalBytes), diskMs.push(e.ms))
          else if (e.level === 'memory') stall.push(e.stallMs)
          else if (e.level === 'partner' || e.level === 'xor') (level.push(e.totalBytes), levelMs.push(e.ms))
        }
        heldOwn.push(cell.heldOwn)
        heldLevel.push(cell.heldRedundancy)
        if (cell.rebuildMs !== undefined) rebuild.push(cell.rebuildMs)
        if (cell.resumeMs !== undefined) resume.push(cell.resumeMs)
      }
      // Bytes are exact: the mean over a run's checkpoints counts an incremental chain's full files too.
      const written = mean(disk)
      if (rawBytes === undefined && vname === 'raw') rawBytes = written
      const ratio = rawBytes === undefined ? NaN : rawBytes / written
      const key = `${name} ${rname} ${vname}`
      record.figure(`${key}: disk bytes written per checkpoint (all ranks, mean)`, written, 'B')
      record.figure(`${key}: ${rname} bytes written per checkpoint (all ranks, mean)`, mean(level), 'B')
      record.figure(`${key}: disk bytes held after the run (all nodes)`, heldOwn, 'B')
      record.figure(`${key}: ${rname} bytes held after the run (all nodes)`, heldLevel, 'B')
      record.figure(`${key}: stall at the checkpoint point`, stall, 'ms')
      record.figure(`${key}: checkpoint point to durable on disk (background)`, diskMs, 'ms')
      record.figure(`${key}: checkpoint point to ${rname} committed (background)`, levelMs, 'ms')
      if (rebuild.length > 0) record.figure(`${key}: XOR rebuild of a lost node's files at --resume`, rebuild, 'ms')
      if (resume.length > 0) record.figure(`${key}: --resume after a lost node (wall)`, resume, 'ms')
      // The targets as README headlines: deltas of a program changing ≤ 10 % per interval, and what XOR parity holds.
      const headline =
        name === 'sparse' && rname === 'partner' && vname === 'incremental' ? { headline: 'incremental checkpoints, 5 % of the state changed per interval: disk bytes raw / written', target: '≥ 5×' } : {}
      if (Number.isFinite(ratio)) record.figure(`${key}: raw / written disk bytes`, ratio, '×', headline)
      if (rname.startsWith('xor:') && vname === 'raw') {
        const g = Number(rname.slice(4))
        record.figure(`${key}: ${rname} bytes held / disk bytes held`, med(heldLevel) / med(heldOwn), '×', name === 'jacobi' ? { headline: `memory held for redundancy with ${rname}, share of a checkpoint (Jacobi)`, target: `≤ 1/(G−1) = ${(1 / (g - 1)).toFixed(3)}, plus a slice header` } : {})
      }
      rows.push([
        name, rname, vname, MiB(written), Number.isFinite(ratio) ? ratio.toFixed(2) : '–', MiB(mean(level)), MiB(med(heldOwn)), MiB(med(heldLevel)),
        med(stall).toFixed(1), ms(med(diskMs)), ms(med(levelMs)), ms(med(rebuild)), ms(med(resume)), String(disk.length),
      ])
    }
  }
}
console.log(
  table(
    ['program', 'redundancy', 'variant', 'disk MiB/ckpt', 'raw/written', 'red. MiB/ckpt', 'disk MiB held', 'red. MiB held', 'stall ms', 'to disk ms', 'to red. ms', 'rebuild ms', 'resume ms', 'n'],
    rows,
  ),
)

// The memory level's CRC32 next to its copy, one core each, on 16 MiB of doubles.
const src = new Uint8Array(new Float64Array(2 ** 21).map((_, i) => Math.sin(i) * 1e3).buffer)
const dst = new Uint8Array(src.byteLength)
const cpuMs = (f: () => void): number[] => {
  const out: number[] = []
  for (let i = 0; i < 9; i++) {
    const t = process.cpuUsage()
    f()
    const d = process.cpuUsage(t)
    out.push((d.user + d.system) / 1000)
  }
  return out
}
const copyMs = cpuMs(() => dst.set(src))
const crcMs = cpuMs(() => crc32(dst))
record.figure('memory level: copy of 16 MiB (CPU, one core)', copyMs, 'ms')
record.figure('memory level: CRC32 of 16 MiB (CPU, one core)', crcMs, 'ms')
console.log(`memory level, 16 MiB: copy ${med(copyMs).toFixed(1)} ms, CRC32 ${med(crcMs).toFixed(1)} ms of CPU (one core each)`)
rmSync(root, { recursive: true, force: true })
if (values.redundancy !== 'none') {
  // A lost node's 2 × 16 MiB rebuilt: in a run (4 nodes × 2 ranks, xor:4) and in one thread.
  await xorRebuildFigures(record, repeats)
}
record.save()
