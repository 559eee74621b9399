import { crc32 } from 'node:zlib'
import type { DomainDesc } from '../../domains/desc.js'
import { forEachRun, type Domain } from '../../domains/domain.js'
import { ReplayDivergenceError } from '../../errors.js'
import type { DecodedRankFile } from '../format/rank-file.js'
import { decodeLight, diffLight, digestOf } from '../light/codec.js'
import type { SkeletonState } from '../skeleton-hooks.js'

/**
 * The digests a checkpoint stores so that recovery can check replay: the
 * iterator's and every watched value's (`watch:<name>`).
 *
 * ```ts
 * const digests = replayDigests(state)   // { iterator: '…', 'watch:lattice': '…' }
 * ```
 */
export function replayDigests(state: SkeletonState): Record<string, string> {
  const d: Record<string, string> = { iterator: digestOf(state.it, undefined, 'iterator') }
  for (const w of state.registry.watched.values()) d[`watch:${w.name}`] = digestOf(w.get(), w.serializer, w.name)
  return d
}

/**
 * Replay must have rebuilt the iterator and every watched value exactly:
 * throws ReplayDivergenceError naming what differs.
 *
 * ```ts
 * checkReplay(state, file)   // at the recovery step, before restoring
 * ```
 */
export function checkReplay(state: SkeletonState, file: DecodedRankFile): void {
  const stored = file.header.digests
  if (stored.iterator !== undefined && stored.iterator !== digestOf(state.it, undefined, 'iterator')) {
    const saved = file.entries.get('iterator')
    const detail = saved ? (diffLight(decodeLight(saved.bytes), state.it) ?? 'digest differs') : 'digest differs'
    throw new ReplayDivergenceError('the iterator', detail)
  }
  for (const w of state.registry.watched.values()) {
    const want = stored[`watch:${w.name}`]
    if (want !== undefined && want !== digestOf(w.get(), w.serializer, w.name)) {
      throw new ReplayDivergenceError(`watched value "${w.name}"`, 'its digest differs after replay')
    }
  }
}

/**
 * The digest key of the domain the next step reads, stored only when the
 * checkpoint leaves that domain out (`unregister('read')`): the CRC32 of its
 * cells that step possesses, as the failure-free run had them.
 */
export const READ_DIGEST = 'crc32:read'

/** The cells of the domain the next step reads that its digest covers: those the rank possesses at that step. */
function readDigestBox(state: SkeletonState, rank: number): DomainDesc {
  return (state.next ?? state.partition).possessed[rank]
}

/** CRC32 (8 hex digits) of `d`'s cells in `box`, run by run in the domain's storage order. */
function cellsDigest(d: Domain, box: DomainDesc): string {
  let sum = 0
  const data = d.data
  const bpe = data.BYTES_PER_ELEMENT
  forEachRun(d.strides, d.offset, box, d.order, (start, length) => {
    if (length > 0) sum = crc32(new Uint8Array(data.buffer, data.byteOffset + start * bpe, length * bpe), sum)
  })
  return (sum >>> 0).toString(16).padStart(8, '0')
}

/**
 * At a checkpoint that leaves out the domain the next step reads: the
 * digest of what that step will read of it on this rank (`state.write`, the
 * domains swap after the point), for `checkRefilledRead` after a recovery.
 * Undefined after the last step in circulation: that receive buffer was
 * never filled, nothing reads it.
 *
 * ```ts
 * const digest = saved.read ? undefined : readDigest(state, rank)
 * ```
 */
export function readDigest(state: SkeletonState, rank: number): string | undefined {
  if (state.mode === 'circulation' && state.next === undefined) return undefined
  return cellsDigest(state.write, readDigestBox(state, rank))
}

/**
 * After a recovery that refilled the domain the next step reads (the
 * kernel's `rebuild`, or `initialize`'s values kept): it must hold what the
 * failure-free run had there, else the run would go on silently wrong.
 * Throws ReplayDivergenceError naming the step and the rank.
 *
 * ```ts
 * if (restored.readDigest !== undefined) checkRefilledRead(state, rank, restored.readDigest)
 * ```
 */
export function checkRefilledRead(state: SkeletonState, rank: number, expected: string): void {
  const now = readDigest(state, rank)
  if (now === undefined || now === expected) return
  throw new ReplayDivergenceError(
    `the domain step ${state.step + 1} reads (left out of checkpoints by unregister('read'))`,
    `on rank ${rank}, the CRC32 of its possessed cells ${readDigestBox(state, rank)} is ${now} after rebuild, ${expected} in the failure-free run`,
    "The kernel's rebuild(read, write, ctx) must refill read's possessed cells with the values the step reads when ctx.restored.read is false; or keep 'read' in checkpoints.",
  )
}
