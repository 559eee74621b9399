/**
 * Checkpoint figures: sizes (minimal vs default vs the possessed bytes), write
 * throughput next to a plain write+fsync+rename of the same bytes (side by
 * side, interleaved), recovery-line negotiation time and light replay speed.
 *
 *   npm run bench:checkpoint -- [--n 2048] [--repeats 7]
 */
import { closeSync, fsyncSync, mkdtempSync, openSync, readdirSync, renameSync, rmSync, statSync, writevSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { benchArgs } from './args.js'
import { openRecord } from './record.js'
import { encodeRankFile } from '../src/checkpoint/format/rank-file.js'
import { CheckpointStore } from '../src/checkpoint/store/checkpoint-store.js'
import { launch, RunInterruptedError } from '../src/index.js'
import { summary, table } from '../src/bench/stats.js'

const USAGE = 'npm run bench:checkpoint -- [--n 2048] [--repeats 7]'
const { values } = benchArgs(USAGE, () => parseArgs({ options: { n: { type: 'string', default: '2048' }, repeats: { type: 'string', default: '7' } } }))
const n = Number(values.n)
const repeats = Number(values.repeats)
const ranks = 2
const record = openRecord('checkpoint', 'Checkpoint sizes, write throughput, resume and replay')
const root = mkdtempSync(join(tmpdir(), 'molotof-bench-ckpt-'))
const quiet = { onLog: () => {} }
const mib = (b: number) => (b / 2 ** 20).toFixed(2)
/** The runs below stop on purpose (`interrupt`) to leave a checkpoint; any other error is real. */
const interrupted = (e: unknown): void => {
  if (!(e instanceof RunInterruptedError)) throw e
}

try {
  // 1. Sizes per rank, Jacobi n×n on 2 ranks.
  const possessedBytes = Math.ceil(n / ranks) * n * 8
  const sizes: Record<string, number> = {}
  for (const minimal of [true, false]) {
    const dir = join(root, minimal ? 'minimal' : 'default')
    await launch('examples/jacobi/jacobi.ts', {
      ranks,
      argv: ['--n', String(n), '--iterations', '1', minimal ? '--minimal' : '--no-minimal'],
      checkpoint: { dir, policy: { every: 1 }, keep: 1, resume: false },
      ...quiet,
    })
    const ck = readdirSync(dir).filter((f) => f.startsWith('ckpt-')).sort().pop()!
    sizes[minimal ? 'minimal' : 'default'] = statSync(join(dir, ck, 'rank-0.mlf')).size
  }
  console.log(`\nCheckpoint size per rank, Jacobi n=${n} on ${ranks} ranks (rank 0; possessed subdomain = ${mib(possessedBytes)} MiB):`)
  console.log(
    table(
      ['checkpoint', 'bytes', 'MiB', 'minus possessed bytes', '× minimal'],
      [
        ['minimal (grid just computed)', String(sizes.minimal), mib(sizes.minimal), String(sizes.minimal - possessedBytes), '1.000'],
        ['default (both grids)', String(sizes.default), mib(sizes.default), String(sizes.default - possessedBytes), (sizes.default / sizes.minimal).toFixed(3)],
      ],
    ),
  )

  // 2. Write throughput: molotof's rank file vs a plain durable write of the same bytes.
  const payload = new Float64Array(new SharedArrayBuffer(possessedBytes))
  for (let i = 0; i < payload.length; i++) payload[i] = Math.sin(i)
  const bytes = new Uint8Array(payload.buffer)
  const store = new CheckpointStore(join(root, 'throughput'))
  let seq = 0
  const molotof = async () => {
    const t0 = performance.now()
    const parts = encodeRankFile({ fingerprint: 'bench', skeleton: 0, step: seq, rank: 0, size: 1, settings: {} }, [
      { name: 'read', kind: 'heavy', dtype: 'float64', box: { lower: [0, 0], upper: [n / 2, n] }, bytes },
    ])
    await store.writeRankFile(seq++, 0, parts)
    return performance.now() - t0
  }
  const plainDir = join(root, 'plain')
  await import('node:fs/promises').then((f) => f.mkdir(plainDir))
  let k = 0
  const plain = async () => {
    const t0 = performance.now()
    const tmp = join(plainDir, `f${k}.tmp`)
    const fd = openSync(tmp, 'w')
    writevSync(fd, [bytes])
    fsyncSync(fd)
    closeSync(fd)
    renameSync(tmp, join(plainDir, `f${k++}`))
    const d = openSync(plainDir, 'r')
    fsyncSync(d)
    closeSync(d)
    return performance.now() - t0
  }
  const tm: number[] = []
  const tp: number[] = []
  for (let r = -1; r < repeats; r++) {
    const a = await molotof()
    const b = await plain()
    if (r >= 0) {
      tm.push(a)
      tp.push(b)
    }
  }
  const thr = (ms: number) => possessedBytes / 2 ** 20 / (ms / 1000)
  const sm = summary(tm)
  const sp = summary(tp)
  console.log(`\nWrite throughput, ${mib(possessedBytes)} MiB per write, ${repeats} interleaved repeats (+1 warm-up):`)
  console.log(
    table(
      ['writer', 'ms min', 'median', 'max', 'MiB/s (median)'],
      [
        ['molotof rank file (header, CRC32, fsync, rename, dir fsync)', sm.min.toFixed(1), sm.median.toFixed(1), sm.max.toFixed(1), thr(sm.median).toFixed(0)],
        ['plain write + fsync + rename + dir fsync', sp.min.toFixed(1), sp.median.toFixed(1), sp.max.toFixed(1), thr(sp.median).toFixed(0)],
      ],
    ),
  )
  console.log(`molotof / plain throughput: ${(sp.median / sm.median).toFixed(3)}`)
  record.figure(`molotof rank file write, ${mib(possessedBytes)} MiB`, tm, 'ms')
  record.figure(`plain write + fsync + rename, ${mib(possessedBytes)} MiB`, tp, 'ms')
  record.figure('molotof / plain write throughput (per repeat)', tp.map((p, i) => p / tm[i]), '×', { headline: 'checkpoint write throughput against a plain write + fsync', target: '≥ 0.9' })

  // 3. Recovery line negotiation and restore, Jacobi n×n on 2 ranks (threads).
  const dir = join(root, 'resume')
  const ck = { dir, policy: { every: 5 }, keep: 2, resume: false }
  const argv = ['--n', String(n), '--iterations', '20']
  await launch('examples/jacobi/jacobi.ts', { ranks, argv, checkpoint: { ...ck, interrupt: { skeleton: 0, step: 12 } }, ...quiet }).catch(interrupted)
  const logs: string[] = []
  await launch('examples/jacobi/jacobi.ts', { ranks, argv, checkpoint: { ...ck, resume: true }, onLog: (_r, t) => logs.push(t) })
  console.log(`\nResume of Jacobi n=${n} on ${ranks} ranks (rank 0's log):`)
  for (const l of logs.filter((l) => /resuming|replayed/.test(l))) console.log(`  ${l}`)

  // 4. Replay speed: 100,000 light supersteps.
  const rdir = join(root, 'replay')
  const steps = 100_000
  const rck = { dir: rdir, policy: { every: steps - 10 }, keep: 1, resume: false }
  await launch('bench/programs/light-loop.ts', { ranks: 1, argv: ['--steps', String(steps)], checkpoint: { ...rck, interrupt: { skeleton: 0, step: steps - 10 } }, ...quiet }).catch(
    interrupted,
  )
  const rlogs: string[] = []
  const t0 = performance.now()
  await launch('bench/programs/light-loop.ts', { ranks: 1, argv: ['--steps', String(steps)], checkpoint: { ...rck, resume: true }, onLog: (_r, t) => rlogs.push(t) })
  console.log(`\nReplay of ${steps} light supersteps (rank 0's log; whole resumed run ${(performance.now() - t0).toFixed(0)} ms including thread start):`)
  for (const l of rlogs.filter((l) => /resuming|replayed/.test(l))) console.log(`  ${l}`)
} finally {
  rmSync(root, { recursive: true, force: true })
}
record.save()
