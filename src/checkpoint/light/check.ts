import { childPath } from '../format/json.js'
import { lightKind } from './kind.js'

/** Where inside a value something cannot be saved, and why. */
export interface LightProblem {
  path: string
  reason: string
}

/**
 * Walks `value` and returns the first part superjson would not restore
 * faithfully (it silently drops functions and symbol keys, turns holes and
 * invalid dates into null, and would keep class instances as plain objects),
 * or undefined when all of it round-trips. Shared references are fine;
 * circular ones are not (digests and diffs walk values as trees).
 *
 * ```ts
 * findUnserializable({ cb: () => 1 }, 'settings')  // { path: 'settings.cb', reason: 'a function …' }
 * ```
 */
export function findUnserializable(value: unknown, path: string): LightProblem | undefined {
  return walk(value, path, [], [])
}

function walk(v: unknown, path: string, ancestors: object[], ancestorPaths: string[]): LightProblem | undefined {
  const kind = lightKind(v)
  if (typeof kind === 'object') return { path, reason: kind.unsupported }
  if (kind !== 'array' && kind !== 'object' && kind !== 'map' && kind !== 'set') return undefined
  const obj = v as object
  const seen = ancestors.indexOf(obj)
  if (seen >= 0) return { path, reason: `circular reference (back to ${ancestorPaths[seen]}); a light value must be a tree` }
  ancestors.push(obj)
  ancestorPaths.push(path)
  const found = children(obj, kind, path, ancestors, ancestorPaths)
  ancestors.pop()
  ancestorPaths.pop()
  return found
}

function children(obj: object, kind: 'array' | 'object' | 'map' | 'set', path: string, anc: object[], ancPaths: string[]): LightProblem | undefined {
  if (Object.getOwnPropertySymbols(obj).length > 0) {
    return { path, reason: 'it has symbol-keyed properties, which would be lost' }
  }
  if (kind === 'map') {
    let i = 0
    for (const [k, x] of obj as Map<unknown, unknown>) {
      const p = walk(k, `${path}.keys()[${i}]`, anc, ancPaths) ?? walk(x, `${path}.get(${keyLabel(k, i)})`, anc, ancPaths)
      if (p) return p
      i++
    }
    return undefined
  }
  if (kind === 'set') {
    let i = 0
    for (const x of obj as Set<unknown>) {
      const p = walk(x, `${path}.values()[${i}]`, anc, ancPaths)
      if (p) return p
      i++
    }
    return undefined
  }
  if (kind === 'array') {
    const a = obj as unknown[]
    for (let i = 0; i < a.length; i++) {
      if (!(i in a)) return { path: `${path}[${i}]`, reason: 'a hole in a sparse array would come back as null; fill the array' }
      const p = walk(a[i], `${path}[${i}]`, anc, ancPaths)
      if (p) return p
    }
    return undefined
  }
  for (const k of Object.keys(obj)) {
    if (k === '__proto__' || k === 'constructor' || k === 'prototype') {
      return { path: childPath(path, k), reason: `superjson refuses the key "${k}" (prototype-pollution guard); rename it` }
    }
    const p = walk((obj as Record<string, unknown>)[k], childPath(path, k), anc, ancPaths)
    if (p) return p
  }
  return undefined
}

/**
 * How a Map key is shown in a path: its value for primitives, its position otherwise.
 *
 * ```ts
 * `${path}.get(${keyLabel('k', 0)})`  // settings.m.get("k")
 * ```
 */
export function keyLabel(k: unknown, index: number): string {
  if (typeof k === 'string') return JSON.stringify(k)
  if (typeof k === 'bigint') return `${k}n`
  if (typeof k === 'number' || typeof k === 'boolean' || k === null || k === undefined) return String(k)
  return `<key ${index}>`
}
