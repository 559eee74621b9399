/**
 * Failure-free overhead of the checkpoint levels as a user runs them: Jacobi
 * on 2 rank processes (16 MiB of grid per rank at the default --n 2048, the
 * minimal checkpoint), each variant against runs without checkpoints, in one
 * invocation and interleaved: off, v1, off, v2, …, off. Each variant run is
 * compared with the mean of the two runs without checkpoints on either side of
 * it, so noise that lasts longer than a run (other users' jobs, the machine's
 * slow drift) hits both sides of the ratio, and a drift that is linear over
 * three runs cancels. The ratio of two neighbouring runs without checkpoints
 * is the noise floor, printed next to it.
 *
 * The time compared is the run's, from its first superstep to its end
 * (start-up excluded, everything the levels do while it computes included:
 * the stall at each checkpoint point, the votes of the time policies, the
 * helper thread's copies, CRCs, flushes, partner sends and compression, which
 * compete with the ranks for the same cores). Where it goes: the stall at the
 * point times the number of checkpoints, and the votes, as shares of the run;
 * the rest of the overhead is the background work's contention. Besides, the
 * same overhead measured within each run (src/bench/local-excess.ts): what the
 * supersteps within 450 ms of each checkpoint took beyond their neighbours,
 * per checkpoint, times checkpoints per second; at phantom points every 2 s of
 * the runs without checkpoints the same estimate gives its noise floor. It
 * sees the stall and the background work a checkpoint sets off near it, not
 * costs spread evenly (the votes), and no noise slower than a few seconds.
 * It is given over every checkpoint, and over the steady ones (from the
 * third on), with what the first two cost beyond them once per run: a run
 * of hours pays that one-time cost once, a 30 s run counts it as a rate.
 * And the CPU time the rank processes used (helper threads included), run
 * against its neighbours as the wall time is: what the levels cost in CPU,
 * spread or not, which other work on the machine changes much less than the
 * wall time. The headline is the within-run estimate (the target is set that
 * way); the other two are printed next to it with their noise floors.
 *
 *   npm run bench:overhead -- [--variants memory,partner,disk,compress] [--n 2048] [--seconds 30] [--rounds 3]
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import type { FaultToleranceConfig } from '../src/checkpoint/config.js'
import { excessAt, stepsEvery } from '../src/bench/local-excess.js'
import { summary, table } from '../src/bench/stats.js'
import { ThreadCpuWatch, type ThreadCpu } from '../src/bench/thread-cpu.js'
import { benchArgs } from './args.js'
import { openRecord } from './record.js'
import { timedJacobi } from './timed-jacobi.js'

/** A way of checkpointing: the settings of the run (without its directory) and the same as `molotof run` flags. */
interface Variant {
  flags: string
  config: Omit<FaultToleranceConfig, 'dir'>
}

const MEMORY_2S: Omit<FaultToleranceConfig, 'dir'> = { policy: { kind: 'off' }, memory: { policy: { seconds: 2 } }, keep: 2, resume: false }
const VARIANTS: Record<string, Variant> = {
  memory: { flags: '--memory-checkpoint 2s', config: MEMORY_2S },
  // Each rank its own node (ranks-per-node 1): every memory checkpoint also copied into the other rank's memory level.
  partner: { flags: '--memory-checkpoint 2s, partner copies (2 nodes of 1 rank: --ranks-per-node 1 --partner-copies on)', config: { ...MEMORY_2S, partner: { ranksPerNode: 1 } } },
  disk: { flags: '--memory-checkpoint 2s --checkpoint 10s', config: { ...MEMORY_2S, policy: { seconds: 10 } } },
  compress: { flags: '--memory-checkpoint 2s --checkpoint 10s --compress', config: { ...MEMORY_2S, policy: { seconds: 10 }, compress: true } },
}

const USAGE = 'npm run bench:overhead -- [--variants memory,partner,disk,compress] [--n 2048] [--seconds 30] [--rounds 3]'
const { values } = benchArgs(USAGE, () =>
  parseArgs({
    options: {
      variants: { type: 'string', default: Object.keys(VARIANTS).join(',') },
      n: { type: 'string', default: '2048' },
      seconds: { type: 'string', default: '30' },
      rounds: { type: 'string', default: '3' },
    },
  }),
)
const variants = values.variants.split(',').map((name) => {
  if (!(name in VARIANTS)) {
    console.error(`unknown variant "${name}" (known: ${Object.keys(VARIANTS).join(', ')})\n\nusage: ${USAGE}`)
    process.exit(2)
  }
  return name
})
const n = Number(values.n)
const seconds = Number(values.seconds)
const rounds = Number(values.rounds)
if (![n, rounds].every((v) => Number.isSafeInteger(v) && v > 0) || n % 2 !== 0 || !(seconds > 0)) {
  console.error(`--n must be an even positive integer, --rounds a positive integer and --seconds a positive number\n\nusage: ${USAGE}`)
  process.exit(2)
}
const ranks = 2
const root = mkdtempSync(join(tmpdir(), 'molotof-bench-overhead-'))
const record = openRecord('overhead', `Failure-free overhead of the levels, Jacobi ${n}² on ${ranks} rank processes, interleaved with runs without checkpoints`)
let dirs = 0

const pct = (r: number) => `${((r - 1) * 100).toFixed(2)} %`
const load = () => loadavg().map((x) => x.toFixed(2)).join(' ')

interface Measured {
  ms: number
  /** Memory checkpoints in the run, and the stall at each of their points. */
  stalls: number[]
  disk: number
  partner: number
  /** Time rank 0 spent in the votes of the time policies. */
  voteMs: number
  /** What the supersteps around each checkpoint (or phantom point, without checkpoints) took beyond their neighbours, ms (NaN near the ends). */
  excess: number[]
  /** CPU time of the run's rank processes (their helper threads included), ms. */
  cpuMs: number
  /** The same, thread by thread: main threads and the others (the checkpoint helper thread's work is there), ms. */
  threads: ThreadCpu
}

const TICKS_PER_S = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100

/**
 * CPU time of this process's children that ended and were waited for (the
 * rank processes of the runs so far: cutime + cstime of /proc/self/stat),
 * ms. Other work on the machine lengthens a run's wall time, much less the
 * CPU time its processes use: the background work a checkpoint sets off is
 * seen there whatever the load.
 */
function childrenCpuMs(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8')
  // Fields after the command name (which may hold spaces): state is field 3, cutime 16, cstime 17.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return ((Number(f[13]) + Number(f[14])) * 1000) / TICKS_PER_S
}

// Checkpoints 2 s apart leave room for windows of 4 × this around each.
const EXCESS_HALF_WINDOW_MS = 450

async function runOnce(iterations: number, variant: string | undefined): Promise<Measured> {
  const checkpoint = variant === undefined ? undefined : { ...VARIANTS[variant].config, dir: join(root, `r${dirs++}`) }
  try {
    const cpuBefore = childrenCpuMs()
    const watch = new ThreadCpuWatch(100)
    const r = await timedJacobi({ ranks, transport: 'processes', n, iterations, checkpoint })
    const threads = watch.stop()
    const cpuMs = childrenCpuMs() - cpuBefore
    const memory = r.events.filter((e) => e.level === 'memory')
    // A disk checkpoint is a memory checkpoint flushed: one point.
    const points = variant === undefined ? stepsEvery(r.progress, 2000) : [...new Set(memory.map((e) => e.step))]
    return {
      ms: r.ms,
      stalls: memory.map((e) => e.stallMs),
      disk: r.events.filter((e) => e.level === 'disk').length,
      partner: r.events.filter((e) => e.level === 'partner').length,
      voteMs: r.events.reduce((a, e) => a + (e.voteMs ?? 0), 0),
      excess: excessAt(r.progress, points, EXCESS_HALF_WINDOW_MS),
      cpuMs,
      threads,
    }
  } finally {
    if (checkpoint) rmSync(checkpoint.dir, { recursive: true, force: true })
  }
}

/**
 * The first checkpoints of a run that pay one-time costs: the staging
 * buffers' pages are first touched at the first one, and the memory level's
 * two files (the checkpoint and the one kept while the next is written) are
 * new files at the first two; from the third on a file is overwritten in
 * place. A run of hours pays these once; a 30 s benchmark run would count
 * them as a rate.
 */
const ONE_TIME_POINTS = 2

/**
 * The within-run estimate over `runs`: mean excess per point times points
 * per ms of run, with its standard error. `from`: the first point counted
 * (ONE_TIME_POINTS for the steady state, the same for the phantom points of
 * the noise floor so that both sides leave out the same stretch of a run).
 */
function withinRuns(runs: Measured[], from = 0): { pct: number; text: string; meanMs: number } {
  const xs = runs.flatMap((m) => m.excess.slice(from).filter(Number.isFinite))
  const points = runs.reduce((a, m) => a + m.excess.length, 0)
  const perMs = points / runs.reduce((a, m) => a + m.ms, 0)
  const mean = xs.reduce((a, x) => a + x, 0) / xs.length
  const se = Math.sqrt(xs.reduce((a, x) => a + (x - mean) ** 2, 0) / Math.max(1, xs.length - 1) / xs.length)
  return { pct: mean * perMs * 100, text: `${(mean * perMs * 100).toFixed(2)} ± ${(se * perMs * 100).toFixed(2)} %`, meanMs: mean }
}

/** What the first ONE_TIME_POINTS checkpoints of a run took beyond a steady one (`steadyMs`, withinRuns' meanMs from ONE_TIME_POINTS), summed: ms once per run. */
function oneTimeMs(runs: Measured[], steadyMs: number): number {
  const firsts = runs.flatMap((m) => m.excess.slice(0, ONE_TIME_POINTS).filter(Number.isFinite))
  return firsts.length === 0 ? NaN : (firsts.reduce((a, x) => a + x, 0) / firsts.length - steadyMs) * ONE_TIME_POINTS
}

try {
  const probe = await runOnce(60, undefined)
  const iterations = Math.max(200, Math.round((seconds * 1000 * 59) / probe.ms))
  console.log(`Jacobi ${n}², ${ranks} rank processes (${((n / ranks) * n * 8) / 2 ** 20} MiB of grid per rank), ${iterations} supersteps (~${seconds} s), ${rounds} rounds`)
  console.log(`load average at the start: ${load()}`)
  for (const v of variants) console.log(`  ${v}: ${VARIANTS[v].flags}`)

  // off, v1, off, v2, …, off: every variant run between two runs without checkpoints; the order of
  // the variants reversed every other round, so that none always follows the same one.
  const offRuns: Measured[] = [await runOnce(iterations, undefined)]
  const offs: number[] = [offRuns[0].ms]
  const ratios = new Map<string, number[]>(variants.map((v) => [v, []]))
  const cpuRatios = new Map<string, number[]>(variants.map((v) => [v, []]))
  const mainRatios = new Map<string, number[]>(variants.map((v) => [v, []]))
  const runs = new Map<string, Measured[]>(variants.map((v) => [v, []]))
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? variants : [...variants].reverse()
    for (const v of order) {
      const m = await runOnce(iterations, v)
      const before = offs[offs.length - 1]
      const cpuBefore = offRuns[offRuns.length - 1].cpuMs
      const afterRun = await runOnce(iterations, undefined)
      offRuns.push(afterRun)
      const after = afterRun.ms
      offs.push(after)
      const ratio = m.ms / ((before + after) / 2)
      ratios.get(v)!.push(ratio)
      const cpuRatio = m.cpuMs / ((cpuBefore + afterRun.cpuMs) / 2)
      cpuRatios.get(v)!.push(cpuRatio)
      mainRatios.get(v)!.push(m.threads.main / ((offRuns[offRuns.length - 2].threads.main + afterRun.threads.main) / 2))
      runs.get(v)!.push(m)
      console.log(
        `  round ${round + 1} ${v.padEnd(8)} ${(m.ms / 1000).toFixed(2)} s between ${(before / 1000).toFixed(2)} and ${(after / 1000).toFixed(2)} s without: ${pct(ratio)}; CPU time ${pct(cpuRatio)}` +
          `  (${m.stalls.length} memory, ${m.disk} disk, ${m.partner} partner checkpoints; load ${load()})`,
      )
    }
  }

  // Identical work one run apart: what the machine alone makes of the ratio.
  const noise = offs.slice(1).map((x, i) => x / offs[i])
  const cpuNoise = offRuns.slice(1).map((x, i) => x.cpuMs / offRuns[i].cpuMs)
  const rows: string[][] = []
  const backgroundRows: string[][] = []
  const spread = (xs: number[]) => {
    const s = summary(xs)
    return [pct(s.median), `${pct(s.min)} … ${pct(s.max)}`]
  }
  for (const v of variants) {
    const ms = runs.get(v)!
    const runMs = ms.reduce((a, m) => a + m.ms, 0)
    const stalls = ms.flatMap((m) => m.stalls)
    const stallShare = stalls.reduce((a, x) => a + x, 0) / runMs
    const voteShare = ms.reduce((a, m) => a + m.voteMs, 0) / runMs
    const over = summary(ratios.get(v)!).median - 1
    const within = withinRuns(ms)
    const steady = withinRuns(ms, ONE_TIME_POINTS)
    const once = oneTimeMs(ms, steady.meanMs)
    // What the other threads (the checkpoint helper thread among them) used beyond what they use in runs without checkpoints.
    const offOtherPerMs = offRuns.reduce((a, m) => a + m.threads.other, 0) / offRuns.reduce((a, m) => a + m.ms, 0)
    const background = ms.reduce((a, m) => a + m.threads.other - offOtherPerMs * m.ms, 0)
    const backgroundShare = background / runMs / ranks
    const perCheckpoint = background / Math.max(1, stalls.length) / ranks
    backgroundRows.push([v, perCheckpoint.toFixed(1), `${(backgroundShare * 100).toFixed(2)} %`, `${(stallShare * 100).toFixed(2)} %`, `${((backgroundShare + stallShare + voteShare) * 100).toFixed(2)} %`])
    record.figure(`${v}: background CPU per checkpoint and rank (helper thread, beyond runs without checkpoints)`, perCheckpoint, 'ms')
    record.figure(`${v}: background CPU + stall + votes, share of each rank's core (at most the overhead, whatever the load)`, (backgroundShare + stallShare + voteShare) * 100, '%')
    rows.push([v, ...spread(ratios.get(v)!), summary(stalls).median.toFixed(1), `${(stallShare * 100).toFixed(2)} %`, `${(voteShare * 100).toFixed(2)} %`, `${((over - stallShare - voteShare) * 100).toFixed(2)} %`, within.text, steady.text, once.toFixed(0), ...spread(cpuRatios.get(v)!)])
    // The target is set within runs: on this shared 2-core machine whole runs differ by more than it from one run to the next.
    record.figure(`${v}: overhead within runs (excess around each checkpoint)`, within.pct, '%', v === 'memory' ? { headline: 'failure-free overhead within runs, memory level every 2 s, 2 ranks', target: '≤ 1 %' } : {})
    record.figure(`${v}: overhead within runs, steady state (from the checkpoint after the first ${ONE_TIME_POINTS} on)`, steady.pct, '%')
    record.figure(`${v}: one-time cost of the first ${ONE_TIME_POINTS} checkpoints of a run, beyond steady ones`, once, 'ms')
    record.figure(`${v}: run time over runs without checkpoints`, ratios.get(v)!.map((r) => (r - 1) * 100), '%')
    record.figure(`${v}: CPU time of the rank processes over runs without checkpoints`, cpuRatios.get(v)!.map((r) => (r - 1) * 100), '%')
    record.figure(`${v}: stall at a memory checkpoint`, stalls, 'ms')
  }
  const phantom = withinRuns(offRuns)
  const phantomSteady = withinRuns(offRuns, ONE_TIME_POINTS)
  rows.push(['(noise: off / previous off)', ...spread(noise), '', '', '', '', phantom.text, phantomSteady.text, '', ...spread(cpuNoise)])
  record.figure('noise floor of the within-run estimate (phantom points every 2 s)', phantom.pct, '%')
  record.figure(`noise floor of the within-run estimate, steady state (phantom points after the first ${ONE_TIME_POINTS})`, phantomSteady.pct, '%')
  record.figure('noise floor: a run without checkpoints over the previous one', noise.map((r) => (r - 1) * 100), '%')
  record.figure('noise floor: CPU time of a run without checkpoints over the previous one', cpuNoise.map((r) => (r - 1) * 100), '%')
  console.log('\n' + table(['variant', 'overhead (median)', 'min … max', 'stall ms', 'stall share', 'votes share', 'rest (background)', 'within runs ± s.e.', `steady (from point ${ONE_TIME_POINTS + 1})`, 'one-time ms', 'CPU time (median)', 'min … max'], rows))
  console.log('\n' + table(['variant', 'background CPU ms per checkpoint and rank', 'background share', 'stall share', 'background + stall + votes'], backgroundRows))
  // One-time costs (the first checkpoint's buffers, files and helper thread) against the steady ones, and the
  // supersteps' own threads: a cost spread over every superstep shows in their CPU time, not in the stalls.
  const mainNoise = offRuns.slice(1).map((x, i) => x.threads.main / offRuns[i].threads.main)
  for (const v of variants) {
    const firsts = runs.get(v)!.flatMap((m) => m.stalls.slice(0, 1))
    const later = runs.get(v)!.flatMap((m) => m.stalls.slice(1))
    const [mainMedian, mainRange] = spread(mainRatios.get(v)!)
    console.log(
      `${v}: first checkpoint's stall ${firsts.length > 0 ? summary(firsts).median.toFixed(1) : '–'} ms (median over runs), later ones ${later.length > 0 ? summary(later).median.toFixed(1) : '–'} ms; ` +
        `main threads' CPU time over runs without checkpoints ${mainMedian} (${mainRange}; noise ${spread(mainNoise).join(', ')})`,
    )
    if (firsts.length > 0) record.figure(`${v}: stall at the first memory checkpoint of a run`, firsts, 'ms')
    record.figure(`${v}: CPU time of the rank processes' main threads over runs without checkpoints`, mainRatios.get(v)!.map((r) => (r - 1) * 100), '%')
  }
  console.log(`\nruns without checkpoints: ${offs.map((x) => (x / 1000).toFixed(2)).join(', ')} s; load average at the end: ${load()}`)
  console.log('within runs: the supersteps within 450 ms of each checkpoint beyond their neighbours\', mean ± standard error, times checkpoints per run time (noise row: at phantom points every 2 s of the runs without checkpoints)')
  console.log(`steady: the same over the checkpoints after the first ${ONE_TIME_POINTS} of each run (what a long run pays per second); one-time: what the first ${ONE_TIME_POINTS} took beyond steady ones, once per run (first touch of the staging buffers, new files in RAM)`)
  console.log('background: CPU time of the rank processes\' threads other than the main one (/proc schedstat), beyond what they take per second of a run without checkpoints; its share of each rank\'s core plus the stall and votes shares bounds the overhead from above, as if every background cycle were taken from a superstep')
  console.log('CPU time: user + system time of the rank processes (helper threads included) over the mean of the runs without checkpoints on either side')
  console.log('stall share: stalls at the checkpoint points / run time; votes share: rank 0 in the time policies\' votes / run time; rest: the overhead neither explains (background work competing for the cores)')
} finally {
  rmSync(root, { recursive: true, force: true })
}
record.save()
