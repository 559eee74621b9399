// @ts-check
// The copies of the checkpoint I/O thread (thread.mjs), also used by
// staging.ts and its tests: plain JavaScript, so the thread loads them
// without TypeScript and runs the tested code.

/**
 * A staged payload whose runs were copied as one hull, gaps included, and
 * still have to be moved together: run `i` starts at byte `runs[2i]` of
 * `bytes` and is `runs[2i+1]` bytes long; compacted, the runs fill the start
 * of `bytes` in order (see compactRuns). The checkpoint I/O thread does it,
 * off the checkpoint point.
 *
 * @typedef {{ readonly bytes: Uint8Array, readonly runs: Float64Array }} UncompactedPayload
 */

/**
 * A payload still to be copied out of a domain's shared memory: run `i`
 * starts at byte `runs[2i]` of `from` and is `runs[2i+1]` bytes long; the
 * runs go one after another into `to`. The checkpoint I/O thread does it
 * during the next superstep, which only reads that domain (the skeleton waits
 * for it before writing the domain again: see `Domain.lend`).
 *
 * @typedef {{ readonly from: Uint8Array, readonly to: Uint8Array, readonly runs: Float64Array }} DeferredCopy
 */

/**
 * Moves the runs of `p` together at the start of its buffer, in order (each
 * run moves towards the start, so an in-place forward pass is safe).
 *
 * ```js
 * for (const p of staging.takeUncompacted()) compactRuns(p)
 * ```
 *
 * @param {UncompactedPayload} p
 * @returns {void}
 */
export function compactRuns(p) {
  let pos = 0
  for (let i = 0; i < p.runs.length; i += 2) {
    p.bytes.copyWithin(pos, p.runs[i], p.runs[i] + p.runs[i + 1])
    pos += p.runs[i + 1]
  }
}

/**
 * Copies the runs of `c` into its staging buffer, one after another. The CRC is taken
 * afterwards, from the staging copy: taken behind each piece of the copy (one
 * pass instead of two) it kept the domain lent four times longer (1.1 ms of
 * copy, 3.6 ms of CRC per 16 MiB), and with two ranks and their I/O threads
 * on two cores the rank then often waited for it.
 *
 * ```js
 * for (const c of staging.takeDeferred()) copyRuns(c)
 * ```
 *
 * @param {DeferredCopy} c
 * @returns {void}
 */
export function copyRuns(c) {
  let pos = 0
  for (let i = 0; i < c.runs.length; i += 2) {
    c.to.set(c.from.subarray(c.runs[i], c.runs[i] + c.runs[i + 1]), pos)
    pos += c.runs[i + 1]
  }
}
