import { createHash } from 'node:crypto'
import { SuperJSON, type SuperJSONResult, type SuperJSONValue } from 'superjson'
import { CheckpointError, CheckpointMismatchError, ConfigError } from '../../errors.js'
import { isPlainObject } from '../format/json.js'
import { canonicalOf } from './canonical.js'
import { findUnserializable } from './check.js'
import { diffLight } from './diff.js'
import { dropNaNIdentities } from './superjson-nan.js'

export { diffLight }

/**
 * How to save a value of a user's own class: turn it into plain data
 * (anything superjson handles: objects, arrays, Map, Set, Date, BigInt …) and back.
 * `name` is stored with the value, so restoring with another serializer fails
 * loudly instead of building the wrong object.
 *
 * ```ts
 * class Rng {
 *   constructor(public state: bigint) {}
 *   static fromState(state: bigint) { return new Rng(state) }
 * }
 * const rngSerializer: Serializer<Rng> = {
 *   name: 'Rng',
 *   serialize: (r) => ({ state: r.state }),
 *   deserialize: (d) => Rng.fromState((d as { state: bigint }).state),
 * }
 * const rng = sk.checkpoint.value('rng', new Rng(42n), rngSerializer)   // a Cell<Rng>
 * ```
 */
export interface Serializer<T> {
  name: string
  /** The value as plain data (what the checkpoint stores). */
  serialize(value: T): unknown
  /** The value back from that data. */
  deserialize(data: unknown): T
}

// A private instance: classes registered on the global SuperJSON elsewhere must not
// change what checkpoints contain.
const sj = new SuperJSON()
const ENVELOPE_VERSION = 1

/** The stored form of a light value. */
interface Envelope {
  molotof: typeof ENVELOPE_VERSION
  serializer?: string
  value: SuperJSONResult
}

/**
 * Throws ConfigError, at registration time, when `value` (or what `serializer`
 * makes of it) cannot be saved and restored faithfully, naming the path inside
 * the value and the reason: functions, symbols, class instances without a
 * serializer, WeakMap/WeakSet, Promises, circular references, invalid dates,
 * sparse arrays, keys superjson refuses, and typed arrays (which belong in heavy
 * entries). It also encodes and decodes the value once and compares, so a
 * shape the encoder mishandles is refused up front, not discovered at recovery.
 *
 * ```ts
 * checkSerializable('settings', { n: 4, cb: () => 0 })
 * // ConfigError: cannot checkpoint settings.cb: a function cannot be saved in a checkpoint; …
 * ```
 */
export function checkSerializable<T>(name: string, value: T, serializer?: Serializer<T>): void {
  const data = prepare(name, value, serializer)
  const back: unknown = sj.deserialize(JSON.parse(JSON.stringify(toSuperJSON(data))))
  const difference = diffLight(data, back, serializer ? `${name}<${serializer.name}>` : name)
  if (difference !== undefined) throw new ConfigError(`cannot checkpoint ${name}: it does not survive encoding (${difference})`)
}

/**
 * Encodes a light value (superjson inside a small JSON envelope, UTF-8). The
 * value is checked first, so a value that became unsaveable after registration
 * fails here with the same clear message instead of being silently truncated.
 *
 * ```ts
 * const bytes = encodeLight(new Map([['t', 1n]]))
 * decodeLight(bytes)  // Map { 't' => 1n }
 * ```
 */
export function encodeLight<T>(value: T, serializer?: Serializer<T>, name = 'value'): Uint8Array {
  const data = prepare(name, value, serializer)
  const envelope: Envelope = {
    molotof: ENVELOPE_VERSION,
    ...(serializer ? { serializer: serializer.name } : {}),
    value: toSuperJSON(data),
  }
  return new TextEncoder().encode(JSON.stringify(envelope))
}

/**
 * Decodes what encodeLight wrote. A value saved with a serializer must be
 * restored with a serializer of the same name (and one saved without, without).
 *
 * ```ts
 * const rng = decodeLight(entry.bytes, rngSerializer)
 * ```
 */
export function decodeLight<T = unknown>(bytes: Uint8Array, serializer?: Serializer<T>): T {
  let envelope: unknown
  try {
    envelope = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes))
  } catch (e) {
    throw new CheckpointError(`a light checkpoint value is not valid JSON (${(e as Error).message})`)
  }
  if (!isEnvelope(envelope)) throw new CheckpointError('a light checkpoint value is not in the molotof light encoding')
  if (envelope.serializer !== serializer?.name) {
    const saved = envelope.serializer === undefined ? 'without a serializer' : `with serializer "${envelope.serializer}"`
    const now = serializer === undefined ? 'none is given' : `serializer "${serializer.name}" is given`
    throw new CheckpointMismatchError(`a light checkpoint value was saved ${saved}, but ${now}; register the value the same way as when the checkpoint was taken`)
  }
  const data: unknown = sj.deserialize(envelope.value)
  return serializer ? serializer.deserialize(data) : (data as T)
}

/**
 * sha256 (hex) of the canonical encoding of a light value: equal values give
 * equal digests whatever the key order of their plain objects or the sharing of
 * sub-objects. Checkpoints store digests of values replay must rebuild; on
 * recovery a different digest means the light code is not deterministic.
 *
 * ```ts
 * if (digestOf(replayed) !== header.digests.config) throw new ReplayDivergenceError('config', diffLight(recorded, replayed, 'config') ?? 'digest differs')
 * ```
 */
export function digestOf<T>(value: T, serializer?: Serializer<T>, name = 'value'): string {
  const data = prepare(name, value, serializer)
  const text = (serializer ? `S(${JSON.stringify(serializer.name)})` : '') + canonicalOf(data)
  return createHash('sha256').update(text).digest('hex')
}

/** superjson's encoding of checked data, with the NaN identity defect removed. */
function toSuperJSON(data: unknown): SuperJSONResult {
  return dropNaNIdentities(sj.serialize(data as SuperJSONValue))
}

/** Applies the serializer (once) and checks the result; returns what superjson will see. */
function prepare<T>(name: string, value: T, serializer?: Serializer<T>): unknown {
  let data: unknown = value
  let path = name
  if (serializer) {
    if (typeof serializer.name !== 'string' || serializer.name === '' || typeof serializer.serialize !== 'function' || typeof serializer.deserialize !== 'function') {
      throw new ConfigError(`the serializer of ${name} needs a non-empty name, serialize() and deserialize()`)
    }
    try {
      data = serializer.serialize(value)
    } catch (e) {
      throw new ConfigError(`cannot checkpoint ${name}: serializer "${serializer.name}" threw: ${(e as Error).message}`, { cause: e })
    }
    path = `${name}<${serializer.name}>`
  }
  const problem = findUnserializable(data, path)
  if (problem) throw new ConfigError(`cannot checkpoint ${problem.path}: ${problem.reason}`)
  return data
}

function isEnvelope(v: unknown): v is Envelope {
  return (
    isPlainObject(v) &&
    v.molotof === ENVELOPE_VERSION &&
    (v.serializer === undefined || typeof v.serializer === 'string') &&
    isPlainObject(v.value) &&
    'json' in v.value
  )
}
