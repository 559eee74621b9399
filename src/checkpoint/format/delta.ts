import { crc32 } from 'node:zlib'
import { CheckpointCorruptError } from '../../errors.js'
import { isPlainObject } from './json.js'

/*
 * Incremental (delta) rank files. A heavy payload is cut into blocks of
 * DELTA_BLOCK_BYTES (the last one shorter); a delta file stores, per heavy
 * entry, only the blocks that changed since the previous file of its chain,
 * back to back, each with its own CRC32. Assembling a chain — the full base,
 * then each delta in order, its blocks copied over — gives the payload of
 * the newest file, whose own CRC32 (the entry's `checksum`, taken when the
 * bytes were copied out of the program) is checked last.
 */

/** Bytes per block of an incremental payload (the last block of a payload may be shorter). */
export const DELTA_BLOCK_BYTES = 64 * 1024

/** The chain a delta file belongs to (header field `delta`). */
export interface DeltaRecord {
  /** Sequence number of the full checkpoint the chain starts from. */
  base: number
  /** Sequence number of the file this one applies to (the base, or the delta before). */
  previous: number
  /** Position in the chain: 1 for the first delta after the base. */
  depth: number
  /** Every earlier file of the chain, base first, ending with `previous`: what a reader (and pruning) needs. */
  needs: number[]
}

/** Which blocks a delta entry holds (entry field `blocks`). */
export interface EntryBlocks {
  /** Block size in bytes. */
  size: number
  /** Indices of the blocks held, ascending. */
  held: number[]
  /** CRC32 of each held block, in the same order. */
  sums: number[]
}

/**
 * How many blocks of `blockSize` a payload of `length` bytes has.
 *
 * ```ts
 * blockCount(65536 * 2 + 1, 65536)   // 3
 * ```
 */
export function blockCount(length: number, blockSize: number = DELTA_BLOCK_BYTES): number {
  return Math.ceil(length / blockSize)
}

/**
 * The held blocks of `payload`, as pieces to write back to back (views, not
 * copies), and their record.
 *
 * ```ts
 * const { pieces, blocks } = deltaPieces(bytes, [0, 7])
 * ```
 */
export function deltaPieces(payload: Uint8Array, held: readonly number[], blockSize: number = DELTA_BLOCK_BYTES): { pieces: Uint8Array[]; blocks: EntryBlocks } {
  const pieces = held.map((i) => payload.subarray(i * blockSize, Math.min(payload.byteLength, (i + 1) * blockSize)))
  return { pieces, blocks: { size: blockSize, held: [...held], sums: pieces.map((p) => crc32(p) >>> 0) } }
}

/**
 * How many bytes the held blocks of a payload of `length` take.
 *
 * ```ts
 * heldBytes(65536 + 10, { size: 65536, held: [1], sums: [0] })   // 10
 * ```
 */
export function heldBytes(length: number, blocks: EntryBlocks): number {
  let n = 0
  for (const i of blocks.held) n += Math.min(length, (i + 1) * blocks.size) - i * blocks.size
  return n
}

/**
 * Checks each held block of a delta entry (`stored`: the blocks back to back)
 * against its CRC32; a mismatch names the entry, the block and the file.
 *
 * ```ts
 * checkHeldBlocks('write', 800_000, blocks, storedBytes, path)
 * ```
 */
export function checkHeldBlocks(entry: string, length: number, blocks: EntryBlocks, stored: Uint8Array, file: string): void {
  let at = 0
  for (let k = 0; k < blocks.held.length; k++) {
    const i = blocks.held[k]
    const n = Math.min(length, (i + 1) * blocks.size) - i * blocks.size
    const sum = crc32(stored.subarray(at, at + n)) >>> 0
    if (sum !== blocks.sums[k]) {
      throw new CheckpointCorruptError(file, `checksum mismatch in block ${i} of delta entry "${entry}" (stored 0x${blocks.sums[k].toString(16).padStart(8, '0')}, computed 0x${sum.toString(16).padStart(8, '0')})`)
    }
    at += n
  }
}

/**
 * Copies the held blocks of a delta entry (`stored`, checked before) over
 * `target`, the payload assembled so far.
 *
 * ```ts
 * const payload = base.slice()
 * applyBlocks(payload, blocks, storedBytes)
 * ```
 */
export function applyBlocks(target: Uint8Array, blocks: EntryBlocks, stored: Uint8Array): void {
  let at = 0
  for (const i of blocks.held) {
    const from = i * blocks.size
    const n = Math.min(target.byteLength, from + blocks.size) - from
    target.set(stored.subarray(at, at + n), from)
    at += n
  }
}

/** Whether `d` is a valid DeltaRecord (header validation). */
export function isDeltaRecord(d: unknown): d is DeltaRecord {
  if (!isPlainObject(d)) return false
  const ints = [d.base, d.previous, d.depth].every((x) => Number.isSafeInteger(x) && (x as number) >= 0)
  if (!ints || (d.depth as number) < 1 || !Array.isArray(d.needs)) return false
  const needs = d.needs as unknown[]
  if (needs.length !== d.depth || needs[0] !== d.base || needs[needs.length - 1] !== d.previous) return false
  return needs.every((s, i) => Number.isSafeInteger(s) && (i === 0 || (s as number) > (needs[i - 1] as number)))
}

/** Whether `b` is a valid EntryBlocks for a payload of `length` bytes (header validation). */
export function isEntryBlocks(b: unknown, length: number): b is EntryBlocks {
  if (!isPlainObject(b) || !Number.isSafeInteger(b.size) || (b.size as number) < 1) return false
  if (!Array.isArray(b.held) || !Array.isArray(b.sums) || b.held.length !== b.sums.length) return false
  const n = blockCount(length, b.size as number)
  const held = b.held as unknown[]
  if (!held.every((x, i) => Number.isSafeInteger(x) && (x as number) >= 0 && (x as number) < n && (i === 0 || (x as number) > (held[i - 1] as number)))) return false
  return (b.sums as unknown[]).every((s) => Number.isInteger(s) && (s as number) >= 0 && (s as number) <= 0xffffffff)
}

/** One file's view of a payload in a chain: the whole payload (no `blocks`), or only its held blocks. */
export interface PayloadLayer {
  bytes: Uint8Array
  blocks?: EntryBlocks
}

/**
 * The payload of the newest layer of a chain (`layers`, oldest first): the
 * newest whole one, with the held blocks of each later layer copied over in
 * order. `length` is the newest payload's; a fresh buffer from `allocate`.
 * Undefined when no layer holds the payload whole.
 *
 * ```ts
 * assemblePayload([{ bytes: base }, { bytes: held1, blocks: b1 }, { bytes: held2, blocks: b2 }], base.byteLength)
 * ```
 */
export function assemblePayload(layers: readonly PayloadLayer[], length: number, allocate: (n: number) => ArrayBufferLike = (n) => new ArrayBuffer(n)): Uint8Array | undefined {
  let from = layers.length - 1
  while (from >= 0 && layers[from].blocks !== undefined) from--
  if (from < 0 || layers[from].bytes.byteLength !== length) return undefined
  const out = new Uint8Array(allocate(length), 0, length)
  out.set(layers[from].bytes)
  for (let i = from + 1; i < layers.length; i++) applyBlocks(out, layers[i].blocks!, layers[i].bytes)
  return out
}
