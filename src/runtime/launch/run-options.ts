import { ConfigError } from '../../errors.js'
import { TRANSPORTS, type Transport } from '../group.js'
import { assertHangTimeout, assertRanksFit } from '../groups/limits.js'
import { checkSpareCount } from '../groups/spares.js'

/**
 * The defaults of a run's settings, in one place: `molotof run`'s option
 * table, `launch` and `Supervisor` read them from here (README's options
 * table and `molotof run --help` tell the same values).
 */
export const RUN_DEFAULTS = Object.freeze({
  transport: 'threads' as Transport,
  heartbeatMs: 200,
  /** The hang timeout is this many heartbeat periods… */
  hangTimeoutBeats: 10,
  /** …and at least this long (ms). */
  hangTimeoutFloorMs: 2000,
  restarts: 3,
  spares: 0,
  keepSurvivors: true,
})

/** The shortest heartbeat period accepted (ms): shorter, the beats cost more than they tell. */
export const MIN_HEARTBEAT_MS = 10

/**
 * What the resolver reads of `LaunchOptions` / `SuperviseOptions` (both fit
 * it; declared here so this module needs neither).
 */
export interface RunOptionsInput {
  ranks: number
  transport?: Transport
  heartbeatMs?: number
  hangTimeoutMs?: number
  restarts?: number
  timeLimitMs?: number
  spares?: number
  keepSurvivors?: boolean
}

/** A run's settings with every default applied and every check passed. */
export interface RunSettings {
  readonly ranks: number
  readonly transport: Transport
  readonly heartbeatMs: number
  readonly hangTimeoutMs: number
  readonly restarts: number
  readonly timeLimitMs: number | undefined
  readonly spares: number
  readonly keepSurvivors: boolean
}

/**
 * Turns the user's options into the run's settings: each default applied
 * once, each check made once (a bad value or combination is a ConfigError,
 * before any rank starts).
 *
 * ```ts
 * resolveRunOptions({ ranks: 2 }).hangTimeoutMs   // 2000
 * resolveRunOptions({ ranks: 2, heartbeatMs: 200, hangTimeoutMs: 300 })   // ConfigError: shorter than two heartbeat periods
 * ```
 */
export function resolveRunOptions(opts: RunOptionsInput): RunSettings {
  const restarts = opts.restarts ?? RUN_DEFAULTS.restarts
  if (!Number.isInteger(restarts) || restarts < 0) throw new ConfigError(`the restart budget must be a non-negative integer (got ${restarts})`)
  if (opts.timeLimitMs !== undefined && !(opts.timeLimitMs > 0)) throw new ConfigError(`the time limit must be positive (got ${opts.timeLimitMs} ms)`)
  const { ranks } = opts
  if (!Number.isInteger(ranks) || ranks < 1) throw new ConfigError(`the rank count must be a positive integer (got ${ranks})`)
  const transport = opts.transport ?? RUN_DEFAULTS.transport
  if (!TRANSPORTS.includes(transport)) throw new ConfigError(`unknown transport "${String(transport)}" (available: ${TRANSPORTS.join(', ')})`)
  const heartbeatMs = opts.heartbeatMs ?? RUN_DEFAULTS.heartbeatMs
  if (!(heartbeatMs >= MIN_HEARTBEAT_MS)) throw new ConfigError(`the heartbeat period must be at least ${MIN_HEARTBEAT_MS} ms (got ${heartbeatMs})`)
  assertHangTimeout(heartbeatMs, opts.hangTimeoutMs)
  const hangTimeoutMs = opts.hangTimeoutMs ?? Math.max(RUN_DEFAULTS.hangTimeoutFloorMs, RUN_DEFAULTS.hangTimeoutBeats * heartbeatMs)
  assertRanksFit(ranks, transport)
  const spares = opts.spares ?? RUN_DEFAULTS.spares
  checkSpareCount(spares, ranks)
  return Object.freeze({
    ranks,
    transport,
    heartbeatMs,
    hangTimeoutMs,
    restarts,
    timeLimitMs: opts.timeLimitMs,
    spares,
    keepSurvivors: opts.keepSurvivors ?? RUN_DEFAULTS.keepSurvivors,
  })
}
