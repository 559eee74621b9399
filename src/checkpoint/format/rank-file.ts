import { open } from 'node:fs/promises'
import { crc32 } from 'node:zlib'
import { CheckpointCorruptError, ConfigError, InternalError } from '../../errors.js'
import { DTYPES, isDType, type DType } from '../../domains/dtype.js'
import { isCodeIdentity, type CodeIdentity } from './code-record.js'
import { decompressPayload, PAYLOAD_CODEC, type StoredEncoding } from '../store/io-worker/payload-codec.mjs'
import { checkJsonObject, isPlainObject, type JsonObject } from './json.js'
import { checkHeldBlocks, heldBytes, isDeltaRecord, isEntryBlocks, type DeltaRecord, type EntryBlocks } from './delta.js'

/*
 * Layout of a rank file (all integers little-endian):
 *
 *   0   8 bytes  magic "MOLOTOF\0"
 *   8   u32      format version
 *   12  u32      header length in bytes (UTF-8 JSON)
 *   16  u32      CRC32 of the header bytes
 *   20  …        header (JSON, see RankFileHeader)
 *       …        zero padding up to the next multiple of 8: the data section starts here
 *       …        payloads, each starting on a multiple of 8, zero padding between them
 *
 * Entry offsets are relative to the start of the data section, so the header
 * never depends on its own length. Every byte of the file is covered: the
 * preamble by its exact values, the header by its CRC, each payload by its CRC
 * and the padding by the rule that it is zero — a flipped byte anywhere is
 * detected. Payloads are raw typed-array bytes in the host byte order
 * (little-endian on every platform Node supports), or, when their record has
 * `stored`, those bytes compressed (store/io-worker/payload-codec.mjs): the
 * record's `length` and `checksum` are still the raw bytes' and `stored`
 * gives the stored length and the CRC32 of the stored bytes. Both are
 * checked: the stored CRC finds damage in the file before the decompressor
 * sees it, the raw CRC — taken when the bytes were copied out of the
 * program, and carried unchanged through the compression — proves the
 * decompressed bytes are the ones checkpointed, and lets an elastic restore
 * check the slices it reads against the same sums whatever the encoding.
 */

/** The version of a file with no compressed payload; the reader reads both. */
export const FORMAT_VERSION = 1
/** The version of a file with compressed payloads (`stored` records): an older reader refuses it by its version. */
export const ENCODED_FORMAT_VERSION = 2
/** The version of a delta file (header `delta`, entries with `blocks`: see format/delta.ts), readable only with its chain. */
export const DELTA_FORMAT_VERSION = 3
const VERSIONS: readonly number[] = [FORMAT_VERSION, ENCODED_FORMAT_VERSION, DELTA_FORMAT_VERSION]
/** `MOLOTOF\0`: first 8 bytes of every rank file. */
export const MAGIC: Readonly<Uint8Array> = new Uint8Array([0x4d, 0x4f, 0x4c, 0x4f, 0x54, 0x4f, 0x46, 0x00])
/** Bytes before the JSON header: magic, version, header length, header checksum. */
export const PREAMBLE_BYTES = 20
const ALIGN = 8
// A header lists entries and small settings; anything bigger is a corrupt length field.
const MAX_HEADER_BYTES = 64 * 1024 * 1024

/**
 * The widest checksum (ten digits in the header): a header made with it for
 * every checksum not yet known reserves room enough for the real one, which
 * `encodeRankFile`'s `headerBytes` then pads to the same length.
 */
export const PLACEHOLDER_CHECKSUM = 0xffffffff

/** An axis-aligned box in global coordinates (`lower` inclusive, `upper` exclusive). */
export interface BoxRecord {
  lower: number[]
  upper: number[]
}

/** One entry of the header's table: where a payload is and how to check it. */
export interface EntryRecord {
  name: string
  /** `heavy`: raw typed-array bytes; `light`: a superjson encoding (see light/codec.ts). */
  kind: 'heavy' | 'light'
  /** Element type of a heavy payload (raw bytes, read as uint8, when absent). */
  dtype?: DType
  /** The global box a heavy payload covers, for elastic restarts and `inspect`. */
  box?: BoxRecord
  /** Byte offset from the start of the data section (always a multiple of 8). */
  offset: number
  /** Payload length in bytes (decompressed, when `stored` says it is compressed). */
  length: number
  /** CRC32 of the payload bytes (unsigned; of the decompressed bytes, when compressed). */
  checksum: number
  /** Absent: stored raw. Present: stored compressed, `stored.length` bytes from `offset`. */
  stored?: StoredEncoding
  /** Present in a delta file: the payload's blocks held, stored back to back from `offset` (`length`, `checksum`: the whole assembled payload's). */
  blocks?: EntryBlocks
}

/** What the caller says about a rank file; the format adds version, layout and checksums. */
export interface RankFileMeta {
  /** Identifies the program (and its version) that wrote the checkpoint. */
  fingerprint: string
  /** Index of the skeleton the checkpoint was taken in. */
  skeleton: number
  /** Superstep after which the checkpoint was taken. */
  step: number
  rank: number
  size: number
  /** The run's settings, plain JSON, compared on restart. */
  settings: Readonly<Record<string, unknown>>
  /** Digests of what replay must rebuild identically (name → hex): sha256 of light values, CRC32 of a domain left out (`crc32:read`). */
  digests?: Readonly<Record<string, string>>
  /** ISO time; now when omitted. */
  createdAt?: string
  /** The run lineage that wrote the checkpoint (see identity/run.ts); absent when written outside a supervised or identified run. */
  runId?: string
  /** The program's code (see identity/code.ts), when known. */
  code?: CodeIdentity
  /** A delta file: the chain it applies to (see format/delta.ts). */
  delta?: DeltaRecord
}

/** The decoded JSON header of a rank file. */
export interface RankFileHeader {
  formatVersion: number
  fingerprint: string
  skeleton: number
  step: number
  rank: number
  size: number
  settings: JsonObject
  digests: Record<string, string>
  createdAt: string
  /** The run lineage that wrote the checkpoint, when known. */
  runId?: string
  /** The program's code, when the writer knew it. */
  code?: CodeIdentity
  /** A delta file (version 3): the chain it needs; its entries with `blocks` hold only the changed blocks. */
  delta?: DeltaRecord
  /** Length of the data section in bytes (the file is exactly data start + this). */
  dataLength: number
  entries: EntryRecord[]
}

/**
 * One payload to write: `bytes` in one piece, or as a gather list whose pieces
 * are stored back to back (a strided subdomain written straight from the
 * domain's memory, row by row). Written as is, not copied: it must not change
 * until the write is done.
 */
export interface EntryInput {
  name: string
  kind: 'heavy' | 'light'
  dtype?: DType
  box?: { lower: number[]; upper: number[] }
  bytes: Uint8Array | readonly Uint8Array[]
  /**
   * CRC32 of `bytes` when the caller computed it already (on another thread,
   * to keep the checkpoint point short); computed here otherwise.
   */
  checksum?: number
  /**
   * `bytes` are the payload compressed (compressPayload): `length` and
   * `checksum` are the raw payload's, `codec` and `shuffle` how it was
   * compressed; `checksum` above is then the stored bytes' CRC.
   */
  encoded?: { codec: StoredEncoding['codec']; shuffle: number; length: number; checksum: number }
  /**
   * `bytes` are only the held blocks of the payload, back to back
   * (deltaPieces; compressed each on its own when `blocks.stored` says so):
   * `length` and `checksum` are the whole payload's.
   */
  delta?: { blocks: EntryBlocks; length: number; checksum: number }
}

/** A decoded entry: its record plus its payload (a view inside the file buffer; a fresh buffer when it was stored compressed; only the held blocks, back to back and decompressed, when it has `blocks`). */
export interface DecodedEntry extends EntryRecord {
  bytes: Uint8Array
}

/** A fully validated rank file. */
export interface DecodedRankFile {
  header: RankFileHeader
  /** CRC32 of the header bytes, as stored in the preamble (commit markers record it). */
  headerChecksum: number
  /** Entries by name, in file order. */
  entries: ReadonlyMap<string, DecodedEntry>
}

/** The header of a rank file read without its payloads. */
export interface RankFileInfo {
  header: RankFileHeader
  headerChecksum: number
  /** Size of the file on disk. */
  fileBytes: number
}

/**
 * Lays out a rank file as the list of buffers to hand to one `writev`: the
 * preamble + header (+ padding) in one new buffer, then each payload as the
 * caller's own view, with small zero buffers for alignment. Payload bytes are
 * read once, for their CRC, and never copied. `headerBytes` (the length of a
 * first part made before, with PLACEHOLDER_CHECKSUM where a checksum was not
 * known yet) pads the header with spaces to exactly that length, so that a
 * body written behind the earlier header stays where it is.
 *
 * ```ts
 * const parts = encodeRankFile(
 *   { fingerprint, skeleton: 0, step: 120, rank, size, settings },
 *   [{ name: 'write', kind: 'heavy', dtype: 'float64', box, bytes: bytesOf(domain.data) },
 *    { name: 'iterator', kind: 'light', bytes: encodeLight(it) }],
 * )
 * await store.writeRankFile(seq, rank, parts)
 * ```
 */
export function encodeRankFile(meta: RankFileMeta, entries: readonly EntryInput[], options: { headerBytes?: number } = {}): Uint8Array[] {
  checkMeta(meta)
  const records: EntryRecord[] = []
  const payloads: { pieces: readonly Uint8Array[]; length: number }[] = []
  const names = new Set<string>()
  let offset = 0
  for (const e of entries) {
    const pieces = checkEntryInput(e, names)
    let length = 0
    let checksum = 0
    for (const p of pieces) {
      length += p.byteLength
      // Node's crc32 of a view of an empty SharedArrayBuffer is 0, whatever the running value: skip empty pieces.
      if (e.checksum === undefined && p.byteLength > 0) checksum = crc32(p, checksum)
    }
    if (e.checksum !== undefined) checksum = e.checksum
    const enc = e.encoded
    const delta = e.delta
    // What every entry records of itself; a delta's length and checksum are the whole payload's (see format/delta.ts).
    const described = {
      name: e.name,
      kind: e.kind,
      ...(e.dtype !== undefined ? { dtype: e.dtype } : {}),
      ...(e.box !== undefined ? { box: { lower: [...e.box.lower], upper: [...e.box.upper] } } : {}),
      offset,
    }
    if (delta) {
      records.push({
        ...described,
        length: delta.length,
        checksum: delta.checksum >>> 0,
        blocks: { size: delta.blocks.size, held: [...delta.blocks.held], sums: [...delta.blocks.sums], ...(delta.blocks.stored ? { stored: { ...delta.blocks.stored, lengths: [...delta.blocks.stored.lengths], sums: [...delta.blocks.stored.sums] } } : {}) },
      })
      payloads.push({ pieces, length })
      offset = align(offset + length)
      continue
    }
    records.push({
      ...described,
      length: enc ? enc.length : length,
      checksum: (enc ? enc.checksum : checksum) >>> 0,
      ...(enc ? { stored: { codec: enc.codec, shuffle: enc.shuffle, length, checksum: checksum >>> 0 } } : {}),
    })
    payloads.push({ pieces, length })
    offset = align(offset + length)
  }
  if (records.some((r) => r.blocks !== undefined) && meta.delta === undefined) throw new ConfigError('an entry holds delta blocks in a file that is not a delta (give meta.delta)')
  const version = meta.delta !== undefined ? DELTA_FORMAT_VERSION : records.some((r) => r.stored !== undefined) ? ENCODED_FORMAT_VERSION : FORMAT_VERSION
  const header: RankFileHeader = {
    formatVersion: version,
    fingerprint: meta.fingerprint,
    skeleton: meta.skeleton,
    step: meta.step,
    rank: meta.rank,
    size: meta.size,
    settings: checkJsonObject('settings', meta.settings),
    digests: { ...(meta.digests ?? {}) },
    createdAt: meta.createdAt ?? new Date().toISOString(),
    ...(meta.runId !== undefined ? { runId: meta.runId } : {}),
    ...(meta.code !== undefined ? { code: meta.code } : {}),
    ...(meta.delta !== undefined ? { delta: { ...meta.delta, needs: [...meta.delta.needs] } } : {}),
    dataLength: offset,
    entries: records,
  }
  let json = new TextEncoder().encode(JSON.stringify(header))
  if (json.byteLength > MAX_HEADER_BYTES) {
    throw new ConfigError(`checkpoint header is ${json.byteLength} bytes, more than the ${MAX_HEADER_BYTES} allowed: register large values as heavy entries`)
  }
  if (options.headerBytes !== undefined) {
    // Spaces after the JSON (still valid JSON) fill the room reserved for the header exactly.
    if (PREAMBLE_BYTES + json.byteLength > options.headerBytes) {
      throw new InternalError(`a rank file's header needs ${PREAMBLE_BYTES + json.byteLength} bytes where ${options.headerBytes} were reserved`)
    }
    const padded = new Uint8Array(options.headerBytes - PREAMBLE_BYTES).fill(0x20)
    padded.set(json)
    json = padded
  }
  const first = new Uint8Array(align(PREAMBLE_BYTES + json.byteLength))
  first.set(MAGIC, 0)
  const view = new DataView(first.buffer)
  view.setUint32(8, version, true)
  view.setUint32(12, json.byteLength, true)
  view.setUint32(16, crc32(json) >>> 0, true)
  first.set(json, PREAMBLE_BYTES)

  const parts: Uint8Array[] = [first]
  for (const p of payloads) {
    for (const piece of p.pieces) if (piece.byteLength > 0) parts.push(piece)
    const pad = align(p.length) - p.length
    // Fresh zero buffers: a shared one could be scribbled on by anyone holding the parts.
    if (pad > 0) parts.push(new Uint8Array(pad))
  }
  return parts
}

/**
 * Validates a whole rank file and returns its header and payload views. Any
 * problem — wrong magic or version, bad header checksum, truncation, trailing
 * bytes, non-zero padding, a payload checksum — throws CheckpointCorruptError
 * naming `name` (usually the path) and the precise reason.
 *
 * ```ts
 * const file = decodeRankFile(await readFile(path), path)
 * const write = entryArray(file.entries.get('write')!, 'float64')
 * ```
 */
export function decodeRankFile(file: Uint8Array, name: string): DecodedRankFile {
  const pre = readPreamble(file, name, file.byteLength)
  const header = readHeader(file, pre, name, file.byteLength)
  const entries = new Map<string, DecodedEntry>()
  const base = pre.dataStart
  let expected = 0
  for (const rec of header.entries) {
    // Padding between the previous payload and this one must be zero.
    checkZero(file, base + expected, base + rec.offset, name, `padding before entry "${rec.name}"`)
    const stored = storedLength(rec)
    const bytes = file.subarray(base + rec.offset, base + rec.offset + stored)
    if (rec.blocks) {
      // Only the held blocks are here: each has its CRC; the payload's own is checked once the chain is assembled.
      entries.set(rec.name, { ...rec, bytes: checkHeldBlocks(rec.name, rec.length, rec.blocks, bytes, name) })
      expected = rec.offset + stored
      continue
    }
    const sum = crc32(bytes) >>> 0
    const want = rec.stored?.checksum ?? rec.checksum
    if (sum !== want) {
      const what = rec.stored ? 'compressed entry' : 'entry'
      throw new CheckpointCorruptError(name, `checksum mismatch in ${what} "${rec.name}" (bytes ${base + rec.offset}..${base + rec.offset + stored}: stored ${hex(want)}, computed ${hex(sum)})`)
    }
    entries.set(rec.name, { ...rec, bytes: rec.stored ? decodeStored(rec, bytes, name) : bytes })
    expected = rec.offset + stored
  }
  checkZero(file, base + expected, base + header.dataLength, name, 'padding at the end of the file')
  return { header, headerChecksum: pre.headerChecksum, entries }
}

/**
 * The raw bytes of an entry stored compressed (`stored`, already checked
 * against the stored CRC), checked against the entry's own checksum: a
 * stream that does not decompress, or to other bytes, is a damaged file.
 *
 * ```ts
 * const raw = decodeStored(record, file.subarray(dataStart + record.offset, dataStart + record.offset + storedLength(record)), path)
 * ```
 */
export function decodeStored(rec: EntryRecord, stored: Uint8Array, name: string): Uint8Array {
  const enc = rec.stored
  if (!enc) return stored
  let raw: Uint8Array
  try {
    raw = decompressPayload(stored, enc.shuffle, rec.length)
  } catch (e) {
    throw new CheckpointCorruptError(name, `compressed entry "${rec.name}" cannot be decompressed (${(e as Error).message})`)
  }
  if (raw.byteLength !== rec.length) {
    throw new CheckpointCorruptError(name, `compressed entry "${rec.name}" decompressed to ${raw.byteLength} bytes, its header says ${rec.length}`)
  }
  const sum = crc32(raw) >>> 0
  if (sum !== rec.checksum) {
    throw new CheckpointCorruptError(name, `checksum mismatch in entry "${rec.name}" after decompression (stored ${hex(rec.checksum)}, computed ${hex(sum)})`)
  }
  return raw
}

/**
 * How many bytes of the data section an entry takes (before its padding):
 * its stored length when compressed, its length otherwise.
 *
 * ```ts
 * storedLength({ ...record, length: 800, stored: { codec: 'brotli', shuffle: 8, length: 120, checksum } })   // 120
 * ```
 */
export function storedLength(rec: EntryRecord): number {
  if (rec.blocks) return heldBytes(rec.length, rec.blocks)
  return rec.stored ? rec.stored.length : rec.length
}

/**
 * Validates the preamble and header of a whole rank file in memory, and the
 * file's length against it, without reading its payloads: a flush that
 * compresses them carries their checksums over as they are.
 *
 * ```ts
 * const { header, dataStart } = decodeRankFileHeader(await readFile(path), path)
 * ```
 */
export function decodeRankFileHeader(file: Uint8Array, name: string): RankFileInfo & { dataStart: number } {
  const pre = readPreamble(file, name, file.byteLength)
  const header = readHeader(file, pre, name, file.byteLength)
  return { header, headerChecksum: pre.headerChecksum, fileBytes: file.byteLength, dataStart: pre.dataStart }
}

/**
 * The meta of a decoded header, to write a rank file with the same header
 * fields (another encoding of its payloads).
 *
 * ```ts
 * const parts = encodeRankFile(metaOfHeader(header), entries)
 * ```
 */
export function metaOfHeader(h: RankFileHeader): RankFileMeta {
  return {
    fingerprint: h.fingerprint,
    skeleton: h.skeleton,
    step: h.step,
    rank: h.rank,
    size: h.size,
    settings: h.settings,
    digests: h.digests,
    createdAt: h.createdAt,
    ...(h.runId !== undefined ? { runId: h.runId } : {}),
    ...(h.code !== undefined ? { code: h.code } : {}),
  }
}

/**
 * Reads and validates only the preamble and header of the rank file at `path`
 * (and checks the file size against the header), without reading payloads:
 * cheap enough to list and pre-validate many checkpoints.
 *
 * ```ts
 * const { header, fileBytes } = await readHeaderOnly('ckpt/ckpt-00000003/rank-0.mlf')
 * ```
 */
export async function readHeaderOnly(path: string, name: string = path): Promise<RankFileInfo> {
  const fh = await open(path, 'r')
  try {
    const fileBytes = (await fh.stat()).size
    const start = await readAt(fh, 0, Math.min(PREAMBLE_BYTES, fileBytes))
    const pre = readPreamble(start, name, fileBytes)
    const prefix = await readAt(fh, 0, Math.min(pre.dataStart, fileBytes))
    const header = readHeader(prefix, pre, name, fileBytes)
    return { header, headerChecksum: pre.headerChecksum, fileBytes }
  } finally {
    await fh.close()
  }
}

/**
 * The header checksum recorded in the first part returned by encodeRankFile
 * (what a commit marker stores for each rank, tying it to that exact header).
 *
 * ```ts
 * const parts = encodeRankFile(meta, entries)
 * const record = { rank, file, bytes, headerChecksum: headerChecksumOf(parts[0]) }
 * ```
 */
export function headerChecksumOf(firstPart: Uint8Array): number {
  if (firstPart.byteLength < PREAMBLE_BYTES || !hasMagic(firstPart)) {
    throw new ConfigError('not the first part of an encoded rank file (missing preamble)')
  }
  return new DataView(firstPart.buffer, firstPart.byteOffset, PREAMBLE_BYTES).getUint32(16, true)
}

/**
 * Rounds up to the payload alignment (8 bytes: the largest element size).
 *
 * ```ts
 * align(13)  // 16
 * ```
 */
export function align(n: number): number {
  return Math.ceil(n / ALIGN) * ALIGN
}

interface Preamble {
  headerLength: number
  headerChecksum: number
  dataStart: number
}

async function readAt(fh: import('node:fs/promises').FileHandle, position: number, length: number): Promise<Uint8Array> {
  const buf = new Uint8Array(length)
  let done = 0
  while (done < length) {
    const { bytesRead } = await fh.read(buf, done, length - done, position + done)
    if (bytesRead === 0) break
    done += bytesRead
  }
  return buf.subarray(0, done)
}

function readPreamble(bytes: Uint8Array, name: string, fileBytes: number): Preamble {
  if (fileBytes < PREAMBLE_BYTES || bytes.byteLength < PREAMBLE_BYTES) {
    throw new CheckpointCorruptError(name, `the file is ${fileBytes} bytes, shorter than the ${PREAMBLE_BYTES}-byte preamble (truncated)`)
  }
  if (!hasMagic(bytes)) throw new CheckpointCorruptError(name, 'bad magic bytes: not a molotof checkpoint file')
  const view = new DataView(bytes.buffer, bytes.byteOffset, PREAMBLE_BYTES)
  const version = view.getUint32(8, true)
  if (!VERSIONS.includes(version)) {
    throw new CheckpointCorruptError(name, `format version ${version} is not supported (this molotof reads versions ${VERSIONS.slice(0, -1).join(', ')} and ${VERSIONS[VERSIONS.length - 1]})`)
  }
  const headerLength = view.getUint32(12, true)
  const headerChecksum = view.getUint32(16, true)
  if (headerLength === 0 || headerLength > MAX_HEADER_BYTES) {
    throw new CheckpointCorruptError(name, `header length ${headerLength} is out of range`)
  }
  const dataStart = align(PREAMBLE_BYTES + headerLength)
  if (PREAMBLE_BYTES + headerLength > fileBytes) {
    throw new CheckpointCorruptError(name, `the ${headerLength}-byte header runs past the end of the ${fileBytes}-byte file (truncated)`)
  }
  return { headerLength, headerChecksum, dataStart }
}

/** `prefix` holds the file from byte 0 up to (at least) the data start, or up to the end of a short file. */
function readHeader(prefix: Uint8Array, pre: Preamble, name: string, fileBytes: number): RankFileHeader {
  const json = prefix.subarray(PREAMBLE_BYTES, PREAMBLE_BYTES + pre.headerLength)
  const sum = crc32(json) >>> 0
  if (sum !== pre.headerChecksum) {
    throw new CheckpointCorruptError(name, `header checksum mismatch (stored ${hex(pre.headerChecksum)}, computed ${hex(sum)})`)
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(json))
  } catch (e) {
    throw new CheckpointCorruptError(name, `the header is not valid JSON (${(e as Error).message})`)
  }
  const header = checkHeader(parsed, name, new DataView(prefix.buffer, prefix.byteOffset, PREAMBLE_BYTES).getUint32(8, true))
  if (fileBytes < pre.dataStart) {
    throw new CheckpointCorruptError(name, `the file is ${fileBytes} bytes, the header alone needs ${pre.dataStart} (truncated)`)
  }
  checkZero(prefix, PREAMBLE_BYTES + pre.headerLength, pre.dataStart, name, 'padding after the header')
  const total = pre.dataStart + header.dataLength
  if (fileBytes < total) throw new CheckpointCorruptError(name, `the file is ${fileBytes} bytes, its header describes ${total} (truncated)`)
  if (fileBytes > total) throw new CheckpointCorruptError(name, `the file is ${fileBytes} bytes, its header describes ${total} (unexpected trailing data)`)
  return header
}

function hasMagic(bytes: Uint8Array): boolean {
  for (let i = 0; i < MAGIC.length; i++) if (bytes[i] !== MAGIC[i]) return false
  return true
}

function checkZero(bytes: Uint8Array, from: number, to: number, name: string, what: string): void {
  for (let i = from; i < to; i++) {
    if (bytes[i] !== 0) throw new CheckpointCorruptError(name, `non-zero byte at offset ${i} in the ${what}`)
  }
}

function hex(n: number): string {
  return '0x' + n.toString(16).padStart(8, '0')
}

// ---- header validation (after the CRC passed, so a failure here means a writer bug or a forged file)

function checkHeader(h: unknown, name: string, version: number): RankFileHeader {
  const bad = (reason: string): never => {
    throw new CheckpointCorruptError(name, `invalid header: ${reason}`)
  }
  if (!isPlainObject(h)) return bad('not a JSON object')
  if (h.formatVersion !== version) bad(`formatVersion ${String(h.formatVersion)} differs from the preamble's ${version}`)
  if (typeof h.fingerprint !== 'string') bad('fingerprint is not a string')
  for (const k of ['skeleton', 'step', 'rank', 'size', 'dataLength'] as const) {
    if (!Number.isSafeInteger(h[k])) bad(`${k} is not an integer`)
  }
  if (!((h.rank as number) >= 0 && (h.rank as number) < (h.size as number))) bad(`rank ${String(h.rank)} is outside 0..${String(h.size)}`)
  if (!isPlainObject(h.settings)) bad('settings is not an object')
  if (!isPlainObject(h.digests) || !Object.values(h.digests).every((d) => typeof d === 'string')) bad('digests is not a map of strings')
  if (typeof h.createdAt !== 'string') bad('createdAt is not a string')
  if (h.runId !== undefined && typeof h.runId !== 'string') bad('runId is not a string')
  if (h.code !== undefined && !isCodeIdentity(h.code)) bad('code is not a code identity')
  if (h.delta !== undefined && !isDeltaRecord(h.delta)) bad('delta is not a valid chain record')
  if ((h.delta !== undefined) !== (version === DELTA_FORMAT_VERSION)) bad(h.delta !== undefined ? `a delta in a version ${version} file` : 'a version 3 file without its delta record')
  if (!Array.isArray(h.entries)) return bad('entries is not an array')
  const names = new Set<string>()
  let expected = 0
  for (const [i, e] of (h.entries as unknown[]).entries()) {
    const where = `entry ${i}`
    if (!isPlainObject(e)) return bad(`${where} is not an object`)
    if (typeof e.name !== 'string' || e.name === '') bad(`${where} has no name`)
    if (names.has(e.name as string)) bad(`entry name "${String(e.name)}" appears twice`)
    names.add(e.name as string)
    if (e.kind !== 'heavy' && e.kind !== 'light') bad(`${where} has kind ${String(e.kind)}`)
    if (e.dtype !== undefined && (typeof e.dtype !== 'string' || !isDType(e.dtype))) bad(`${where} has unknown dtype ${String(e.dtype)}`)
    if (e.kind === 'light' && e.dtype !== undefined) bad(`light ${where} has a dtype`)
    if (e.box !== undefined && !isBox(e.box)) bad(`${where} has an invalid box`)
    for (const k of ['offset', 'length'] as const) if (!Number.isSafeInteger(e[k]) || (e[k] as number) < 0) bad(`${where} ${k} is invalid`)
    if (!Number.isInteger(e.checksum) || (e.checksum as number) < 0 || (e.checksum as number) > 0xffffffff) bad(`${where} checksum is invalid`)
    if (e.stored !== undefined && !isStoredEncoding(e.stored)) bad(`${where} has an invalid stored encoding`)
    if (e.stored !== undefined && version !== ENCODED_FORMAT_VERSION) bad(`${where} is compressed in a version ${version} file`)
    if (e.blocks !== undefined && (h.delta === undefined || e.kind !== 'heavy' || e.stored !== undefined || !isEntryBlocks(e.blocks, e.length as number))) bad(`${where} has invalid delta blocks`)
    if (e.offset !== expected) bad(`${where} starts at ${String(e.offset)}, expected ${expected}`)
    if (typeof e.dtype === 'string' && isDType(e.dtype) && (e.length as number) % DTYPES[e.dtype].BYTES_PER_ELEMENT !== 0) {
      bad(`${where} length ${String(e.length)} is not a whole number of ${e.dtype} elements`)
    }
    expected = align((e.offset as number) + storedLength(e as unknown as EntryRecord))
  }
  if (h.dataLength !== expected) bad(`dataLength ${String(h.dataLength)} does not match the entries (${expected})`)
  return h as unknown as RankFileHeader
}

function isStoredEncoding(s: unknown): s is StoredEncoding {
  if (!isPlainObject(s) || s.codec !== PAYLOAD_CODEC) return false
  if (!Number.isSafeInteger(s.shuffle) || (s.shuffle as number) < 1 || (s.shuffle as number) > 8) return false
  if (!Number.isSafeInteger(s.length) || (s.length as number) < 0) return false
  return Number.isInteger(s.checksum) && (s.checksum as number) >= 0 && (s.checksum as number) <= 0xffffffff
}

function isBox(b: unknown): b is BoxRecord {
  if (!isPlainObject(b) || !Array.isArray(b.lower) || !Array.isArray(b.upper)) return false
  return b.lower.length === b.upper.length && b.lower.length > 0 && [...b.lower, ...b.upper].every((x) => Number.isSafeInteger(x))
}

// ---- input validation (caller mistakes: ConfigError)

function checkMeta(m: RankFileMeta): void {
  if (typeof m.fingerprint !== 'string') throw new ConfigError('checkpoint fingerprint must be a string')
  if (m.runId !== undefined && typeof m.runId !== 'string') throw new ConfigError('checkpoint runId must be a string')
  for (const k of ['skeleton', 'step', 'rank', 'size'] as const) {
    if (!Number.isSafeInteger(m[k])) throw new ConfigError(`checkpoint ${k} must be an integer (got ${String(m[k])})`)
  }
  if (m.size < 1 || m.rank < 0 || m.rank >= m.size) throw new ConfigError(`checkpoint rank ${m.rank} is outside 0..${m.size - 1}`)
  for (const [k, d] of Object.entries(m.digests ?? {})) {
    if (typeof d !== 'string') throw new ConfigError(`digest of "${k}" must be a string`)
  }
}

/** Checks an entry and returns its payload as a list of pieces. */
function checkEntryInput(e: EntryInput, names: Set<string>): readonly Uint8Array[] {
  if (typeof e.name !== 'string' || e.name === '') throw new ConfigError('a checkpoint entry needs a non-empty name')
  if (names.has(e.name)) throw new ConfigError(`checkpoint entry "${e.name}" is given twice`)
  names.add(e.name)
  if (e.kind !== 'heavy' && e.kind !== 'light') throw new ConfigError(`checkpoint entry "${e.name}": kind must be "heavy" or "light"`)
  const pieces = e.bytes instanceof Uint8Array ? [e.bytes] : e.bytes
  if (!Array.isArray(pieces) || !pieces.every((p) => p instanceof Uint8Array)) {
    throw new ConfigError(`checkpoint entry "${e.name}": bytes must be a Uint8Array or an array of them (use bytesOf(array))`)
  }
  if (e.dtype !== undefined) {
    if (e.kind === 'light') throw new ConfigError(`checkpoint entry "${e.name}": a light entry has no dtype`)
    if (!isDType(e.dtype)) throw new ConfigError(`checkpoint entry "${e.name}": unknown dtype "${String(e.dtype)}"`)
    const bpe = DTYPES[e.dtype].BYTES_PER_ELEMENT
    const length = e.encoded ? e.encoded.length : e.delta ? e.delta.length : pieces.reduce((n, p) => n + p.byteLength, 0)
    if (length % bpe !== 0) {
      throw new ConfigError(`checkpoint entry "${e.name}": ${length} bytes is not a whole number of ${e.dtype} elements`)
    }
  }
  if (e.encoded !== undefined && !isStoredEncoding({ ...e.encoded, length: 0, checksum: 0 })) {
    throw new ConfigError(`checkpoint entry "${e.name}": unknown encoding (${JSON.stringify({ codec: e.encoded.codec, shuffle: e.encoded.shuffle })})`)
  }
  if (e.box !== undefined && !isBox(e.box)) {
    throw new ConfigError(`checkpoint entry "${e.name}": box needs integer lower/upper bounds of the same positive length`)
  }
  return pieces
}
