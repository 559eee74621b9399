import { match, P } from 'ts-pattern'
import { ConfigError } from '../../errors.js'
import { formatDuration, parseDuration } from './duration.js'
import { isPlainObject } from '../format/json.js'

/**
 * When to take checkpoints, as plain data (fits in a config file or a CLI flag):
 *
 * - `{ kind: 'off' }`: never;
 * - `{ every: n }`: after every n-th superstep (deterministic: all ranks agree without talking);
 * - `{ seconds: t }`: when t seconds have passed since the last checkpoint;
 * - `{ mtbf }`: at the Young/Daly interval for that mean time between failures
 *   (`'6h'`, `'30m'`, `'90s'`, `'1d'` or seconds) and the measured checkpoint cost;
 * - `{ onRequest: true }`: only when asked (SIGTERM/SIGINT preemption, `requested`).
 *
 * Every policy except `off` also checkpoints when a checkpoint is requested.
 */
export type CheckpointPolicy =
  | { kind: 'off' }
  | { every: number }
  | { seconds: number }
  | { mtbf: string | number }
  | { onRequest: true }

/** The same policies with a discriminant and numbers in one unit, for matching. */
export type PolicyRule =
  | { kind: 'off' }
  | { kind: 'every'; steps: number }
  | { kind: 'seconds'; seconds: number }
  | { kind: 'mtbf'; mtbfSeconds: number }
  | { kind: 'request' }

/** The key that identifies each policy object (`every`, `seconds`, …). */
type PolicyKey = CheckpointPolicy extends infer U ? (U extends unknown ? keyof U : never) : never

const ACCEPTED =
  'accepted: off, request, every:<steps> (or just <steps>), seconds:<duration> (or 30s, 5m), mtbf:<duration> (e.g. mtbf:6h), ' +
  'or the objects { kind: "off" }, { every }, { seconds }, { mtbf }, { onRequest: true }'

/** Raised by a validator with the reason only; parsePolicy adds the input and the accepted forms. */
class Invalid extends Error {}

// One validator per policy key; the Record type makes the compiler ask for a new one with each new policy.
const VALIDATORS: Record<PolicyKey, (value: unknown) => CheckpointPolicy> = {
  kind: (v) => {
    if (v !== 'off') throw new Invalid(`kind must be "off" (got ${show(v)})`)
    return { kind: 'off' }
  },
  every: (v) => {
    const n = typeof v === 'string' && /^\s*\d+\s*$/.test(v) ? Number(v) : v
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1) throw new Invalid(`every needs a positive whole number of steps (got ${show(v)})`)
    return { every: n }
  },
  seconds: (v) => {
    const s = typeof v === 'string' || typeof v === 'number' ? parseDuration(v) : undefined
    if (s === undefined) throw new Invalid(`seconds needs a positive duration such as 30, "30s" or "5m" (got ${show(v)})`)
    return { seconds: s }
  },
  mtbf: (v) => {
    const s = typeof v === 'string' || typeof v === 'number' ? parseDuration(v) : undefined
    if (s === undefined) throw new Invalid(`mtbf needs a positive duration such as "6h", "30m", "90s", "1d" or a number of seconds (got ${show(v)})`)
    return { mtbf: s }
  },
  onRequest: (v) => {
    if (v !== true) throw new Invalid(`onRequest must be true (got ${show(v)})`)
    return { onRequest: true }
  },
}

/**
 * Validates a policy given as an object or a CLI string and returns it in
 * canonical form (durations as seconds). Throws ConfigError naming the input,
 * what is wrong and the accepted forms.
 *
 * ```ts
 * parsePolicy('every:50')  // { every: 50 }
 * parsePolicy('50')        // { every: 50 }
 * parsePolicy('30s')       // { seconds: 30 }
 * parsePolicy('mtbf:6h')   // { mtbf: 21600 }
 * parsePolicy({ onRequest: true })
 * ```
 */
export function parsePolicy(input: unknown): CheckpointPolicy {
  try {
    if (typeof input === 'string') return fromString(input)
    if (!isPlainObject(input)) throw new Invalid(`a policy is a string or an object, not ${input === null ? 'null' : typeof input}`)
    const keys = Object.keys(input)
    if (keys.length !== 1) throw new Invalid(keys.length === 0 ? 'the object names no policy' : `one policy at a time (got ${keys.join(', ')})`)
    const key = keys[0]
    if (!Object.prototype.hasOwnProperty.call(VALIDATORS, key)) throw new Invalid(`unknown policy "${key}"`)
    return VALIDATORS[key as PolicyKey](input[key])
  } catch (e) {
    if (e instanceof Invalid) throw new ConfigError(`invalid checkpoint policy ${show(input)}: ${e.message}; ${ACCEPTED}`)
    throw e
  }
}

function fromString(raw: string): CheckpointPolicy {
  const s = raw.trim().toLowerCase()
  if (s === 'off') return { kind: 'off' }
  if (s === 'request' || s === 'onrequest' || s === 'on-request') return { onRequest: true }
  if (/^\d+$/.test(s)) return VALIDATORS.every(s)
  const kv = /^(\w+)\s*[:=]\s*(.*)$/.exec(s)
  if (kv) {
    const key = kv[1]
    if (key !== 'every' && key !== 'seconds' && key !== 'mtbf') throw new Invalid(`unknown policy "${kv[1]}"`)
    return VALIDATORS[key](kv[2])
  }
  if (/^[\d.]+\s*(ms|s|m|h|d)$/.test(s)) return VALIDATORS.seconds(s)
  throw new Invalid('not a policy')
}

/**
 * The discriminated form of a (valid) policy, for exhaustive matching.
 *
 * ```ts
 * match(toRule(policy)).with({ kind: 'every' }, (r) => r.steps) …
 * ```
 */
export function toRule(policy: CheckpointPolicy): PolicyRule {
  return match<CheckpointPolicy, PolicyRule>(policy)
    .with({ kind: 'off' }, () => ({ kind: 'off' }))
    .with({ every: P.number }, (p) => ({ kind: 'every', steps: p.every }))
    .with({ seconds: P.number }, (p) => ({ kind: 'seconds', seconds: p.seconds }))
    .with({ mtbf: P.union(P.string, P.number) }, (p) => {
      const s = parseDuration(p.mtbf)
      if (s === undefined) throw new ConfigError(`invalid checkpoint policy: mtbf ${show(p.mtbf)} is not a positive duration`)
      return { kind: 'mtbf', mtbfSeconds: s }
    })
    .with({ onRequest: true }, () => ({ kind: 'request' }))
    .exhaustive()
}

/**
 * One line describing a policy for logs and `--help`.
 *
 * ```ts
 * describePolicy({ mtbf: '6h' })  // 'Young/Daly interval for an MTBF of 6h, from the measured checkpoint cost'
 * ```
 */
export function describePolicy(policy: CheckpointPolicy): string {
  return match(toRule(policy))
    .with({ kind: 'off' }, () => 'no checkpoints')
    .with({ kind: 'every' }, (r) => (r.steps === 1 ? 'after every step' : `every ${r.steps} steps`))
    .with({ kind: 'seconds' }, (r) => `every ${formatDuration(r.seconds)}`)
    .with({ kind: 'mtbf' }, (r) => `Young/Daly interval for an MTBF of ${formatDuration(r.mtbfSeconds)}, from the measured checkpoint cost`)
    .with({ kind: 'request' }, () => 'only on request (signal)')
    .exhaustive()
}

function show(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v)
  try {
    return JSON.stringify(v) ?? String(v)
  } catch {
    // Circular or BigInt: only for the message, so the plain string form will do.
    return String(v)
  }
}
