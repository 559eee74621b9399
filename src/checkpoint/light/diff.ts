import { childPath, describeKind } from '../format/json.js'
import { keyLabel } from './check.js'
import { lightKind } from './kind.js'

/**
 * Describes the first place where two light values differ, as
 * `path: recorded → replayed`, or returns undefined when they are equal in the
 * sense digests use (NaN equals NaN, -0 differs from 0, plain-object key order
 * does not matter, Map and Set order does). Feeds ReplayDivergenceError.
 *
 * ```ts
 * diffLight({ grid: { n: 100 } }, { grid: { n: 200 } }, 'config')  // 'config.grid.n: 100 → 200'
 * throw new ReplayDivergenceError('config', diffLight(recorded, replayed, 'config')!)
 * ```
 */
export function diffLight(a: unknown, b: unknown, root = 'value'): string | undefined {
  return diff(a, b, root)
}

function kindName(v: unknown): string {
  const k = lightKind(v)
  return typeof k === 'object' ? describeKind(v) : k
}

function diff(a: unknown, b: unknown, path: string): string | undefined {
  const ka = kindName(a)
  const kb = kindName(b)
  const differs = `${path}: ${show(a)} → ${show(b)}`
  if (ka !== kb) return differs
  if (typeof a !== 'object' || a === null) return Object.is(a, b) ? undefined : differs
  switch (ka) {
    case 'date': return Object.is((a as Date).getTime(), (b as Date).getTime()) ? undefined : differs
    case 'regexp': return String(a) === String(b) ? undefined : differs
    case 'url': return (a as URL).href === (b as URL).href ? undefined : differs
    case 'error':
      return (a as Error).name === (b as Error).name && (a as Error).message === (b as Error).message ? undefined : differs
    case 'array': {
      const x = a as unknown[]
      const y = b as unknown[]
      if (x.length !== y.length) return `${path}: array of length ${x.length} → ${y.length}`
      for (let i = 0; i < x.length; i++) {
        const d = diff(x[i], y[i], `${path}[${i}]`)
        if (d) return d
      }
      return undefined
    }
    case 'map': {
      const x = [...(a as Map<unknown, unknown>)]
      const y = [...(b as Map<unknown, unknown>)]
      if (x.length !== y.length) return `${path}: Map of ${x.length} entries → ${y.length}`
      for (let i = 0; i < x.length; i++) {
        const d = diff(x[i][0], y[i][0], `${path}.keys()[${i}]`) ?? diff(x[i][1], y[i][1], `${path}.get(${keyLabel(x[i][0], i)})`)
        if (d) return d
      }
      return undefined
    }
    case 'set': {
      const x = [...(a as Set<unknown>)]
      const y = [...(b as Set<unknown>)]
      if (x.length !== y.length) return `${path}: Set of ${x.length} values → ${y.length}`
      for (let i = 0; i < x.length; i++) {
        const d = diff(x[i], y[i], `${path}.values()[${i}]`)
        if (d) return d
      }
      return undefined
    }
    default: {
      // Plain objects, and (for robustness) class instances of the same class: compare own keys.
      const x = a as Record<string, unknown>
      const y = b as Record<string, unknown>
      for (const k of Object.keys(x)) {
        if (!Object.prototype.hasOwnProperty.call(y, k)) return `${childPath(path, k)}: ${show(x[k])} → (missing)`
      }
      for (const k of Object.keys(y)) {
        if (!Object.prototype.hasOwnProperty.call(x, k)) return `${childPath(path, k)}: (missing) → ${show(y[k])}`
      }
      for (const k of Object.keys(x)) {
        const d = diff(x[k], y[k], childPath(path, k))
        if (d) return d
      }
      return undefined
    }
  }
}

/** A short, one-line rendering of a value for messages. */
function show(v: unknown): string {
  const kind = lightKind(v)
  let s: string
  switch (typeof kind === 'object' ? 'other' : kind) {
    case 'string': s = JSON.stringify(v); break
    case 'number': s = Object.is(v, -0) ? '-0' : String(v); break
    case 'bigint': s = `${v as bigint}n`; break
    case 'undefined': case 'null': case 'boolean': s = String(v); break
    case 'date': s = `Date(${(v as Date).toISOString()})`; break
    case 'regexp': s = String(v); break
    case 'url': s = `URL(${(v as URL).href})`; break
    case 'error': s = `Error(${JSON.stringify((v as Error).message)})`; break
    case 'array': s = `array of length ${(v as unknown[]).length}`; break
    case 'map': s = `Map of ${(v as Map<unknown, unknown>).size} entries`; break
    case 'set': s = `Set of ${(v as Set<unknown>).size} values`; break
    case 'object': s = 'object'; break
    default: s = describeKind(v)
  }
  return s.length > 80 ? s.slice(0, 77) + '…' : s
}
