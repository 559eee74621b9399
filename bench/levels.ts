/**
 * Checkpoint levels: the stall at a memory checkpoint next to a plain memory
 * copy of the same bytes (measured in this run, between the runs), the total
 * cost of a memory checkpoint and of a disk checkpoint flushed from it, a
 * foreground disk checkpoint for comparison, and the failure-free overhead of
 * memory checkpoints every 2 s plus disk checkpoints every 60 s, against runs
 * without checkpoints (interleaved): on the whole run, and in the steady state
 * (supersteps per second away from both ends, which leaves out the one-time
 * costs of a short run: the first checkpoint's buffers and helper thread), and
 * within each run: the time the supersteps around each checkpoint took beyond
 * their neighbours (src/bench/local-excess.ts), which the machine's slow drift
 * does not reach, next to the same estimate at phantom points of the runs
 * without checkpoints (its noise floor). The last misses costs spread evenly
 * over a run, such as the votes of the time policy (100–250 ms of supersteps
 * apart in a supervised run).
 *
 *   npm run bench:levels -- [--n 2048] [--seconds 20] [--repeats 3] [--transport processes] [--ranks 2]
 *
 * `--ranks 1` leaves the second core of a 2-core machine to the rank's I/O
 * thread: the cost of the levels when the compute does not fill every core.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { benchArgs } from './args.js'
import { openRecord } from './record.js'
import { performance } from 'node:perf_hooks'
import type { CheckpointEvent } from '../src/checkpoint/events.js'
import type { FaultToleranceConfig } from '../src/checkpoint/config.js'
import { quantile, summary } from '../src/bench/stats.js'
import type { Transport } from '../src/runtime/group.js'
import { excessAt, stepsEvery, type ProgressSample } from '../src/bench/local-excess.js'
import { timedJacobi } from './timed-jacobi.js'

const USAGE = 'npm run bench:levels -- [--n 2048] [--seconds 20] [--repeats 3] [--transport processes] [--ranks 2]'
const { values } = benchArgs(USAGE, () => parseArgs({
  options: {
    n: { type: 'string', default: '2048' },
    seconds: { type: 'string', default: '20' },
    repeats: { type: 'string', default: '3' },
    transport: { type: 'string', default: 'processes' },
    ranks: { type: 'string', default: '2' },
  },
}))
const n = Number(values.n)
const targetSeconds = Number(values.seconds)
const repeats = Number(values.repeats)
const transport = values.transport as Transport
const ranks = Number(values.ranks)
if (!Number.isInteger(ranks) || ranks < 1 || n % ranks !== 0) throw new Error(`--ranks must be a whole number ≥ 1 that divides --n (got ${values.ranks})`)
const root = mkdtempSync(join(tmpdir(), 'molotof-bench-levels-'))
const record = openRecord('levels', `Checkpoint levels: Jacobi ${n}², ${ranks} ranks (${transport})`)
let dirs = 0

// The project's median (src/bench/stats.ts), as every bench reports it.
const median = (xs: number[]) => summary(xs).median
const f1 = (x: number) => x.toFixed(1)
/** Mean and its standard error. */
const meanAndError = (xs: number[]): [number, number] => {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length
  const v = xs.reduce((a, b) => a + (b - m) ** 2, 0) / Math.max(1, xs.length - 1)
  return [m, Math.sqrt(v / xs.length)]
}
// Checkpoints 2 s apart leave room for windows of 4 × this around each.
const EXCESS_HALF_WINDOW_MS = 450
// Narrower, less noisy (the noise grows with the window), and still longer than what a checkpoint sets
// off: its memory write (about 45 ms point to commit), the commit at the next vote (at most ~100 ms on),
// a disk flush (about 160 ms to durable).
const NARROW_HALF_WINDOW_MS = 200
const f2 = (x: number) => x.toFixed(2)

/** One Jacobi run; its wall time (first to last superstep) and its checkpoint events (rank 0). */
const run = (iterations: number, checkpoint: FaultToleranceConfig | undefined) => timedJacobi({ ranks, transport, n, iterations, checkpoint })

/**
 * Plain copies of `bytes` into a reused buffer, one every 250 ms while `during`
 * runs: the same load as the ranks' own copies (both cores busy), which a
 * copy timed on an idle machine would flatter.
 */
async function plainCopiesDuring<T>(bytes: number, during: Promise<T>, into: number[]): Promise<T> {
  const from = new Uint8Array(bytes).fill(1)
  const to = new Uint8Array(bytes)
  to.set(from)
  const timer = setInterval(() => {
    const t0 = performance.now()
    to.set(from)
    into.push(performance.now() - t0)
  }, 250)
  try {
    return await during
  } finally {
    clearInterval(timer)
  }
}

const fresh = () => join(root, `r${dirs++}`)
const memoryAndDisk = (memory: FaultToleranceConfig['memory'], disk: FaultToleranceConfig['policy']): FaultToleranceConfig => ({
  dir: fresh(),
  policy: disk,
  memory,
  keep: 2,
  resume: false,
})

try {
  // Calibrate: supersteps for a run of about `seconds`.
  const probe = await run(50, undefined)
  const stepMs = probe.ms / 49
  const iterations = Math.max(100, Math.round((targetSeconds * 1000) / stepMs))
  console.log(`Jacobi ${n}², ${ranks} ranks (${transport}), ${iterations} supersteps (~${f1(stepMs)} ms each), ${repeats} repeats, interleaved`)

  // 1. Cost per checkpoint on each level (every 25 supersteps, so there are enough of them).
  const every = 25
  const memoryEvents: CheckpointEvent[] = []
  const flushEvents: CheckpointEvent[] = []
  const diskEvents: CheckpointEvent[] = []
  const copies: number[] = []
  const costIterations = Math.min(iterations, 400)
  const fileBytes = ((n / ranks) * n + 512) * 8 // a rank's rows of the grid (the minimal checkpoint) plus a header
  for (let rep = 0; rep < repeats; rep++) {
    const both = await plainCopiesDuring(fileBytes, run(costIterations, memoryAndDisk({ policy: { every } }, { every: every * 4 })), copies)
    memoryEvents.push(...both.events.filter((e) => e.level === 'memory'))
    flushEvents.push(...both.events.filter((e) => e.level === 'disk'))
    const disk = await run(costIterations, { dir: fresh(), policy: { every }, keep: 2, resume: false })
    diskEvents.push(...disk.events)
  }
  const bytes = memoryEvents[0]?.bytes ?? 0
  const copyMs = median(copies)
  const stalls = memoryEvents.map((e) => e.stallMs)
  console.log(`\nper checkpoint, rank file ${(bytes / 2 ** 20).toFixed(1)} MiB per rank:`)
  console.log(`  plain memory copy of the same bytes:           ${f2(copyMs)} ms median, ${f2(quantile(copies, 0.9))} ms p90 (${copies.length} copies timed during the runs)`)
  console.log(`  stall at a memory checkpoint:                  ${f2(median(stalls))} ms median, ${f2(quantile(stalls, 0.9))} ms p90 (${stalls.length} checkpoints)`)
  console.log(`  memory checkpoint, point to commit (total):    ${f1(median(memoryEvents.map((e) => e.ms)))} ms median`)
  console.log(`  disk flush from memory, point to durable:      ${f1(median(flushEvents.map((e) => e.ms)))} ms median, stall 0 (${flushEvents.length} flushes)`)
  console.log(`  foreground disk checkpoint (no memory level):  ${f1(median(diskEvents.map((e) => e.ms)))} ms median, all of it a stall`)
  console.log(`  stall target (copy + 1 ms): ${median(stalls) <= copyMs + 1 ? 'met' : 'NOT met'} at the median`)
  record.figure('plain memory copy of a rank file', copies, 'ms')
  record.figure('stall at a memory checkpoint', stalls, 'ms', { headline: `stall at a memory checkpoint, ${(bytes / 2 ** 20).toFixed(0)} MiB per rank (plain copy: ${f2(copyMs)} ms)`, target: 'copy + 1 ms' })
  record.figure('memory checkpoint, point to commit', memoryEvents.map((e) => e.ms), 'ms')
  record.figure('disk flush from memory, point to durable', flushEvents.map((e) => e.ms), 'ms')
  record.figure('foreground disk checkpoint', diskEvents.map((e) => e.ms), 'ms')

  // 2. Failure-free overhead: memory every 2 s + disk every 60 s, against no checkpoints.
  const none: number[] = []
  const levels: number[] = []
  // Steady rates (supersteps per second away from both ends of a run): the overhead of a long run.
  const noneRate: number[] = []
  const levelsRate: number[] = []
  let counts = { memory: 0, disk: 0 }
  // Within each run: what every checkpoint added to the supersteps around it (see excessAt), and, in
  // the runs without checkpoints, the same estimate at phantom points every 2 s (its noise floor).
  const windows = [NARROW_HALF_WINDOW_MS, EXCESS_HALF_WINDOW_MS]
  const excess = windows.map(() => [] as number[])
  const phantom = windows.map(() => [] as number[])
  const within = (progress: ProgressSample[], points: number[], into: number[][]) =>
    windows.forEach((half, w) => into[w].push(...excessAt(progress, points, half).filter(Number.isFinite)))
  let levelsMs = 0
  let levelsCheckpoints = 0
  // Rank 0's votes of the time policies (an allreduce each, 100–250 ms apart), spread over the run.
  let votes = 0
  let voteMs = 0
  for (let rep = 0; rep < repeats; rep++) {
    // Alternate which of the pair runs first, so that neither always gets the machine just after a run.
    const withLevels = async () => {
      const r = await run(iterations, memoryAndDisk({ policy: { seconds: 2 } }, { seconds: 60 }))
      levels.push(r.ms)
      levelsRate.push(r.steady ?? NaN)
      counts = { memory: r.events.filter((e) => e.level === 'memory').length, disk: r.events.filter((e) => e.level === 'disk').length }
      // A disk checkpoint is a memory checkpoint flushed: one point, one step.
      const points = [...new Set(r.events.map((e) => e.step))]
      within(r.progress, points, excess)
      levelsMs += r.ms
      levelsCheckpoints += points.length
      for (const e of r.events) {
        votes += e.votes ?? 0
        voteMs += e.voteMs ?? 0
      }
    }
    if (rep % 2 === 1) await withLevels()
    const plain = await run(iterations, undefined)
    none.push(plain.ms)
    noneRate.push(plain.steady ?? NaN)
    within(plain.progress, stepsEvery(plain.progress, 2000), phantom)
    if (rep % 2 === 0) await withLevels()
  }
  const overhead = (median(levels) / median(none) - 1) * 100
  // Each repeat runs both back to back: the ratio within a pair sees the same machine state.
  const pairOverhead = (median(levels.map((l, i) => l / none[i])) - 1) * 100
  console.log(`\nfailure-free overhead, memory every 2 s + disk every 60 s (${counts.memory} memory, ${counts.disk} disk checkpoints per run):`)
  console.log(`  no checkpoints: ${(median(none) / 1000).toFixed(2)} s median (${none.map((x) => (x / 1000).toFixed(2)).join(', ')})`)
  console.log(`  with levels:    ${(median(levels) / 1000).toFixed(2)} s median (${levels.map((x) => (x / 1000).toFixed(2)).join(', ')})`)
  console.log(`  measured overhead: ${f2(overhead)} % (ratio of the medians), ${f2(pairOverhead)} % (median of the ${repeats} paired ratios)`)
  const rateOverhead = (median(noneRate) / median(levelsRate) - 1) * 100
  const pairRateOverhead = (median(noneRate.map((r, i) => r / levelsRate[i])) - 1) * 100
  console.log(
    `  steady state (supersteps per second from 1 s after the first superstep to 0.5 s before the end): ${f1(median(noneRate))} without, ` +
      `${f1(median(levelsRate))} with the levels: ${f2(rateOverhead)} % (medians), ${f2(pairRateOverhead)} % (median of the paired ratios)`,
  )
  console.log(`  stall-based estimate: ${f2((median(stalls) / 2000) * 100)} % (memory stall every 2 s; disk flushes cost no stall)`)
  // Mean excess per checkpoint times checkpoints per ms of run; the phantom points are 2 s apart.
  const perMs = levelsCheckpoints / levelsMs
  windows.forEach((half, w) => {
    const [m, se] = meanAndError(excess[w])
    const [p, pse] = meanAndError(phantom[w])
    console.log(
      `  within each run, supersteps within ${half} ms of a checkpoint beyond their neighbours' (drift-free): ` +
        `${f2(m)} ± ${f2(se)} ms per checkpoint (${excess[w].length}) → overhead ${f2(m * perMs * 100)} ± ${f2(se * perMs * 100)} %; ` +
        `at phantom points every 2 s of the runs without checkpoints (the noise floor): ${f2((p / 2000) * 100)} ± ${f2((pse / 2000) * 100)} %`,
    )
  })
  console.log(
    `  votes of the time policies, spread over the run (not in the estimate above): ${votes} votes, ${f1(voteMs)} ms in all on rank 0 ` +
      `(${f2(voteMs / Math.max(1, votes))} ms each, waiting for the other rank included) → at most ${f2((voteMs / levelsMs) * 100)} %`,
  )
  // The narrower windows: less noise, and still wider than all a checkpoint sets off.
  const [e] = meanAndError(excess[0])
  console.log(`  overhead, within-run estimate (±${NARROW_HALF_WINDOW_MS} ms) + votes: ${f2((e * perMs + voteMs / levelsMs) * 100)} % (target ≤ 1 %)`)
  record.figure('run time without checkpoints', none.map((x) => x / 1000), 's')
  record.figure('run time with memory every 2 s + disk every 60 s', levels.map((x) => x / 1000), 's')
  record.figure('failure-free overhead of the levels, within-run estimate + votes', (e * perMs + voteMs / levelsMs) * 100, '%', { headline: 'failure-free overhead, memory every 2 s + disk every 60 s', target: '≤ 1 %' })
} finally {
  rmSync(root, { recursive: true, force: true })
}
record.save()
