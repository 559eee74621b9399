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
