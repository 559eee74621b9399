import { isPlainObject } from './json.js'

/**
 * The code a checkpoint was written by, as rank file headers and commit
 * markers store it: the program module and the local modules it loaded, each
 * by a digest of its bytes (see identity/code.ts, which computes it).
 *
 * ```ts
 * // { hash: '3f0c…', files: { 'jacobi.ts': '9a1e…', 'plate.ts': '…', 'relaxation.ts': '…' } }
 * ```
 */
export interface CodeIdentity {
  /** Digest over every (file, digest) pair: equal hashes, same code. */
  hash: string
  /** File (relative to the program file's directory, `/`-separated) → digest of its bytes. */
  files: Record<string, string>
}

/**
 * True for a well-formed code identity read back from a header or marker.
 *
 * ```ts
 * if (h.code !== undefined && !isCodeIdentity(h.code)) bad('code is not a code identity')
 * ```
 */
export function isCodeIdentity(v: unknown): v is CodeIdentity {
  return isPlainObject(v) && typeof v.hash === 'string' && isPlainObject(v.files) && Object.values(v.files).every((d) => typeof d === 'string')
}
