/**
 * How the framework's cost per superstep grows with the rank count.
 *
 * 1. runLocal (all ranks in this thread), Jacobi on a strip with a fixed
 *    number of rows per rank, P = 1 … 1024: microseconds of framework per
 *    rank-superstep (the run minus a kernel-only loop over the same strips)
 *    and bytes the V8 heap allocates per superstep. Each figure is the
 *    difference between a long and a short run, so set-up (partitions,
 *    allocation, JIT) cancels out.
 * 2. The processes transport with 2, 4, 8 ranks: the same figures per rank.
 * 3. Latency of allreduce, allgather and barrier for each P.
 *
 * A long run has max(steps, work / P) supersteps (work / 4 for processes),
 * so that every P does about the same work; timings are differences of the
 * fastest of `repeats` runs, allocations of the medians.
 *
 *   npm run bench:scale -- [--ranks 1,4,16,64,256,1024] [--processes 2,4,8] [--rows 8] [--cols 64] [--steps 1000] [--work 100000] [--repeats 5]
 */
import { parseArgs } from 'node:util'
import { launch, runLocal } from '../src/index.js'
import { allocatedBytes, startAllocationCount } from '../src/bench/alloc.js'
import { summary, table } from '../src/bench/stats.js'
import strip, { sweep, type StripResult } from './programs/strip-jacobi.js'
import collectives, { type CollectiveResult } from './programs/collective-loop.js'

const { values } = parseArgs({
  options: {
    ranks: { type: 'string', default: '1,4,16,64,256,1024' },
    processes: { type: 'string', default: '2,4,8' },
    rows: { type: 'string', default: '8' },
    cols: { type: 'string', default: '64' },
    steps: { type: 'string', default: '1000' },
    repeats: { type: 'string', default: '5' },
    work: { type: 'string', default: '100000' },
    'collective-repeats': { type: 'string', default: '100' },
  },
})
const list = (s: string) => (s ? s.split(',').map(Number) : [])
const localRanks = list(values.ranks)
const processRanks = list(values.processes)
const rows = Number(values.rows)
const cols = Number(values.cols)
const steps = Number(values.steps)
const repeats = Number(values.repeats)
const work = Number(values.work)
const collectiveRepeats = Number(values['collective-repeats'])
const SHORT = 10
// A loaded host can take more than the default 2 s to start a rank process: not a hang.
const quiet = { onLog: () => {}, hangTimeoutMs: 60_000 }
const policy = ['--policy', 'every:1000000000']
const argv = (iterations: number, extra: string[] = []) => ['--rows-per-rank', String(rows), '--cols', String(cols), '--iterations', String(iterations), ...policy, ...extra]
const median = (xs: number[]) => summary(xs).median
const f = (x: number, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : '—')

/** Seconds of `iterations` sweeps over `ranks` separate strips, kernel only (no framework). */
function kernelOnly(ranks: number, iterations: number): number {
  const w = cols + 2
  const grids = Array.from({ length: ranks }, () => [new Float64Array((rows + 2) * w), new Float64Array((rows + 2) * w)])
  const t0 = performance.now()
  for (let it = 0; it < iterations; it++) {
    for (const g of grids) {
      sweep(g[it & 1], w, 0, g[(it + 1) & 1], w, 0, 1, rows + 1, 1, cols + 1)
    }
  }
  return (performance.now() - t0) / 1000
}

async function localRun(ranks: number, iterations: number): Promise<{ seconds: number; allocated: number }> {
  const count = startAllocationCount()
  const t0 = performance.now()
  await runLocal(strip, { ranks, argv: argv(iterations), checkpoint: undefined })
  const seconds = (performance.now() - t0) / 1000
  return { seconds, allocated: allocatedBytes(count) }
}

console.log(`bench:scale — Jacobi strip ${rows} rows per rank × ${cols} columns; long runs of max(${steps}, ${work}/P) supersteps minus ${SHORT}-superstep runs; fastest of ${repeats}`)
console.log(`node ${process.version}, ${process.platform}/${process.arch}\n`)

// Each figure is a difference of fastest runs: on a shared host noise only
// ever adds time, so the minimum over repeats is the estimate that survives it.
const min = (xs: number[]) => Math.min(...xs)
/** Supersteps of a long run with P ranks in one thread: about `work` rank-supersteps. */
const stepsFor = (P: number) => Math.max(steps, Math.ceil(work / P))

// 1. runLocal
const localRows: string[][] = []
const localFigures: Record<number, number> = {}
for (const P of localRanks) {
  const long = stepsFor(P)
  const supersteps = long - SHORT
  const shortRuns: Array<{ seconds: number; allocated: number }> = []
  const longRuns: Array<{ seconds: number; allocated: number }> = []
  const kShort: number[] = []
  const kLong: number[] = []
  // Warm-up: the JIT compiles (and its code counts as heap allocation) before anything is measured.
  await localRun(P, long)
  kernelOnly(P, long)
  for (let r = 0; r < repeats; r++) {
    shortRuns.push(await localRun(P, SHORT))
    longRuns.push(await localRun(P, long))
    kShort.push(kernelOnly(P, SHORT))
    kLong.push(kernelOnly(P, long))
  }
  const k = min(kLong) - min(kShort)
  const fw = ((min(longRuns.map((x) => x.seconds)) - min(shortRuns.map((x) => x.seconds)) - k) / (P * supersteps)) * 1e6
  const alloc = (median(longRuns.map((x) => x.allocated)) - median(shortRuns.map((x) => x.allocated))) / supersteps
  localFigures[P] = fw
  localRows.push([String(P), String(long), f((k / (P * supersteps)) * 1e6, 2), f(fw, 2), f(alloc, 0), f(alloc / P, 1)])
  process.stderr.write(`runLocal P=${P} done\n`)
}
if (localRows.length) {
  console.log('runLocal (one thread), per rank-superstep:')
  console.log(table(['P', 'supersteps', 'kernel µs', 'framework µs', 'bytes alloc / superstep', 'bytes / rank-superstep'], localRows))
  const p4 = localFigures[4]
  const top = Math.max(...localRanks)
  if (p4 !== undefined && top !== 4) console.log(`framework at P=${top} / at P=4: ${(localFigures[top] / p4).toFixed(2)}\n`)
}

// 2. processes
const procRows: string[][] = []
for (const P of processRanks) {
  const long = Math.max(steps, Math.ceil(work / 4))
  const supersteps = long - SHORT
  const run = async (iterations: number) => {
    const r = await launch<StripResult>('bench/programs/strip-jacobi.ts', { ranks: P, transport: 'processes', argv: argv(iterations, ['--count-alloc']), ...quiet })
    return { seconds: Math.max(...r.values.map((v) => v.seconds)), allocated: Math.max(...r.values.map((v) => v.allocated)) }
  }
  const shortRuns: Array<{ seconds: number; allocated: number }> = []
  const longRuns: Array<{ seconds: number; allocated: number }> = []
  const kShort: number[] = []
  const kLong: number[] = []
  for (let r = 0; r < repeats; r++) {
    longRuns.push(await run(long))
    shortRuns.push(await run(SHORT))
    kShort.push(kernelOnly(1, SHORT))
    kLong.push(kernelOnly(1, long))
  }
  const k = min(kLong) - min(kShort)
  const fw = ((min(longRuns.map((x) => x.seconds)) - min(shortRuns.map((x) => x.seconds)) - k) / supersteps) * 1e6
  const alloc = (median(longRuns.map((x) => x.allocated)) - median(shortRuns.map((x) => x.allocated))) / supersteps
  procRows.push([String(P), String(long), f(fw, 2), f(alloc, 0)])
  process.stderr.write(`processes P=${P} done\n`)
}
if (procRows.length) {
  console.log('processes transport, per rank-superstep (slowest rank; bytes: the rank that allocates most):')
  console.log(table(['P', 'supersteps', 'framework µs', 'bytes alloc / rank-superstep'], procRows))
  console.log()
}

// 3. collectives
const collRows: string[][] = []
for (const P of localRanks) {
  const r = await runLocal(collectives, { ranks: P, argv: ['--repeats', String(collectiveRepeats)] })
  const v = r[0] as CollectiveResult
  collRows.push(['runLocal', String(P), f(v.allreduce * 1e6), f((v.allreduce * 1e6) / P, 2), f(v.allgather * 1e6), f(v.barrier * 1e6)])
}
for (const P of processRanks) {
  const r = await launch<CollectiveResult>('bench/programs/collective-loop.ts', { ranks: P, transport: 'processes', argv: ['--repeats', String(collectiveRepeats)], ...quiet })
  const v = r.value
  collRows.push(['processes', String(P), f(v.allreduce * 1e6), f((v.allreduce * 1e6) / P, 2), f(v.allgather * 1e6), f(v.barrier * 1e6)])
}
if (collRows.length) {
  console.log('collectives, µs per operation (runLocal: all ranks in one thread, so the wall time is the whole group\'s work; per rank = / P):')
  console.log(table(['transport', 'P', 'allreduce', 'allreduce / P', 'allgather', 'barrier'], collRows))
}
