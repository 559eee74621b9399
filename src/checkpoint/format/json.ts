import { ConfigError } from '../../errors.js'

/** A value that survives `JSON.stringify` → `JSON.parse` unchanged. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue }
/** A JSON object: what checkpoint headers and commit markers store as `settings`. */
export type JsonObject = { [key: string]: JsonValue }

/**
 * Checks that `value` is plain JSON and returns it typed as such, so settings
 * stored in a checkpoint compare equal to the same settings on the next run.
 * A NaN or an Infinity would silently come back as `null` and make every
 * restart look like a settings change, hence the error here, up front.
 * Object properties whose value is `undefined` are allowed (JSON drops them and
 * `compareSettings` treats a missing key and `undefined` alike).
 *
 * ```ts
 * const settings = checkJsonObject('settings', { n: 512, tol: 1e-6 })
 * checkJsonObject('settings', { tol: NaN })  // ConfigError: settings.tol: NaN is not JSON …
 * ```
 */
export function checkJsonObject(name: string, value: unknown): JsonObject {
  if (!isPlainObject(value)) throw new ConfigError(`${name} must be a plain object (got ${describeKind(value)})`)
  checkJson(name, value, [])
  return value as JsonObject
}

function checkJson(path: string, v: unknown, ancestors: object[]): void {
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new ConfigError(`${path}: ${v} is not JSON (it would be stored as null); use a finite number or a string`)
    return
  }
  if (typeof v !== 'object') throw new ConfigError(`${path}: a ${describeKind(v)} is not JSON; settings must be plain data`)
  if (ancestors.includes(v)) throw new ConfigError(`${path}: circular reference; settings must be a tree of plain data`)
  ancestors.push(v)
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) checkJson(`${path}[${i}]`, v[i], ancestors)
  } else if (isPlainObject(v)) {
    for (const [k, x] of Object.entries(v)) if (x !== undefined) checkJson(childPath(path, k), x, ancestors)
  } else {
    throw new ConfigError(`${path}: a ${describeKind(v)} is not JSON; settings must be plain data`)
  }
  ancestors.pop()
}

/**
 * True for `{}`-style objects (prototype Object.prototype or null).
 *
 * ```ts
 * isPlainObject({}) && !isPlainObject(new Map())  // true
 * ```
 */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null) return false
  const proto: unknown = Object.getPrototypeOf(v)
  return proto === Object.prototype || proto === null
}

/**
 * `a.b` for identifier keys, `a["x y"]` otherwise: paths users can read in messages.
 *
 * ```ts
 * childPath('settings', 'grid')  // 'settings.grid'
 * ```
 */
export function childPath(path: string, key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`
}

/**
 * A short name for what a value is, for error messages.
 *
 * ```ts
 * describeKind(new Float64Array(2))  // 'Float64Array'
 * describeKind(() => 1)              // 'function'
 * ```
 */
export function describeKind(v: unknown): string {
  if (v === null) return 'null'
  if (typeof v !== 'object') return typeof v
  if (Array.isArray(v)) return 'array'
  const proto: unknown = Object.getPrototypeOf(v)
  if (proto === null || proto === Object.prototype) return 'object'
  const ctor = (v as { constructor?: { name?: unknown } }).constructor
  const name = typeof ctor?.name === 'string' && ctor.name !== '' ? ctor.name : 'anonymous class'
  return name
}
