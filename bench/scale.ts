/**
 * How the framework's cost per superstep grows with the rank count.
 *
 * 1. runLocal (all ranks in this thread), Jacobi on a strip with a fixed
 *    number of rows per rank, P = 1 … 1024: microseconds of framework per
 *    rank-superstep (the run minus a kernel-only loop over the same strips)
 *    and bytes the V8 heap allocates per superstep. Each figure is the
 *    difference between a long and a short run, so set-up (partitions,
 *    allocation, JIT) cancels out. The short run has at least P supersteps:
 *    the ranks of one thread spread out by up to P − 1 supersteps as they run
 *    (lower ranks first, see StepScheduler), so the first and last supersteps
 *    of a run cost more, in the short run as in the long one.
 * 2. The threads transport (the default) and the processes transport with 2,
 *    4, 8 ranks: the same figures per rank (bytes: what the rank's own heap
 *    allocated, each thread and process having one).
 * 3. Latency of allreduce, allgather and barrier for each P, with two
 *    controls next to the allreduce, measured alternately with it. Simulating
 *    P ranks in one thread costs more per rank as P grows whatever the
 *    algorithm (every rank's state, frames and promises are cold again by its
 *    next turn), so the allreduce's growth is read against them, not against
 *    log P alone: "among N", the same allreduce with N (the largest P) ranks
 *    in the thread as N/P groups of P, which holds the footprint fixed; and
 *    "bare", P async tasks without molotof code, one message and one await
 *    per rank and round (`bareExchange`).
 *
 * A long run has max(steps, work / P) supersteps more than the short one (work / 4 for processes),
 * so that every P does about the same work; timings are differences of the
 * fastest of `repeats` runs, allocations of the medians.
 *
 *   npm run bench:scale -- [--ranks 1,4,16,64,256,1024] [--threads 2,4,8] [--processes 2,4,8] [--rows 8] [--cols 64] [--steps 1000] [--work 100000] [--repeats 5] [--parts local,threads,processes,collectives]
 */
import { parseArgs } from 'node:util'
import { benchArgs } from './args.js'
import { openRecord } from './record.js'
import { launch, runLocal } from '../src/index.js'
import { Collectives } from '../src/runtime/transport/collectives.js'
import { allocatedBytes, startAllocationCount } from '../src/bench/alloc.js'
import { summary, table } from '../src/bench/stats.js'
import strip, { sweep, type StripResult } from './programs/strip-jacobi.js'
import collectives, { type CollectiveResult } from './programs/collective-loop.js'

const USAGE = 'npm run bench:scale -- [--ranks 1,4,16,64,256,1024] [--threads 2,4,8] [--processes 2,4,8] [--rows 8] [--cols 64] [--steps 1000] [--work 100000] [--repeats 5] [--parts local,threads,processes,collectives]'
const { values } = benchArgs(USAGE, () => parseArgs({
  options: {
    ranks: { type: 'string', default: '1,4,16,64,256,1024' },
    threads: { type: 'string', default: '2,4,8' },
    processes: { type: 'string', default: '2,4,8' },
    rows: { type: 'string', default: '8' },
    cols: { type: 'string', default: '64' },
    steps: { type: 'string', default: '1000' },
    repeats: { type: 'string', default: '5' },
    work: { type: 'string', default: '100000' },
    'collective-repeats': { type: 'string', default: '100' },
    parts: { type: 'string', default: 'local,threads,processes,collectives' },
  },
}))
const list = (s: string) => (s ? s.split(',').map(Number) : [])
const localRanks = list(values.ranks)
const threadRanks = list(values.threads)
const processRanks = list(values.processes)
const rows = Number(values.rows)
const cols = Number(values.cols)
const steps = Number(values.steps)
const repeats = Number(values.repeats)
const work = Number(values.work)
const collectiveRepeats = Number(values['collective-repeats'])
const parts = new Set(values.parts.split(','))
const SHORT = 10
const record = openRecord('scale', 'Scale: framework cost per rank-superstep and collectives')
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

console.log(`bench:scale — Jacobi strip ${rows} rows per rank × ${cols} columns; long runs of max(${steps}, ${work}/P) supersteps more than short runs (runLocal: max(${SHORT}, P) supersteps; threads and processes: as many as the difference); fastest of ${repeats}`)
console.log(`node ${process.version}, ${process.platform}/${process.arch}\n`)

// Each figure is a difference of fastest runs: on a shared host noise only
// ever adds time, so the minimum over repeats is the estimate that survives it.
const min = (xs: number[]) => Math.min(...xs)
/** Supersteps of a long run with P ranks in one thread: about `work` rank-supersteps. */
const stepsFor = (P: number) => Math.max(steps, Math.ceil(work / P))

interface Timed {
  seconds: number
  allocated: number
}

/**
 * `repeats` runs of `short` and of `long` supersteps, each pair beside
 * kernel-only loops over `strips` strips of the same lengths: what the
 * difference costs in kernel seconds (fastest runs), the rest of the time
 * (framework) and bytes allocated (medians), for the whole group.
 */
async function longMinusShort(run: (iterations: number) => Promise<Timed>, strips: number, short: number, long: number): Promise<{ kernel: number; framework: number; allocated: number }> {
  const shortRuns: Timed[] = []
  const longRuns: Timed[] = []
  const kShort: number[] = []
  const kLong: number[] = []
  for (let r = 0; r < repeats; r++) {
    longRuns.push(await run(long))
    shortRuns.push(await run(short))
    kShort.push(kernelOnly(strips, short))
    kLong.push(kernelOnly(strips, long))
  }
  const kernel = min(kLong) - min(kShort)
  return {
    kernel,
    framework: min(longRuns.map((x) => x.seconds)) - min(shortRuns.map((x) => x.seconds)) - kernel,
    allocated: median(longRuns.map((x) => x.allocated)) - median(shortRuns.map((x) => x.allocated)),
  }
}

// 1. runLocal
const localRows: string[][] = []
const localFigures: Record<number, number> = {}
for (const P of parts.has('local') ? localRanks : []) {
  const short = Math.max(SHORT, P)
  const long = short + stepsFor(P)
  const supersteps = long - short
  // Warm-up: the JIT compiles (and its code counts as heap allocation) before anything is measured.
  await localRun(P, long)
  kernelOnly(P, long)
  const d = await longMinusShort((iterations) => localRun(P, iterations), P, short, long)
  const fw = (d.framework / (P * supersteps)) * 1e6
  const alloc = d.allocated / supersteps
  localFigures[P] = fw
  localRows.push([String(P), String(long), f((d.kernel / (P * supersteps)) * 1e6, 2), f(fw, 2), f(alloc, 0), f(alloc / P, 1)])
  process.stderr.write(`runLocal P=${P} done\n`)
}
if (localRows.length) {
  console.log('runLocal (one thread), per rank-superstep:')
  console.log(table(['P', 'supersteps', 'kernel µs', 'framework µs', 'bytes alloc / superstep', 'bytes / rank-superstep'], localRows))
  const p4 = localFigures[4]
  const top = Math.max(...localRanks)
  if (p4 !== undefined && top !== 4) console.log(`framework at P=${top} / at P=4: ${(localFigures[top] / p4).toFixed(2)}\n`)
  for (const [P, fw] of Object.entries(localFigures)) record.figure(`runLocal framework cost per rank-superstep, P=${P}`, fw, 'µs', Number(P) === top ? { headline: `framework cost per rank-superstep at P=${top} (P=4: ${f(p4 ?? NaN, 2)} µs)`, target: '≤ 30 µs, flat in P' } : {})
}

// 2. rank threads (the default transport) and rank processes
for (const transport of ['threads', 'processes'] as const) {
  const rows: string[][] = []
  for (const P of parts.has(transport) ? (transport === 'threads' ? threadRanks : processRanks) : []) {
    // The short run is as long as the difference: long enough for the JIT to have compiled the loop (its code is heap allocation too).
    const short = Math.max(steps, Math.ceil(work / 4))
    const long = short + Math.max(steps, Math.ceil(work / 4))
    const supersteps = long - short
    const run = async (iterations: number): Promise<Timed> => {
      const r = await launch<StripResult>('bench/programs/strip-jacobi.ts', { ranks: P, transport, argv: argv(iterations, ['--count-alloc']), ...quiet })
      return { seconds: Math.max(...r.values.map((v) => v.seconds)), allocated: Math.max(...r.values.map((v) => v.allocated)) }
    }
    // Each rank has a core or shares one: its kernel alone is one strip's loop.
    const d = await longMinusShort(run, 1, short, long)
    rows.push([String(P), String(long), f((d.framework / supersteps) * 1e6, 2), f(d.allocated / supersteps, 0)])
    process.stderr.write(`${transport} P=${P} done\n`)
  }
  if (rows.length) {
    console.log(`${transport} transport, per rank-superstep (slowest rank; bytes: the rank that allocates most):`)
    console.log(table(['P', 'supersteps', 'framework µs', 'bytes alloc / rank-superstep'], rows))
    console.log()
  }
}

// 3. collectives
/**
 * One task of the control: a round's incoming value and the task's waiting
 * resolver, nothing else (no mailbox, pool, tags or copies).
 */
class BareTask {
  readonly values = new Float64Array(32)
  readonly arrived = new Uint8Array(32)
  waitingRound = -1
  resolve: ((v: number) => void) | undefined = undefined
}

function bareDeliver(t: BareTask, round: number, v: number): void {
  if (t.waitingRound === round) {
    const resolve = t.resolve!
    t.waitingRound = -1
    t.resolve = undefined
    resolve(v)
  } else {
    t.values[round] = v
    t.arrived[round] = 1
  }
}

function bareReceive(t: BareTask, round: number): number | Promise<number> {
  if (t.arrived[round]) {
    t.arrived[round] = 0
    return t.values[round]
  }
  t.waitingRound = round
  return new Promise((resolve) => (t.resolve = resolve))
}

/**
 * The control: ⌈log2 P⌉ rounds of a dissemination exchange (round k sends
 * to the rank 2^k ahead and awaits the one 2^k behind, as molotof's barrier),
 * the same rounds as an allreduce when P is a power of two, with one message
 * sent and one await per rank and round. µs per exchange of the whole group.
 */
async function bareExchange(P: number, repeats: number): Promise<number> {
  const tasks = Array.from({ length: P }, () => new BareTask())
  const one = async (rank: number, value: number): Promise<number> => {
    let acc = value
    for (let d = 1, round = 0; d < P; d <<= 1, round++) {
      bareDeliver(tasks[(rank + d) % P], round, acc)
      acc += await bareReceive(tasks[rank], round)
    }
    return acc
  }
  const t0 = performance.now()
  await Promise.all(
    tasks.map(async (_, rank) => {
      for (let i = 0; i < repeats; i++) await one(rank, rank * 0.1 + i)
    }),
  )
  return ((performance.now() - t0) * 1000) / repeats
}

/**
 * µs per allreduce per rank with `population` ranks in this thread: that many
 * ranks, as population / P independent groups of P, run the same allreduce
 * loop at once. Against one group of P, it holds the simulation's footprint
 * (every rank's state, frames and promises) at that of the largest P, so what
 * is left of the growth with P is the algorithm's. Each group's rank 0 times
 * its loop; the groups run interleaved, so each time covers all groups' work.
 */
async function allreduceAmong(P: number, population: number): Promise<number> {
  const groups = Math.max(1, Math.floor(population / P))
  const argv = ['--repeats', String(collectiveRepeats)]
  const runs = await Promise.all(Array.from({ length: groups }, () => runLocal(collectives, { ranks: P, argv })))
  const seconds = runs.reduce((sum, r) => sum + (r[0] as CollectiveResult).allreduce, 0) / groups
  return (seconds * 1e6) / (groups * P)
}

interface LocalCollectiveFigures {
  /** µs per operation of the whole group (runLocal, one group of P ranks). */
  allreduce: number
  allgather: number
  barrier: number
  /** µs per rank: the allreduce among `population` ranks, and the bare control. */
  allreduceAmongRank: number
  bareRank: number
}

/** Fastest of `repeats` runLocal collective loops and, alternating with them, of the two controls. */
async function localCollectives(P: number, population: number): Promise<LocalCollectiveFigures> {
  const best = { allreduce: Infinity, allgather: Infinity, barrier: Infinity, allreduceAmongRank: Infinity, bareRank: Infinity }
  await bareExchange(P, 10) // warm-up
  for (let r = 0; r < repeats; r++) {
    const v = (await runLocal(collectives, { ranks: P, argv: ['--repeats', String(collectiveRepeats)] }))[0] as CollectiveResult
    best.allreduce = Math.min(best.allreduce, v.allreduce * 1e6)
    best.allgather = Math.min(best.allgather, v.allgather * 1e6)
    best.barrier = Math.min(best.barrier, v.barrier * 1e6)
    best.bareRank = Math.min(best.bareRank, (await bareExchange(P, collectiveRepeats)) / P)
    // With P = population this is one group of P again: the allreduce itself.
    const among = P === population ? (v.allreduce * 1e6) / P : await allreduceAmong(P, population)
    best.allreduceAmongRank = Math.min(best.allreduceAmongRank, among)
  }
  return best
}

const collRows: string[][] = []
const perRank: GrowthRow[] = []
const population = Math.max(...localRanks)
for (const P of parts.has('collectives') ? localRanks : []) {
  const c = await localCollectives(P, population)
  perRank.push({ P, allreduce: c.allreduce / P, among: c.allreduceAmongRank, bare: c.bareRank })
  collRows.push(['runLocal', String(P), String(Collectives.allreduceRounds(P)), f(c.allreduce), f(c.allreduce / P, 2), f(c.allreduceAmongRank, 2), f(c.bareRank, 2), f(c.allgather), f(c.barrier)])
  process.stderr.write(`collectives P=${P} done\n`)
}
for (const P of parts.has('collectives') ? processRanks : []) {
  const r = await launch<CollectiveResult>('bench/programs/collective-loop.ts', { ranks: P, transport: 'processes', argv: ['--repeats', String(collectiveRepeats)], ...quiet })
  const v = r.value
  collRows.push(['processes', String(P), String(Collectives.allreduceRounds(P)), f(v.allreduce * 1e6), '', '', '', f(v.allgather * 1e6), f(v.barrier * 1e6)])
}
if (collRows.length) {
  console.log(`collectives, µs per operation (runLocal: all ranks in one thread, so the wall time is the whole group's work; per rank = / P; runLocal figures the fastest of ${repeats}).`)
  console.log(`Controls, µs per rank, measured alternately with the allreduce: "among ${population}": the same allreduce with ${population} ranks in the thread (${population}/P groups of P at once); "bare": P async tasks without molotof code, one message and one await per rank and round, ⌈log2 P⌉ rounds:`)
  console.log(table(['transport', 'P', 'rounds', 'allreduce', 'allreduce / P', `among ${population} / P`, 'bare / P', 'allgather', 'barrier'], collRows))
  printGrowth(perRank)
}

interface GrowthRow {
  P: number
  /** µs per rank: one group of P, the same among the largest population, the bare control. */
  allreduce: number
  among: number
  bare: number
}

/** For each step between consecutive P: how much the per-rank figures grew, against the growth in rounds (log P). */
function printGrowth(rows: GrowthRow[]): void {
  for (let i = 1; i < rows.length; i++) {
    const a = rows[i - 1]
    const b = rows[i]
    const rounds = Collectives.allreduceRounds(b.P) / Collectives.allreduceRounds(a.P)
    if (!Number.isFinite(rounds)) continue
    const x = (k: 'allreduce' | 'among' | 'bare') => `×${(b[k] / a[k]).toFixed(2)}`
    console.log(`P ${a.P} → ${b.P}: rounds ×${rounds.toFixed(2)}; per rank: allreduce ${x('allreduce')}, among ${population} ${x('among')}, bare ${x('bare')}`)
  }
}
record.save()
