/**
 * Bytes per checkpoint: for each program (Jacobi, whose every cell changes;
 * swing; sparse, which changes 5 % of its state per disk checkpoint) and each way of storing its checkpoints (a variant: raw,
 * compressed, …), the bytes written per disk checkpoint over all ranks, the
 * ratio to raw, the time at the checkpoint point (the memory level's stall)
 * and in the background (checkpoint point to durable on disk, compression
 * included). Every variant writes disk checkpoints through the memory level
 * (`--async-checkpoints`), so they differ only in how the flush stores them.
 * Then the memory level's CRC32 next to its copy, per core, on the same
 * bytes (where the CRC is taken: docs/ARCHITECTURE.md).
 *
 * Then (bytes-xor.ts) what redundancy holds per rank, partner against
 * xor:G, and the rebuild of a lost node's files.
 *
 *   npm run bench:bytes -- [--programs jacobi,jacobi-spread,swing,sparse|none] [--variants raw,compressed,incremental,incremental-compressed] [--repeats 2] [--ranks 2] [--redundancy xor:4|none] [--xor-n 2048]
 *
 * A new way of storing checkpoints (redundancy, incremental) is one more
 * entry of VARIANTS; a new program one more entry of PROGRAMS.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { crc32 } from 'node:zlib'
import { benchArgs } from './args.js'
import { xorFigures } from './bytes-xor.js'
import { openRecord } from './record.js'
import type { FaultToleranceConfig } from '../src/checkpoint/config.js'
import type { CheckpointEvent } from '../src/checkpoint/events.js'
import { launch } from '../src/index.js'
import { summary, table } from '../src/bench/stats.js'

/** A program to checkpoint: its file, its options, and its disk policy (a few disk checkpoints per run). */
interface BytesProgram {
  file: string
  argv: string[]
  disk: FaultToleranceConfig['policy']
}

const PROGRAMS: Record<string, BytesProgram> = {
  // 2048² after 50–300 sweeps: the heat has reached the top rows only, the rest is still exact zeros.
  jacobi: { file: 'examples/jacobi/jacobi.ts', argv: ['--n', '2048', '--iterations', '300'], disk: { every: 50 } },
  // 512² after 500–3000 sweeps: every cell holds a value of its own (the worst case for a float grid).
  'jacobi-spread': { file: 'examples/jacobi/jacobi.ts', argv: ['--n', '512', '--iterations', '3000'], disk: { every: 500 } },
  // The large benchmark preset (180 dates): up to 25 MB of value function per rank and checkpoint.
  swing: { file: 'examples/swing/swing.ts', argv: ['--preset', 'large-g2d'], disk: { every: 45 } },
  // 32 MiB of doubles (16 MiB per rank on 2), 1 % of them rewritten per superstep: 5 % per disk checkpoint interval
  // (the incremental tests' fixture).
  sparse: { file: 'test/fixtures/sparse-update.ts', argv: ['--kib', '32768', '--steps', '200'], disk: { every: 5 } },
}

/** How a run stores its checkpoints, as settings added to the run's configuration. */
const VARIANTS: Record<string, Partial<FaultToleranceConfig>> = {
  raw: {},
  compressed: { compress: true },
  // A full disk checkpoint every 8, deltas of the changed 64 KiB blocks between.
  incremental: { incremental: { every: 8 } },
  // Both: a compressed full one every 8, deltas of the changed blocks compressed each on its own between.
  'incremental-compressed': { incremental: { every: 8 }, compress: true },
}

const USAGE = 'npm run bench:bytes -- [--programs jacobi,jacobi-spread,swing,sparse|none] [--variants raw,compressed,incremental,incremental-compressed] [--repeats 2] [--ranks 2] [--redundancy xor:4|none] [--xor-n 2048]'
const { values } = benchArgs(USAGE, () =>
  parseArgs({
    options: {
      programs: { type: 'string', default: Object.keys(PROGRAMS).join(',') },
      variants: { type: 'string', default: Object.keys(VARIANTS).join(',') },
      repeats: { type: 'string', default: '2' },
      ranks: { type: 'string', default: '2' },
      // What redundancy holds and the rebuild of a lost node (bytes-xor.ts); `none`: left out.
      redundancy: { type: 'string', default: 'xor:4' },
      'xor-n': { type: 'string', default: '2048' },
    },
  }),
)
const pick = <T>(all: Record<string, T>, list: string, what: string): [string, T][] =>
  list.split(',').map((k) => {
    if (!(k in all)) throw new Error(`unknown ${what} "${k}" (known: ${Object.keys(all).join(', ')})`)
    return [k, all[k]]
  })
const programs = values.programs === 'none' ? [] : pick(PROGRAMS, values.programs!, 'program')
const variants = pick(VARIANTS, values.variants!, 'variant')
const repeats = Number(values.repeats)
const ranks = Number(values.ranks)
const root = mkdtempSync(join(tmpdir(), 'molotof-bench-bytes-'))
const record = openRecord('bytes', `Bytes per checkpoint: ${programs.map(([p]) => p).join(', ')} × ${variants.map(([v]) => v).join(', ')}, ${ranks} ranks`)
let runs = 0

/** One run of `program` stored as `variant`: its disk and memory checkpoint events (rank 0's view). */
async function runOnce(program: BytesProgram, variant: Partial<FaultToleranceConfig>): Promise<CheckpointEvent[]> {
  const dir = join(root, `run-${runs++}`)
  const events: CheckpointEvent[] = []
  const checkpoint: FaultToleranceConfig = { dir, policy: program.disk, keep: 2, resume: false, async: true, ...variant }
  try {
    await launch(program.file, { ranks, transport: 'processes', argv: program.argv, checkpoint, hangTimeoutMs: 60_000, onLog: () => {}, onCheckpoint: (e) => events.push(e) })
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  return events
}

const med = (xs: number[]) => (xs.length === 0 ? NaN : summary(xs).median)
const rows: string[][] = []
for (const [name, program] of programs) {
  let rawBytes: number | undefined
  for (const [vname, variant] of variants) {
    const bytes: number[] = []
    const stall: number[] = []
    const background: number[] = []
    for (let rep = 0; rep < repeats; rep++) {
      const events = await runOnce(program, variant)
      for (const e of events) {
        if (e.level === 'disk') {
          bytes.push(e.totalBytes)
          background.push(e.ms)
        } else if (e.level === 'memory') stall.push(e.stallMs)
      }
    }
    const b = med(bytes)
    if (vname === 'raw') rawBytes = b
    const ratio = rawBytes === undefined ? NaN : rawBytes / b
    const key = `${name} ${vname}`
    record.figure(`${key}: bytes per disk checkpoint (all ranks)`, bytes, 'B')
    // The mean counts the full checkpoints of an incremental chain too (the median is a delta's).
    record.figure(`${key}: mean bytes per disk checkpoint (all ranks)`, bytes.reduce((a, x) => a + x, 0) / Math.max(1, bytes.length), 'B')
    record.figure(`${key}: stall at the checkpoint point`, stall, 'ms')
    record.figure(`${key}: checkpoint point to durable (background)`, background, 'ms')
    if (Number.isFinite(ratio)) record.figure(`${key}: raw / stored bytes`, ratio, '×')
    const mean = bytes.reduce((a, x) => a + x, 0) / Math.max(1, bytes.length)
    rows.push([name, vname, (b / 2 ** 20).toFixed(2), (mean / 2 ** 20).toFixed(2), Number.isFinite(ratio) ? ratio.toFixed(2) : '–', med(stall).toFixed(1), med(background).toFixed(0), String(bytes.length)])
  }
}
console.log(table(['program', 'variant', 'MiB / disk ckpt', 'mean MiB', 'raw / stored', 'stall ms', 'background ms', 'n'], rows))

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
  const g = /^xor:(\d+)$/.exec(values.redundancy!)
  if (!g) throw new Error(`--redundancy: xor:<G> or none (got ${values.redundancy})`)
  // Partner against xor:G on G one-rank nodes of a Jacobi grid, then a lost node's 2 × 16 MiB rebuilt.
  await xorFigures(record, { n: Number(values['xor-n']), nodes: Number(g[1]), setSize: Number(g[1]), repeats })
}
record.save()
