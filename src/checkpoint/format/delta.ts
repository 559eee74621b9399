import { crc32 } from 'node:zlib'
import { CheckpointCorruptError } from '../../errors.js'
import { decompressPayload, PAYLOAD_CODEC } from '../store/io-worker/payload-codec.mjs'
import { isPlainObject } from './json.js'

/*
 * Incremental (delta) rank files. A heavy payload is cut into blocks of
 * DELTA_BLOCK_BYTES (the last one shorter); a delta file stores, per heavy
 * entry, only the blocks that changed since the previous file of its chain,
 * back to back, each with its own CRC32. Assembling a chain — the full base,
 * then each delta in order, its blocks copied over — gives the payload of
 * the newest file, whose own CRC32 (the entry's `checksum`, taken when the
 * bytes were copied out of the program) is checked last.
 *
 * With compression (`blocks.stored`), each held block is compressed on its
 * own (shuffled, then brotli: store/io-worker/payload-codec.mjs) and gets a
 * second CRC32, of its stored bytes: damage is found and named per block
 * before the decompressor sees it, and the raw CRC32 of each block is still
 * checked after. A block compression would not make smaller is stored raw
 * (its stored length equals its raw length).
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
  /** Present when the held blocks are stored compressed, each on its own. */
  stored?: BlockEncoding
}

/** How the held blocks of a delta entry are stored when compressed (entry field `blocks.stored`). */
export interface BlockEncoding {
  codec: typeof PAYLOAD_CODEC
  /** Element width the bytes were shuffled by before compression (1: not shuffled). */
  shuffle: number
  /** Stored bytes of each held block, in order: its raw length when stored raw, less when compressed. */
  lengths: number[]
  /** CRC32 of each held block's stored bytes, in order. */
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
 * How many bytes the held blocks of a payload of `length` take in the file
 * (compressed, when `blocks.stored` says so).
 *
 * ```ts
 * heldBytes(65536 + 10, { size: 65536, held: [1], sums: [0] })   // 10
 * ```
 */
export function heldBytes(length: number, blocks: EntryBlocks): number {
  if (blocks.stored) return blocks.stored.lengths.reduce((n, l) => n + l, 0)
  return rawHeldBytes(length, blocks)
}

/** How many bytes the held blocks of a payload of `length` take raw. */
export function rawHeldBytes(length: number, blocks: EntryBlocks): number {
  let n = 0
  for (const i of blocks.held) n += blockLength(length, blocks.size, i)
  return n
}

/** The length of block `i` of a payload of `length` bytes. */
function blockLength(length: number, size: number, i: number): number {
  return Math.min(length, (i + 1) * size) - i * size
}

/**
 * Checks each held block of a delta entry (`stored`: the blocks back to back,
 * as in the file) against its CRC32, and returns the raw held blocks back to
 * back: `stored` itself, or, for compressed blocks, a fresh buffer of them
 * decompressed. A mismatch, or a block that does not decompress to its
 * length, names the entry, the block and the file.
 *
 * ```ts
 * const held = checkHeldBlocks('write', 800_000, blocks, storedBytes, path)
 * ```
 */
export function checkHeldBlocks(entry: string, length: number, blocks: EntryBlocks, stored: Uint8Array, file: string): Uint8Array {
  const enc = blocks.stored
  const out = enc ? new Uint8Array(rawHeldBytes(length, blocks)) : stored
  let at = 0
  let rawAt = 0
  for (let k = 0; k < blocks.held.length; k++) {
    const i = blocks.held[k]
    const n = blockLength(length, blocks.size, i)
    const m = enc ? enc.lengths[k] : n
    let raw = stored.subarray(at, at + m)
    if (enc) {
      const sum = crc32(raw) >>> 0
      if (sum !== enc.sums[k]) throw new CheckpointCorruptError(file, `checksum mismatch in compressed block ${i} of delta entry "${entry}" (stored ${hex(enc.sums[k])}, computed ${hex(sum)})`)
      if (m < n) {
        try {
          raw = decompressPayload(raw, enc.shuffle, n)
        } catch (e) {
          throw new CheckpointCorruptError(file, `compressed block ${i} of delta entry "${entry}" cannot be decompressed (${(e as Error).message})`)
        }
        if (raw.byteLength !== n) throw new CheckpointCorruptError(file, `compressed block ${i} of delta entry "${entry}" decompressed to ${raw.byteLength} bytes, not ${n}`)
      }
      out.set(raw, rawAt)
    }
    const sum = crc32(raw) >>> 0
    if (sum !== blocks.sums[k]) {
      throw new CheckpointCorruptError(file, `checksum mismatch in block ${i} of delta entry "${entry}"${enc ? ' after decompression' : ''} (stored ${hex(blocks.sums[k])}, computed ${hex(sum)})`)
    }
    at += m
    rawAt += n
  }
  return out
}

function hex(n: number): string {
  return '0x' + n.toString(16).padStart(8, '0')
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
  if (!(b.sums as unknown[]).every(isCrc)) return false
  return b.stored === undefined || isBlockEncoding(b.stored, held as number[], length, b.size as number)
}

function isCrc(s: unknown): boolean {
  return Number.isInteger(s) && (s as number) >= 0 && (s as number) <= 0xffffffff
}

/** A valid `blocks.stored` for these held blocks: one length (≥ 0, at most the block's raw length) and one CRC per block. */
function isBlockEncoding(e: unknown, held: readonly number[], length: number, size: number): boolean {
  if (!isPlainObject(e) || e.codec !== PAYLOAD_CODEC || !Number.isSafeInteger(e.shuffle) || (e.shuffle as number) < 1 || (e.shuffle as number) > 8) return false
  if (!Array.isArray(e.lengths) || !Array.isArray(e.sums) || e.lengths.length !== held.length || e.sums.length !== held.length) return false
  const lengths = e.lengths as unknown[]
  return lengths.every((l, k) => Number.isSafeInteger(l) && (l as number) >= 0 && (l as number) <= blockLength(length, size, held[k])) && (e.sums as unknown[]).every(isCrc)
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
