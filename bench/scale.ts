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
 *   npm run bench:scale -- [--ranks 1,4,16,64,256,1024] [--processes 2,4,8] [--rows 8] [--cols 64] [--steps 200] [--repeats 3]
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
    steps: { type: 'string', default: '200' },
    repeats: { type: 'string', default: '3' },
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
const collectiveRepeats = Number(values['collective-repeats'])
const SHORT = 10
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

console.log(`bench:scale — Jacobi strip ${rows} rows per rank × ${cols} columns, ${steps} supersteps (minus a ${SHORT}-superstep run), median of ${repeats}`)
console.log(`node ${process.version}, ${process.platform}/${process.arch}\n`)

// 1. runLocal
const localRows: string[][] = []
const localFigures: Record<number, number> = {}
for (const P of localRanks) {
  const fw: number[] = []
  const kern: number[] = []
  const alloc: number[] = []
  // Warm-up: the JIT compiles (and its code counts as heap allocation) before anything is measured.
  await localRun(P, steps)
  kernelOnly(P, steps)
  for (let r = 0; r < repeats; r++) {
    const short = await localRun(P, SHORT)
    const long = await localRun(P, steps)
    const k = kernelOnly(P, steps) - kernelOnly(P, SHORT)
    const supersteps = steps - SHORT
    fw.push(((long.seconds - short.seconds - k) / (P * supersteps)) * 1e6)
    kern.push((k / (P * supersteps)) * 1e6)
    alloc.push((long.allocated - short.allocated) / supersteps)
  }
  localFigures[P] = median(fw)
  localRows.push([String(P), f(median(kern), 2), f(median(fw), 2), f(median(alloc), 0), f(median(alloc) / P, 1)])
  process.stderr.write(`runLocal P=${P} done\n`)
}
if (localRows.length) {
  console.log('runLocal (one thread), per rank-superstep:')
  console.log(table(['P', 'kernel µs', 'framework µs', 'bytes alloc / superstep', 'bytes / rank-superstep'], localRows))
  const p4 = localFigures[4]
  const top = Math.max(...localRanks)
  if (p4 !== undefined && top !== 4) console.log(`framework at P=${top} / at P=4: ${(localFigures[top] / p4).toFixed(2)}\n`)
}

// 2. processes
const procRows: string[][] = []
for (const P of processRanks) {
  const fw: number[] = []
  const alloc: number[] = []
  const run = async (iterations: number) => {
    const r = await launch<StripResult>('bench/programs/strip-jacobi.ts', { ranks: P, transport: 'processes', argv: argv(iterations, ['--count-alloc']), onLog: () => {} })
    return { seconds: Math.max(...r.values.map((v) => v.seconds)), allocated: Math.max(...r.values.map((v) => v.allocated)) }
  }
  for (let r = 0; r < repeats; r++) {
    const long = await run(steps)
    const short = await run(SHORT)
    const k = kernelOnly(1, steps) - kernelOnly(1, SHORT)
    const supersteps = steps - SHORT
    fw.push(((long.seconds - short.seconds - k) / supersteps) * 1e6)
    alloc.push((long.allocated - short.allocated) / supersteps)
  }
  procRows.push([String(P), f(median(fw), 2), f(median(alloc), 0)])
  process.stderr.write(`processes P=${P} done\n`)
}
if (procRows.length) {
  console.log('processes transport, per rank-superstep (slowest rank; bytes: the rank that allocates most):')
  console.log(table(['P', 'framework µs', 'bytes alloc / rank-superstep'], procRows))
  console.log()
}

// 3. collectives
const collRows: string[][] = []
for (const P of localRanks) {
  const t0 = performance.now()
  const r = await runLocal(collectives, { ranks: P, argv: ['--repeats', String(collectiveRepeats)] })
  void t0
  const v = r[0] as CollectiveResult
  collRows.push(['runLocal', String(P), f(v.allreduce * 1e6), f((v.allreduce * 1e6) / P, 2), f(v.allgather * 1e6), f(v.barrier * 1e6)])
}
for (const P of processRanks) {
  const r = await launch<CollectiveResult>('bench/programs/collective-loop.ts', { ranks: P, transport: 'processes', argv: ['--repeats', String(collectiveRepeats)], onLog: () => {} })
  const v = r.value
  collRows.push(['processes', String(P), f(v.allreduce * 1e6), f((v.allreduce * 1e6) / P, 2), f(v.allgather * 1e6), f(v.barrier * 1e6)])
}
if (collRows.length) {
  console.log('collectives, µs per operation (runLocal: all ranks in one thread, so the wall time is the whole group\'s work; per rank = / P):')
  console.log(table(['transport', 'P', 'allreduce', 'allreduce / P', 'allgather', 'barrier'], collRows))
}
