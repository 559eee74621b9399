import { match } from 'ts-pattern'
import { ConfigError } from '../../errors.js'
import { parsePolicy, toRule, type CheckpointPolicy, type PolicyRule } from './policy.js'

/** What a rank knows at a checkpoint point. Times are milliseconds on one clock (e.g. `performance.now()`). */
export interface ClockInput {
  /** 0-based index of the superstep just completed. */
  step: number
  now: number
  /** When the last checkpoint finished, or when the run (skeleton) started if none was taken. */
  lastCheckpointAt: number
  /**
   * Measured checkpoint cost in ms: one number (used as is), or the history of
   * measurements, oldest first. Each measurement should be the slowest rank's
   * time, since a checkpoint is complete only when the last rank is durable.
   * Undefined or empty before the first checkpoint.
   */
  measuredCostMs?: number | readonly number[]
  /** A checkpoint was asked for (SIGTERM/SIGINT preemption, `molotof` signal). */
  requested?: boolean
}

export interface ClockOptions {
  /** Without a measured cost yet, the mtbf policy takes its first checkpoint after this long, to measure it (default 1000 ms). */
  probeAfterMs?: number
  /** How many recent measurements the cost estimate averages (default 5). */
  costWindow?: number
}

/**
 * Decides, at each checkpoint point, whether this rank votes to checkpoint.
 *
 * `every` and `onRequest` decisions depend only on data all ranks share, so
 * every rank votes the same. `seconds` and `mtbf` read the local clock, so
 * ranks may disagree by a superstep: the caller must agree collectively and
 * checkpoint when ANY rank votes yes (the max of the votes) — see `timeBased`.
 *
 * For `mtbf`, the interval is Daly's refinement of Young's τ = √(2CM), with C
 * the checkpoint cost and M the MTBF. C is the MEAN of the last `costWindow`
 * measurements (each already the max over ranks): the waste Young/Daly
 * minimise is linear in C, so the expected cost is the right input, while the
 * window follows a file system whose speed changes. Before anything is
 * measured, the first checkpoint is taken after `probeAfterMs` to measure C.
 *
 * ```ts
 * const clock = new PolicyClock(parsePolicy('mtbf:6h'))
 * const mine = clock.shouldCheckpoint({ step, now: performance.now(), lastCheckpointAt, measuredCostMs: costs })
 * const go = clock.timeBased ? await comm.allreduce(mine ? 1 : 0, 'max') === 1 : mine
 * ```
 */
export class PolicyClock {
  readonly rule: PolicyRule
  private readonly probeAfterMs: number
  private readonly costWindow: number

  /** `policy` may also be a CLI string (`'every:50'`, `'mtbf:6h'` …); it is validated with parsePolicy. */
  constructor(policy: CheckpointPolicy | string, options: ClockOptions = {}) {
    this.rule = toRule(parsePolicy(policy))
    this.probeAfterMs = options.probeAfterMs ?? 1000
    this.costWindow = options.costWindow ?? 5
    if (!(this.probeAfterMs >= 0 && Number.isFinite(this.probeAfterMs))) throw new ConfigError(`probeAfterMs must be a non-negative number (got ${this.probeAfterMs})`)
    if (!Number.isSafeInteger(this.costWindow) || this.costWindow < 1) throw new ConfigError(`costWindow must be a positive integer (got ${this.costWindow})`)
  }

  /** True when votes depend on the local clock, so ranks must agree on them (max of votes). */
  get timeBased(): boolean {
    return this.rule.kind === 'seconds' || this.rule.kind === 'mtbf'
  }

  /** This rank's vote at this checkpoint point. */
  shouldCheckpoint(input: ClockInput): boolean {
    const requested = input.requested === true
    return match(this.rule)
      .with({ kind: 'off' }, () => false)
      .with({ kind: 'request' }, () => requested)
      .with({ kind: 'every' }, (r) => requested || (input.step + 1) % r.steps === 0)
      .with({ kind: 'seconds' }, (r) => requested || input.now - input.lastCheckpointAt >= r.seconds * 1000)
      .with({ kind: 'mtbf' }, () => requested || input.now - input.lastCheckpointAt >= this.intervalMs(input.measuredCostMs)!)
      .exhaustive()
  }

  /**
   * The vote of a step-based policy at `step` without a request: what
   * `shouldCheckpoint` answers for `off`, `request` and `every`, without
   * allocating (checked at every superstep). False for time-based policies.
   */
  dueAtStep(step: number): boolean {
    const r = this.rule
    return r.kind === 'every' && (step + 1) % r.steps === 0
  }

  /**
   * The target time between checkpoints in ms for time-based policies
   * (undefined for the others): the fixed period, or the Daly interval for the
   * estimated cost — the probe delay while no cost has been measured.
   */
  intervalMs(measuredCostMs?: number | readonly number[]): number | undefined {
    return match(this.rule)
      .with({ kind: 'seconds' }, (r) => r.seconds * 1000)
      .with({ kind: 'mtbf' }, (r) => {
        const c = this.costEstimate(measuredCostMs)
        return c === undefined ? this.probeAfterMs : dalyInterval(c, r.mtbfSeconds * 1000)
      })
      .with({ kind: 'off' }, { kind: 'every' }, { kind: 'request' }, () => undefined)
      .exhaustive()
  }

  /** C as the clock uses it: the number given, or the mean of the last `costWindow` measurements. */
  costEstimate(measuredCostMs?: number | readonly number[]): number | undefined {
    if (measuredCostMs === undefined) return undefined
    if (typeof measuredCostMs === 'number') return measuredCostMs
    const recent = measuredCostMs.slice(-this.costWindow)
    return recent.length === 0 ? undefined : recent.reduce((a, b) => a + b, 0) / recent.length
  }
}

/**
 * Young's first-order optimum checkpoint interval τ = √(2·C·M) for checkpoint
 * cost C and mean time between failures M (any unit, the same for both and the result).
 *
 * ```ts
 * youngInterval(10, 21600)  // ≈ 657.3 (10 s checkpoints, 6 h MTBF → every ~11 min)
 * ```
 */
export function youngInterval(cost: number, mtbf: number): number {
  return Math.sqrt(2 * cost * mtbf)
}

/**
 * Daly's higher-order refinement (2006):
 * τ = √(2CM)·[1 + ⅓·√(C/2M) + ⅑·(C/2M)] − C when C < 2M, and τ = M otherwise
 * (checkpoints so expensive relative to failures that one per MTBF is best).
 * τ is the compute time between the end of one checkpoint and the start of the next.
 *
 * ```ts
 * dalyInterval(10, 21600)  // ≈ 650.6
 * ```
 */
export function dalyInterval(cost: number, mtbf: number): number {
  if (!(cost >= 0) || !(mtbf > 0)) throw new ConfigError(`Young/Daly needs a cost ≥ 0 and an MTBF > 0 (got C=${cost}, M=${mtbf})`)
  if (cost >= 2 * mtbf) return mtbf
  const r = cost / (2 * mtbf)
  return Math.sqrt(2 * cost * mtbf) * (1 + Math.sqrt(r) / 3 + r / 9) - cost
}
