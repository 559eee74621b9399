import { join } from 'node:path'
import { CheckpointCorruptError } from '../../errors.js'
import { decodeRankFile, encodeRankFile, type DecodedRankFile } from '../format/rank-file.js'
import type { CommitMarker } from '../store/marker.js'

/** The sub-directory of a level's directory that holds this rank's parity slices (a CheckpointStore: one file per rank per checkpoint, the checkpoint's `COMMIT`). */
const XOR_DIR = 'xor'

/** Where a rank keeps its parity slices of the checkpoints of the level in `levelDir`: beside them, on the same node. */
export function xorDirOf(levelDir: string): string {
  return join(levelDir, XOR_DIR)
}

/**
 * What a parity slice file records of its set besides the parity bytes: the
 * checkpoint, the members (ranks, in the layout's order; `index`: this file's
 * member), each member's file length and header checksum (the rebuilt file
 * is checked against them), the slice's length.
 */
export interface XorSetRecord {
  seq: number
  members: number[]
  index: number
  lengths: number[]
  headerChecksums: number[]
  chunkBytes: number
}

/**
 * A parity slice as a rank file (same format and checks as a checkpoint's:
 * the header ties it to the checkpoint, a CRC covers the parity bytes and
 * one the set record), the parts to write.
 */
export function encodeParityFile(marker: CommitMarker, rank: number, set: XorSetRecord, parity: Uint8Array): Uint8Array[] {
  const meta = {
    fingerprint: marker.fingerprint,
    skeleton: marker.skeleton,
    step: marker.step,
    rank,
    size: marker.size,
    settings: marker.settings,
    ...(marker.runId !== undefined ? { runId: marker.runId } : {}),
    ...(marker.code !== undefined ? { code: marker.code } : {}),
  }
  return encodeRankFile(meta, [
    { name: 'xor-set', kind: 'light', bytes: new TextEncoder().encode(JSON.stringify(set)) },
    { name: 'parity', kind: 'heavy', dtype: 'uint8', bytes: parity },
  ])
}

/** A parity slice file's set record and parity bytes, every checksum verified; CheckpointCorruptError naming `name` otherwise. */
export function decodeParityFile(bytes: Uint8Array, name: string, seq: number, rank: number): { set: XorSetRecord; parity: Uint8Array } {
  const file: DecodedRankFile = decodeRankFile(bytes, name)
  const setEntry = file.entries.get('xor-set')
  const parity = file.entries.get('parity')
  if (setEntry === undefined || parity === undefined) throw new CheckpointCorruptError(name, 'not a parity slice (no "xor-set" or "parity" entry)')
  let set: XorSetRecord
  try {
    set = JSON.parse(new TextDecoder().decode(setEntry.bytes)) as XorSetRecord
  } catch {
    // Covered by its CRC: only a writer's bug gets here.
    throw new CheckpointCorruptError(name, 'its set record is not JSON')
  }
  if (set.seq !== seq || set.members?.[set.index] !== rank || file.header.rank !== rank) {
    throw new CheckpointCorruptError(name, `the slice belongs to checkpoint ${set.seq}, rank ${file.header.rank}, not to checkpoint ${seq}, rank ${rank}`)
  }
  if (parity.bytes.byteLength !== set.chunkBytes) throw new CheckpointCorruptError(name, `the parity is ${parity.bytes.byteLength} bytes, its record says ${set.chunkBytes}`)
  return { set, parity: parity.bytes }
}
