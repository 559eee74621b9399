import { describeKind } from '../format/json.js'

/** The shapes of data a light value may contain: what superjson restores faithfully. */
export type LightKind =
  | 'undefined' | 'null' | 'boolean' | 'number' | 'string' | 'bigint'
  | 'date' | 'regexp' | 'url' | 'error' | 'map' | 'set' | 'array' | 'object'

/**
 * Classifies `v` for the light-value code (check, canonical encoding, diff), so
 * all three agree on what is supported. Anything else comes back as
 * `{ unsupported: reason }`, the reason phrased for the user who registered it.
 *
 * ```ts
 * lightKind(new Map())      // 'map'
 * lightKind(() => 1)        // { unsupported: 'a function cannot be saved …' }
 * ```
 */
export function lightKind(v: unknown): LightKind | { unsupported: string } {
  switch (typeof v) {
    case 'undefined': return 'undefined'
    case 'boolean': return 'boolean'
    case 'number': return 'number'
    case 'string': return 'string'
    case 'bigint': return 'bigint'
    case 'function':
      return { unsupported: 'a function cannot be saved in a checkpoint; keep functions out of registered values (replay rebuilds them)' }
    case 'symbol':
      return { unsupported: 'a symbol cannot be saved in a checkpoint' }
  }
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'array'
  const proto: unknown = Object.getPrototypeOf(v)
  if (proto === Object.prototype || proto === null) return 'object'
  if (v instanceof Date) {
    return Number.isNaN(v.getTime()) ? { unsupported: 'an invalid Date cannot be saved (it would come back as null)' } : 'date'
  }
  if (v instanceof Map) return 'map'
  if (v instanceof Set) return 'set'
  if (proto === RegExp.prototype) return 'regexp'
  if (proto === URL.prototype) return 'url'
  // Only plain Errors: superjson restores every error as an Error, so a subclass would lose its class.
  if (proto === Error.prototype) return 'error'
  const name = describeKind(v)
  if (ArrayBuffer.isView(v) || v instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && v instanceof SharedArrayBuffer)) {
    return { unsupported: `a ${name} is heavy data: register it as a heavy entry, not inside a light value` }
  }
  if (v instanceof WeakMap || v instanceof WeakSet || v instanceof WeakRef) {
    return { unsupported: `a ${name} cannot be saved (its contents cannot be enumerated)` }
  }
  if (v instanceof Promise) return { unsupported: 'a Promise cannot be saved in a checkpoint' }
  return {
    unsupported: `an instance of class ${name} cannot be saved without a serializer: register it with a Serializer { name, serialize, deserialize }, or keep plain data`,
  }
}
