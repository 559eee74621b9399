import { DomainDesc } from '../../domains/desc.js'
import { forEachRun, type Domain } from '../../domains/domain.js'
import { CheckpointMismatchError, InternalError, ReplayDivergenceError } from '../../errors.js'
import { entryArray } from '../format/payload.js'
import type { DecodedEntry, DecodedRankFile } from '../format/rank-file.js'
import { decodeLight } from '../light/codec.js'
import type { RestoreOutcome, SkeletonState } from '../skeleton-hooks.js'
import { checkReplay, READ_DIGEST } from './replay-check.js'

/**
 * Put a rank's saved state back into the skeleton that replay brought to the
 * checkpoint's step: check the replay first (iterator and watched digests),
 * then copy the domains' saved cells, the registered arrays (in place) and the
 * light values. Halos are not saved: `reroute` says they must be routed again.
 *
 * ```ts
 * const { reroute } = restoreFromFile(state, await store.loadRankFile(seq, rank), seq)
 * ```
 */
export function restoreFromFile(state: SkeletonState, file: DecodedRankFile, seq: number): RestoreOutcome {
  const h = file.header
  if (h.skeleton !== state.index || h.step !== state.step) {
    throw new ReplayDivergenceError('the replay position', `checkpoint ${seq} holds skeleton ${h.skeleton} step ${h.step}, but replay reached skeleton ${state.index} step ${state.step}`)
  }
  // Defensive: a delta file is restorable only assembled with its chain (CheckpointStore.loadRankFile).
  for (const e of file.entries.values()) if (e.blocks) throw new InternalError(`checkpoint ${seq}: entry "${e.name}" is a delta's blocks, not assembled with its chain`)
  checkReplay(state, file)

  // A domain left out of the checkpoint is the kernel's to rebuild (`rebuild`). The
  // next step reads `read`: a program that registers it needs it in the file.
  const read = state.registry.includes('read') ? requireEntry(file, 'read', seq) : file.entries.get('read')
  if (read) restoreDomain(state.write, read)
  const write = file.entries.get('write')
  if (write) restoreDomain(state.read, write)

  for (const reg of state.registry.heavy.values()) {
    const e = requireEntry(file, reg.name, seq)
    const saved = entryArray(e)
    if (saved.constructor !== reg.array.constructor || saved.length !== reg.array.length) {
      throw new CheckpointMismatchError(
        `checkpoint entry "${reg.name}" holds ${saved.length} ${e.dtype} values; the registered array has ${reg.array.length} of another shape or type`,
      )
    }
    reg.array.set(saved as never)
  }
  for (const reg of state.registry.light.values()) {
    reg.cell.value = decodeLight(requireEntry(file, reg.name, seq).bytes, reg.serializer)
  }
  const readDigest = read === undefined ? file.header.digests[READ_DIGEST] : undefined
  return { reroute: state.mode === 'border', read: read !== undefined, write: write !== undefined, ...(readDigest !== undefined ? { readDigest } : {}) }
}

/** Copy a domain entry's cells back into `d`, run by run in `d`'s storage order. */
function restoreDomain(d: Domain, e: DecodedEntry): void {
  if (!e.box) throw new CheckpointMismatchError(`checkpoint entry "${e.name}" has no box`)
  const box = DomainDesc.of(e.box.lower, e.box.upper)
  if (!d.box.contains(box)) throw new CheckpointMismatchError(`checkpoint entry "${e.name}" covers ${box}, outside this rank's domain ${d.box}`)
  const saved = entryArray(e, d.dtype)
  const values = box.volume * d.components
  if (saved.length !== values) throw new CheckpointMismatchError(`checkpoint entry "${e.name}" has ${saved.length} values for ${box.volume} cells × ${d.components} components`)
  let pos = 0
  forEachRun(d.strides, d.offset, box, d.order, (s, len) => {
    d.data.set(saved.subarray(pos, pos + len) as never, s)
    pos += len
  })
}

function requireEntry(file: DecodedRankFile, name: string, seq: number): DecodedEntry {
  const e = file.entries.get(name)
  if (!e) throw new CheckpointMismatchError(`checkpoint ${seq} has no entry "${name}", which this program registers; it was written by another version of the program`)
  return e
}
