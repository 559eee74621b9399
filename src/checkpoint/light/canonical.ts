import { ConfigError } from '../../errors.js'
import { lightKind } from './kind.js'

/**
 * A canonical text for a (checked) light value: equal values give equal text
 * however their plain objects' keys were ordered, while Map and Set keep their
 * order (iteration order is observable, so replay must reproduce it). Shared
 * references are written out in full, so sharing never changes the text —
 * unlike superjson's output, which records referential equalities.
 * Used for digests, never decoded.
 *
 * ```ts
 * canonicalOf({ b: 1, a: [NaN, -0] }) === canonicalOf({ a: [NaN, -0], b: 1 })  // true
 * ```
 */
export function canonicalOf(v: unknown): string {
  const kind = lightKind(v)
  if (typeof kind === 'object') throw new ConfigError(`canonicalOf: ${kind.unsupported}`)
  switch (kind) {
    case 'undefined': return 'u'
    case 'null': return 'null'
    case 'boolean': return String(v)
    case 'number': return Object.is(v, -0) ? '-0' : String(v)
    case 'string': return JSON.stringify(v)
    case 'bigint': return `${v as bigint}n`
    case 'date': return `D(${(v as Date).toISOString()})`
    case 'regexp': return `R(${JSON.stringify(String(v))})`
    case 'url': return `U(${JSON.stringify((v as URL).href)})`
    case 'error': return `E(${JSON.stringify((v as Error).name)},${JSON.stringify((v as Error).message)})`
    case 'array': return `[${(v as unknown[]).map(canonicalOf).join(',')}]`
    case 'map': return `M{${[...(v as Map<unknown, unknown>)].map(([k, x]) => `${canonicalOf(k)}=>${canonicalOf(x)}`).join(',')}}`
    case 'set': return `S{${[...(v as Set<unknown>)].map(canonicalOf).join(',')}}`
    case 'object': {
      const o = v as Record<string, unknown>
      return `{${Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${canonicalOf(o[k])}`).join(',')}}`
    }
  }
}
