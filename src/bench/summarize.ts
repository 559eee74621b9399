import type { BenchReport, ConfigResult, RecoveryFigures } from './runner.js'
import { summary } from './stats.js'

/** The figures a reader compares, derived once from a report (tables, HTML and JSON use it). */
export interface ConfigSummary {
  contents: ConfigResult['contents']
  requested: number
  /** Checkpoints actually committed per run (median). */
  placed: number
  runtime: { min: number; median: number; max: number }
  /** Median runtime against the no-fault-tolerance median, in %. */
  overheadPct: number
  /** The runtime differs from the no-fault-tolerance one by no more than the noise (BenchSummary.noiseMs): no figure to print. */
  belowNoise: boolean
  /** Rank 0's checkpoint file and the total over ranks (bytes, median over checkpoints). */
  bytesPerRank: number | undefined
  bytesTotal: number | undefined
  writeMs: number | undefined
  /** MiB/s of the whole checkpoint (all ranks) over its commit time. */
  throughputMiBs: number | undefined
  /** Private resident memory per rank (median over runs of the per-run max), and its ratio to bytesPerRank. */
  systemBytesPerRank: number | undefined
}

/**
 * Overheads at other checkpoint intervals, derived from the measured cost of
 * one checkpoint: the slope of the median runtime against the number of
 * checkpoints per run over every count measured and the run without
 * checkpoints (Theil–Sen: the median of the pairwise slopes), so one noisy
 * configuration does not decide the figure.
 */
export interface DerivedOverhead {
  contents: 'default' | 'minimal'
  /** Extra runtime per checkpoint (ms). */
  costMs: number
  /** One checkpoint every 2 s of computation. */
  every2sPct: number
  /** Young/Daly interval for an MTBF of 1 hour, from the commit time C: τ = √(2·C·M). */
  youngDalyIntervalS: number
  youngDalyPct: number
  /** The runtime this cost adds at the largest count measured is within the noise: the cost is not measured. */
  belowNoise: boolean
}

export interface BenchSummary {
  /** Spread (max − min) of the runtimes without fault tolerance (ms), when there are two or more. */
  noiseMs: number | undefined
  configs: ConfigSummary[]
  derived: DerivedOverhead[]
  /** The cold restart (no spares). */
  recovery: RecoverySummary
  /** One per spare count measured, the cold restart (0) first. */
  recoveryBySpares: Array<RecoverySummary & { spares: number }>
}

export interface RecoverySummary {
  median: Omit<RecoveryFigures, 'sameResult' | 'lineStep' | 'failedStep' | 'spares'> | undefined
  allSame: boolean
  runs: RecoveryFigures[]
}

export function summarize(r: BenchReport): BenchSummary {
  const none = r.configs.find((c) => c.contents === 'none')!.runs.map((x) => x.runtimeMs)
  const baseRuns = summary(none)
  const base = baseRuns.median
  const noiseMs = none.length >= 2 ? baseRuns.max - baseRuns.min : undefined
  const withinNoise = (ms: number) => noiseMs !== undefined && Math.abs(ms) <= noiseMs
  const configs = r.configs.map((c): ConfigSummary => {
    const runtime = summary(c.runs.map((x) => x.runtimeMs))
    const cks = c.runs.flatMap((x) => x.checkpoints)
    const med = (xs: number[]) => (xs.length ? summary(xs).median : undefined)
    const rank0sys = c.runs.map((x) => x.privateBytes[0]).filter((x): x is number => x !== undefined)
    const bytesTotal = med(cks.map((k) => k.totalBytes))
    const writeMs = med(cks.map((k) => k.ms))
    return {
      contents: c.contents,
      requested: c.requested,
      placed: summary(c.runs.map((x) => x.checkpoints.length)).median,
      runtime,
      overheadPct: (runtime.median / base - 1) * 100,
      belowNoise: c.contents !== 'none' && withinNoise(runtime.median - base),
      bytesPerRank: med(cks.map((k) => k.bytes)),
      bytesTotal,
      writeMs,
      throughputMiBs: bytesTotal !== undefined && writeMs ? bytesTotal / 2 ** 20 / (writeMs / 1000) : undefined,
      systemBytesPerRank: med(rank0sys),
    }
  })
  const keys = ['detectionMs', 'stopMs', 'spawnMs', 'negotiateMs', 'loadMs', 'replayMs', 'restoreMs', 'firstStepMs', 'toFirstStepMs', 'lostSteps', 'lostMs', 'runtimeMs'] as const
  const recoveryOf = (runs: RecoveryFigures[]): RecoverySummary => ({
    median: runs.length ? (Object.fromEntries(keys.map((k) => [k, summary(runs.map((x) => x[k] ?? NaN)).median])) as RecoverySummary['median']) : undefined,
    allSame: runs.every((x) => x.sameResult),
    runs,
  })
  const spareCounts = [...new Set(r.recovery.map((x) => x.spares ?? 0))].sort((a, b) => a - b)
  const recoveryBySpares = spareCounts.map((spares) => ({ spares, ...recoveryOf(r.recovery.filter((x) => (x.spares ?? 0) === spares)) }))
  const derived: DerivedOverhead[] = []
  for (const contents of ['default', 'minimal'] as const) {
    const measured = configs.filter((x) => x.contents === contents && x.placed > 0)
    const c = measured[measured.length - 1]
    if (!c || c.writeMs === undefined) continue
    const costMs = Math.max(0, robustSlope([[0, base], ...measured.map((x): [number, number] => [x.placed, x.runtime.median])]))
    const tau = Math.sqrt(2 * (c.writeMs / 1000) * 3600)
    const belowNoise = withinNoise(costMs * Math.max(...measured.map((x) => x.placed)))
    derived.push({ contents, costMs, every2sPct: (costMs / 2000) * 100, youngDalyIntervalS: tau, youngDalyPct: (costMs / 1000 / tau) * 100, belowNoise })
  }
  return { noiseMs, configs, derived, recovery: recoveryOf(r.recovery.filter((x) => !x.spares)), recoveryBySpares }
}

/**
 * Theil–Sen slope of y against x: the median of the slopes between every two
 * points with different x. Unlike a least-squares fit, one noisy point (often
 * the largest count, which has the most leverage) cannot move it far.
 */
export function robustSlope(points: readonly (readonly [number, number])[]): number {
  const slopes: number[] = []
  for (let i = 0; i < points.length; i++) {
    for (let j = i + 1; j < points.length; j++) {
      const dx = points[j][0] - points[i][0]
      if (dx !== 0) slopes.push((points[j][1] - points[i][1]) / dx)
    }
  }
  return slopes.length === 0 ? 0 : summary(slopes).median
}

/** Repeats of the measured configurations (the one without fault tolerance may have an extra run, for the noise). */
export function repeatsOf(r: BenchReport): number {
  return r.configs[r.configs.length - 1].runs.length
}
