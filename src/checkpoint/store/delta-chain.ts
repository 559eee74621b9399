import { crc32 } from 'node:zlib'
import { CheckpointCorruptError, ConfigError } from '../../errors.js'
import type { BufferAllocator } from '../../domains/dtype.js'
import { assemblePayload, blockCount, deltaPieces, DELTA_BLOCK_BYTES, type DeltaRecord, type EntryBlocks, type PayloadLayer } from '../format/delta.js'
import { blockDigests as digestsOf, DIGEST_BYTES } from './io-worker/block-digests.mjs'
import { PAYLOAD_CODEC } from './io-worker/payload-codec.mjs'
import { encodeRankFile, metaOfHeader, type DecodedEntry, type DecodedRankFile, type EntryInput, type EntryRecord, type RankFileHeader } from '../format/rank-file.js'

/**
 * The change-detection digests of a payload, one SHA-1 (20 bytes) per block,
 * back to back. Kept in memory from the last file written, never stored.
 * Not CRC32: a CRC is linear, so a changed block whose CRC happens to equal
 * the old one would be left out of the delta and restored wrong with every
 * check passing (the payload CRC collides too); SHA-1 makes a missed change
 * negligible and costs about twice a CRC32 (hardware-accelerated in OpenSSL),
 * paid in the background flush, on its own thread.
 *
 * ```ts
 * const digests = blockDigests(bytes)   // 20 × blockCount(bytes.byteLength) bytes
 * ```
 */
export function blockDigests(bytes: Uint8Array, blockSize: number = DELTA_BLOCK_BYTES): Uint8Array {
  // The flush computes them on its thread (CheckpointIoThread.digest), with the same code.
  return digestsOf(bytes, blockSize)
}

/**
 * The blocks whose digest differs between `before` and `after` (both from
 * blockDigests); every block when their lengths differ.
 *
 * ```ts
 * changedBlocks(blockDigests(old), blockDigests(now))   // [0, 7]
 * ```
 */
export function changedBlocks(before: Uint8Array | undefined, after: Uint8Array): number[] {
  const n = after.byteLength / DIGEST_BYTES
  const out: number[] = []
  const same = before !== undefined && before.byteLength === after.byteLength
  for (let i = 0; i < n; i++) {
    if (!same) {
      out.push(i)
      continue
    }
    for (let k = i * DIGEST_BYTES; k < (i + 1) * DIGEST_BYTES; k++) {
      if (before[k] !== after[k]) {
        out.push(i)
        break
      }
    }
  }
  return out
}

/** A file's share of changed blocks above which a full checkpoint is written instead of a delta. */
export const FULL_ABOVE_CHANGED_SHARE = 0.5

/** The last disk file of this rank's chain: its number, place in the chain and block digests (never stored). */
interface ChainLink {
  seq: number
  /** Every earlier file of the chain, base first (empty for a full file). */
  needs: number[]
  digests: Map<string, Uint8Array>
}

/** How one flushed file was stored. */
export interface DeltaWritten {
  /** The chain record of a delta file; undefined for a full one. */
  delta?: DeltaRecord
  /** Heavy blocks written, and in all. */
  changedBlocks: number
  totalBlocks: number
}

/**
 * One rank's incremental disk checkpoints (`incremental: { every }`): the
 * block digests of the last file written, kept in memory, decide which
 * blocks the next flush stores. A file is full when there is no committed
 * previous file (the first of a run, after a failed commit or a restart),
 * every `every` files, or when more than half of its heavy bytes changed.
 *
 * ```ts
 * const chain = new DeltaChain(8)
 * const { parts, written } = chain.encode(seq, header, payloadOf)   // parts undefined: copy the file whole
 * chain.wrote(seq, written)          // after this rank's file is durable
 * chain.committed(seq)               // after the checkpoint is committed everywhere
 * ```
 */
export class DeltaChain {
  private last: ChainLink | undefined
  private written: ChainLink | undefined

  constructor(readonly every: number) {
    if (!Number.isSafeInteger(every) || every < 1) throw new ConfigError(`incremental checkpoints need a full one every K ≥ 1 checkpoints (got ${every})`)
  }

  /**
   * The file to write for checkpoint `seq` from a full rank file (`header`,
   * payloads by `payloadOf`): the parts of a delta file, or undefined parts
   * when the file is written full (copied as it is).
   */
  encode(
    seq: number,
    header: RankFileHeader,
    payloadOf: (e: EntryRecord) => Uint8Array,
    previousPresent: boolean,
    /** The block digests of the heavy payloads (deltaCandidates, in order), when computed elsewhere (the flush's thread). */
    given?: readonly Uint8Array[],
  ): { parts?: Uint8Array[]; written: DeltaWritten } {
    const { entries, written } = this.plan(seq, header, payloadOf, previousPresent, given)
    return { ...(entries ? { parts: encodeRankFile({ ...metaOfHeader(header), delta: written.delta }, entries) } : {}), written }
  }

  /**
   * As `encode`, but the entries of a delta file before they are encoded
   * (undefined for a full file): a delta entry's `bytes` are its held blocks,
   * one piece each, for a flush that compresses them (see compressedBlocks).
   */
  plan(
    seq: number,
    header: RankFileHeader,
    payloadOf: (e: EntryRecord) => Uint8Array,
    previousPresent: boolean,
    given?: readonly Uint8Array[],
  ): { entries?: EntryInput[]; written: DeltaWritten } {
    const digests = new Map<string, Uint8Array>()
    const changed = new Map<string, number[]>()
    let changedBytes = 0
    let heavyBytes = 0
    let changedCount = 0
    let total = 0
    const last = previousPresent ? this.last : undefined
    for (const [i, e] of deltaCandidates(header).entries()) {
      const d = given?.[i] ?? blockDigests(payloadOf(e))
      digests.set(e.name, d)
      const c = changedBlocks(last?.digests.get(e.name), d)
      changed.set(e.name, c)
      total += blockCount(e.length)
      changedCount += c.length
      heavyBytes += e.length
      changedBytes += Math.min(e.length, c.length * DELTA_BLOCK_BYTES)
    }
    const needs = last ? [...last.needs, last.seq] : []
    const full = last === undefined || needs.length >= this.every || heavyBytes === 0 || changedBytes > FULL_ABOVE_CHANGED_SHARE * heavyBytes
    this.written = { seq, needs: full ? [] : needs, digests }
    if (full) return { written: { changedBlocks: total, totalBlocks: total } }
    const delta: DeltaRecord = { base: needs[0], previous: needs[needs.length - 1], depth: needs.length, needs }
    const entries: EntryInput[] = header.entries.map((e) => {
      const base = { name: e.name, kind: e.kind, ...(e.dtype !== undefined ? { dtype: e.dtype } : {}), ...(e.box !== undefined ? { box: e.box } : {}) }
      const c = changed.get(e.name)
      const bytes = payloadOf(e)
      if (c === undefined) return { ...base, bytes, checksum: e.checksum }
      const { pieces, blocks } = deltaPieces(bytes, c)
      return { ...base, bytes: pieces, checksum: 0, delta: { blocks, length: e.length, checksum: e.checksum } }
    })
    return { entries, written: { delta, changedBlocks: changedCount, totalBlocks: total } }
  }

  /** The checkpoint the next delta would apply to, when there is one. */
  get previousSeq(): number | undefined {
    return this.last?.seq
  }

  /** Checkpoint `seq` is committed everywhere: the next delta may build on the file written for it. */
  committed(seq: number): void {
    if (this.written?.seq === seq) this.last = this.written
    this.written = undefined
  }

  /** A write or commit failed: the next file is full. */
  reset(): void {
    this.last = undefined
    this.written = undefined
  }
}

/** A held block compressed (io-worker/payload-codec.mjs) and the CRC32 of its stored bytes, or null: stored raw. */
export type CompressedBlock = { stored: Uint8Array; checksum: number } | null

/**
 * A delta entry (from DeltaChain.plan) with its held blocks compressed each
 * on its own: `compressed` holds one result per block, in order. A block
 * compression did not make smaller stays raw; an entry none of whose blocks
 * got smaller is returned as it is.
 *
 * ```ts
 * const results = await io.compress(pieces.map((bytes) => ({ bytes, width: 8 })))
 * const entry = compressedBlocks(planned, pieces, results, 8)
 * ```
 */
export function compressedBlocks(entry: EntryInput, pieces: readonly Uint8Array[], compressed: readonly CompressedBlock[], width: number): EntryInput {
  const delta = entry.delta
  if (!delta || compressed.every((c) => c === null)) return entry
  const stored = pieces.map((p, k) => compressed[k]?.stored ?? p)
  const sums = pieces.map((p, k) => compressed[k]?.checksum ?? delta.blocks.sums[k])
  const blocks: EntryBlocks = { ...delta.blocks, stored: { codec: PAYLOAD_CODEC, shuffle: width, lengths: stored.map((b) => b.byteLength), sums } }
  return { ...entry, bytes: stored, checksum: 0, delta: { ...delta, blocks } }
}

/**
 * The entries a delta may hold only some blocks of: heavy payloads stored raw.
 *
 * ```ts
 * const digests = await io.digest(deltaCandidates(header).map(payloadOf), DELTA_BLOCK_BYTES)
 * ```
 */
export function deltaCandidates(header: RankFileHeader): EntryRecord[] {
  return header.entries.filter((e) => e.kind === 'heavy' && e.stored === undefined && e.blocks === undefined)
}

/**
 * A delta file read with its chain: each earlier file of `file.header.delta.needs`
 * loaded by `load` (every block and payload checksum checked there), the
 * payloads assembled, and each checked against the newest file's CRC32 of
 * the whole payload. A damaged or missing file of the chain throws
 * CheckpointCorruptError naming it, and the delta that needs it. A full file
 * is returned as it is.
 *
 * ```ts
 * const whole = await assembleChain(decodeRankFile(bytes, path), path, (seq) => store.loadRankFile(seq, rank))
 * ```
 */
export async function assembleChain(file: DecodedRankFile, name: string, load: (seq: number) => Promise<DecodedRankFile>, allocate?: BufferAllocator): Promise<DecodedRankFile> {
  const delta = file.header.delta
  if (!delta) return file
  const chain: DecodedRankFile[] = []
  for (const seq of delta.needs) {
    let earlier: DecodedRankFile
    try {
      earlier = await load(seq)
    } catch (e) {
      const why = e instanceof CheckpointCorruptError ? `${e.file}: ${e.reason}` : (e as Error).message
      throw new CheckpointCorruptError(name, `the ${seq === delta.base ? 'base' : 'delta'} checkpoint ${seq} it needs is not usable (${why})`)
    }
    const h = earlier.header
    if (h.rank !== file.header.rank || h.size !== file.header.size || h.fingerprint !== file.header.fingerprint) {
      throw new CheckpointCorruptError(name, `checkpoint ${seq} of its chain holds another rank's or program's data`)
    }
    if (seq === delta.base ? h.delta !== undefined : h.delta?.base !== delta.base) {
      throw new CheckpointCorruptError(name, `checkpoint ${seq} is not the ${seq === delta.base ? 'full base' : 'delta'} its chain record names`)
    }
    chain.push(earlier)
  }
  chain.push(file)
  const entries = new Map<string, DecodedEntry>()
  for (const [entryName, e] of file.entries) {
    if (!e.blocks) {
      entries.set(entryName, e)
      continue
    }
    const layers: PayloadLayer[] = []
    for (const f of chain) {
      const layer = f.entries.get(entryName)
      if (layer) layers.push(layer.blocks ? { bytes: layer.bytes, blocks: layer.blocks } : { bytes: layer.bytes })
    }
    const bytes = assemblePayload(layers, e.length, allocate)
    if (!bytes) throw new CheckpointCorruptError(name, `no file of its chain (${delta.needs.join(', ')}) holds entry "${entryName}" whole with ${e.length} bytes`)
    const sum = crc32(bytes) >>> 0
    if (sum !== e.checksum) {
      throw new CheckpointCorruptError(name, `checksum mismatch in entry "${entryName}" assembled from its chain (${[...delta.needs, 'this file'].join(' + ')}): stored 0x${e.checksum.toString(16).padStart(8, '0')}, computed 0x${sum.toString(16).padStart(8, '0')}`)
    }
    const { blocks: _held, ...record } = e
    entries.set(entryName, { ...record, bytes })
  }
  const header: RankFileHeader = { ...file.header, entries: file.header.entries.map(({ blocks: _held, ...r }) => r) }
  return { header, headerChecksum: file.headerChecksum, entries }
}

/**
 * Heavy blocks a delta file holds, and in all (for `inspect`), from its header alone.
 *
 * ```ts
 * deltaShare(header)   // { changed: 12, total: 256 }
 * ```
 */
export function deltaShare(header: RankFileHeader): { changed: number; total: number } {
  let changed = 0
  let total = 0
  for (const e of header.entries) {
    if (e.kind !== 'heavy') continue
    const size = e.blocks?.size ?? DELTA_BLOCK_BYTES
    const n = blockCount(e.length, size)
    total += n
    changed += e.blocks ? e.blocks.held.length : n
  }
  return { changed, total }
}
