import type { SuperJSONResult } from 'superjson'

/**
 * Works around a superjson 2.2 defect: superjson records "referential
 * equalities" for every non-primitive by its own definition, which includes
 * NaN, so all NaNs in a value form one identity group. When restoring a group
 * member that is a Map key, it sets the new key and then deletes the old one
 * because `NaN !== NaN` — deleting the entry it just restored:
 * `[new Map([[NaN, 1]]), NaN]` comes back as `[Map(0) {}, NaN]`.
 * NaN has no identity to preserve and each occurrence is annotated on its own,
 * so dropping the groups whose representative is NaN restores values exactly.
 * Mutates and returns `result`.
 *
 * ```ts
 * const out = dropNaNIdentities(sj.serialize(value))
 * ```
 */
export function dropNaNIdentities(result: SuperJSONResult): SuperJSONResult {
  const meta = result.meta as { referentialEqualities?: unknown } | undefined
  const re = meta?.referentialEqualities
  if (re === undefined) return result
  // Either { path: paths } or [rootPaths] / [rootPaths, { path: paths }]; the root is never NaN
  // (a NaN root has no other NaN to be equal to).
  const groups = (Array.isArray(re) ? re[1] : re) as Record<string, string[]> | undefined
  if (groups === undefined) return result
  for (const key of Object.keys(groups)) {
    // Only NaN serialises to the JSON string "NaN" among values superjson tracks (bigint, Date, RegExp, URL give other strings).
    if (resolve(result.json, parsePath(key)) === 'NaN') delete groups[key]
  }
  if (Object.keys(groups).length === 0) {
    if (Array.isArray(re)) re.length = 1
    else delete meta!.referentialEqualities
  }
  return result
}

/** Splits a superjson path: segments joined by '.', with '\.' and '\\' escaping a dot and a backslash. */
function parsePath(path: string): string[] {
  const out: string[] = []
  let seg = ''
  for (let i = 0; i < path.length; i++) {
    const c = path[i]
    if (c === '\\' && (path[i + 1] === '.' || path[i + 1] === '\\')) {
      seg += path[++i]
    } else if (c === '.') {
      out.push(seg)
      seg = ''
    } else {
      seg += c
    }
  }
  out.push(seg)
  return out
}

/** The JSON value at `segments` (Maps are arrays of [key, value] pairs in superjson's JSON). */
function resolve(json: unknown, segments: readonly string[]): unknown {
  let v = json
  for (const s of segments) {
    if (typeof v !== 'object' || v === null) return undefined
    v = (v as Record<string, unknown>)[s]
  }
  return v
}
