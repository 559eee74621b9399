import { readSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { CheckpointCorruptError } from '../../../errors.js'
import { crc32 } from 'node:zlib'
import { align, decodeStored, readHeaderOnly, storedLength, type DecodedRankFile, type EntryRecord, type RankFileHeader } from '../../format/rank-file.js'
import type { CheckpointStore } from '../../store/checkpoint-store.js'
import { checkpointFsError, errorCode } from '../../store/fs-errors.js'

const SYNC_READ_BYTES = 64 * 1024

/** A byte range of a rank file's data section (offsets as in its entry records). */
export interface ByteRange {
  offset: number
  length: number
}

/** What a source counted, for figures and benchmarks. */
export interface SourceCounters {
  /** Bytes of preambles and headers read. */
  headerBytes: number
  /** Payload bytes read by `readRanges`. */
  payloadBytes: number
}

/** The byte ranges one rank needs of one old rank's file (see `RankFileSource.readAll`). */
export interface RangeRequest {
  /** Where the file's data section starts (from its header). */
  dataStart: number
  ranges: readonly ByteRange[]
  /** Where to put each range's bytes, when given (as in `readRanges`). */
  into?: readonly (Uint8Array | undefined)[]
}

/** A rank file's validated header and where its data section starts in the file. */
export interface SourceHeader {
  header: RankFileHeader
  dataStart: number
}

/**
 * Where the rank files of a checkpoint come from, for an elastic restore: the
 * header of any old rank's file, and byte ranges of its data section. The
 * directory store is one source (`DirectorySource`); a memory or partner copy
 * of the same files is another, with the same format, so the elastic reader
 * does not care where the bytes are.
 *
 * ```ts
 * const source: RankFileSource = new DirectorySource(store)
 * const { header, dataStart } = await source.header(seq, 2)
 * const [bytes] = await source.readRanges(seq, 2, dataStart, [{ offset: header.entries[0].offset, length: 64 }])
 * ```
 */
export interface RankFileSource {
  /** Where the files are, for messages (a directory, a level). */
  readonly where: string
  readonly counters: SourceCounters
  /** The name of old rank `rank`'s file of checkpoint `seq`, for messages. */
  nameOf(seq: number, rank: number): string
  /** The validated header (its CRC checked) of old rank `rank`'s file of checkpoint `seq`, and where its data starts. */
  header(seq: number, rank: number): Promise<SourceHeader>
  /**
   * The bytes of `ranges` of that file's data section (starting at byte
   * `dataStart` of the file, as `header` said), one buffer per range:
   * `into[i]` when given (exactly the range's length: the bytes land straight
   * in their destination), otherwise a fresh one (starting on an 8-byte
   * boundary, so typed arrays can view it).
   */
  readRanges(seq: number, rank: number, dataStart: number, ranges: readonly ByteRange[], into?: readonly (Uint8Array | undefined)[]): Promise<Uint8Array[]>
  /**
   * The rank that reads old rank `oldRank`'s file itself, when not every rank
   * can (a file on one node's disk, or in one rank's partner store); without
   * it, any rank can read any file (`header` and `readRanges` work for every
   * old rank).
   */
  homeOf?(oldRank: number): number
  /**
   * What this rank needs of every old rank's file (`requests[r]` for old rank
   * r; empty ranges for none), one buffer per range as `readRanges` gives.
   * Collective when the files are spread (`homeOf`): every rank calls it
   * once, and each serves the others the ranges of the files it reads.
   */
  readAll(seq: number, requests: readonly RangeRequest[]): Promise<Uint8Array[][]>
}

/**
 * A file with compressed payloads as the elastic reader sees it: every entry
 * raw and laid out as if stored raw (`logical`), and what is really in the
 * file (`stored`, same order).
 */
interface EncodedLayout {
  logical: RankFileHeader
  stored: readonly EntryRecord[]
}

/**
 * Rank files in a checkpoint directory (`CheckpointStore`), read with
 * positioned reads: the header alone, then only the ranges asked for. A file
 * with compressed payloads (a flushed disk checkpoint, `compress`) is shown
 * as if stored raw: its header with raw offsets and lengths, and a range of a
 * compressed payload read by reading that payload whole, checking it and
 * decompressing it, then slicing (the newest one is kept for the next ranges).
 *
 * ```ts
 * const source = new DirectorySource(new CheckpointStore('.molotof/jacobi'))
 * ```
 */
export class DirectorySource implements RankFileSource {
  readonly counters: SourceCounters = { headerBytes: 0, payloadBytes: 0 }
  /** The files with compressed payloads met so far, by `seq/rank`. */
  private readonly encoded = new Map<string, EncodedLayout>()
  /** The last compressed payload decompressed (ranges of one payload come one after another). */
  private inflated: { key: string; entry: string; bytes: Uint8Array } | undefined
  /** The last delta file assembled with its chain (its ranges come one after another). */
  private assembled: { key: string; file: DecodedRankFile } | undefined

  constructor(private readonly store: CheckpointStore) {}

  get where(): string {
    return this.store.dir
  }

  nameOf(seq: number, rank: number): string {
    return this.store.fileOf(seq, rank)
  }

  async header(seq: number, rank: number): Promise<SourceHeader> {
    const path = this.store.fileOf(seq, rank)
    try {
      const info = await readHeaderOnly(path)
      const dataStart = info.fileBytes - info.header.dataLength
      this.counters.headerBytes += dataStart
      const layout = encodedLayout(info.header)
      if (layout) this.encoded.set(`${seq}/${rank}`, layout)
      return { header: layout ? layout.logical : info.header, dataStart }
    } catch (e) {
      if (errorCode(e) === 'ENOENT') throw new CheckpointCorruptError(path, 'the file is missing')
      if (e instanceof CheckpointCorruptError) throw e
      throw checkpointFsError('cannot read checkpoint file', path, e)
    }
  }

  readAll(seq: number, requests: readonly RangeRequest[]): Promise<Uint8Array[][]> {
    return readEach(this, seq, requests)
  }

  async readRanges(seq: number, rank: number, dataStart: number, ranges: readonly ByteRange[], into?: readonly (Uint8Array | undefined)[]): Promise<Uint8Array[]> {
    if (ranges.length === 0) return []
    const key = `${seq}/${rank}`
    // A rank serving another's ranges may not have read this file's header yet.
    if (!this.encoded.has(key)) await this.header(seq, rank)
    const layout = this.encoded.get(key)
    if (layout) return this.readEncoded(seq, rank, dataStart, layout, ranges, into)
    return this.readStored(seq, rank, dataStart, ranges, into)
  }

  /** `ranges` (raw offsets) of a file with compressed payloads. */
  private async readEncoded(
    seq: number,
    rank: number,
    dataStart: number,
    layout: EncodedLayout,
    ranges: readonly ByteRange[],
    into?: readonly (Uint8Array | undefined)[],
  ): Promise<Uint8Array[]> {
    const path = this.store.fileOf(seq, rank)
    const key = `${seq}/${rank}`
    const out: Uint8Array[] = []
    for (const [i, r] of ranges.entries()) {
      const e = layout.logical.entries.findIndex((x) => r.offset >= x.offset && r.offset + r.length <= x.offset + x.length)
      if (e < 0) throw new CheckpointCorruptError(path, `bytes ${r.offset}..${r.offset + r.length} of the data lie in no entry`)
      const logical = layout.logical.entries[e]
      const stored = layout.stored[e]
      const within = r.offset - logical.offset
      if (stored.blocks) {
        // A delta file: its chain read and assembled whole once (every checksum checked), then sliced.
        if (this.assembled?.key !== key) this.assembled = { key, file: await this.store.loadRankFile(seq, rank) }
        const whole = this.assembled.file.entries.get(stored.name)!.bytes
        const given = into?.[i]
        const buf = given && given.byteLength === r.length ? given : new Uint8Array(r.length)
        buf.set(whole.subarray(within, within + r.length))
        out.push(buf)
        continue
      }
      if (!stored.stored) {
        out.push((await this.readStored(seq, rank, dataStart, [{ offset: stored.offset + within, length: r.length }], [into?.[i]]))[0])
        continue
      }
      let raw = this.inflated?.key === key && this.inflated.entry === stored.name ? this.inflated.bytes : undefined
      if (!raw) {
        const [bytes] = await this.readStored(seq, rank, dataStart, [{ offset: stored.offset, length: storedLength(stored) }])
        const sum = crc32(bytes) >>> 0
        if (sum !== stored.stored.checksum) {
          throw new CheckpointCorruptError(path, `checksum mismatch in compressed entry "${stored.name}" (stored 0x${stored.stored.checksum.toString(16).padStart(8, '0')}, computed 0x${sum.toString(16).padStart(8, '0')})`)
        }
        raw = decodeStored(stored, bytes, path)
        this.inflated = { key, entry: stored.name, bytes: raw }
      }
      const given = into?.[i]
      const buf = given && given.byteLength === r.length ? given : new Uint8Array(r.length)
      buf.set(raw.subarray(within, within + r.length))
      out.push(buf)
    }
    return out
  }

  /** `ranges` of the file as stored. */
  private async readStored(seq: number, rank: number, dataStart: number, ranges: readonly ByteRange[], into?: readonly (Uint8Array | undefined)[]): Promise<Uint8Array[]> {
    const path = this.store.fileOf(seq, rank)
    const base = dataStart
    let fh: import('node:fs/promises').FileHandle
    try {
      fh = await open(path, 'r')
    } catch (e) {
      if (errorCode(e) === 'ENOENT') throw new CheckpointCorruptError(path, 'the file is missing')
      throw checkpointFsError('cannot read checkpoint file', path, e)
    }
    try {
      const out: Uint8Array[] = []
      for (const [i, r] of ranges.entries()) {
        const given = into?.[i]
        const buf = given && given.byteLength === r.length ? given : new Uint8Array(r.length)
        let done = 0
        while (done < r.length) {
          // A strided box is many short runs: a synchronous read of a cached page costs
          // microseconds, a trip through the thread pool a hundred. Long ranges go async.
          const bytesRead =
            r.length < SYNC_READ_BYTES
              ? readSync(fh.fd, buf, done, r.length - done, base + r.offset + done)
              : (await fh.read(buf, done, r.length - done, base + r.offset + done)).bytesRead
          if (bytesRead === 0) throw new CheckpointCorruptError(path, `the file ends inside bytes ${base + r.offset}..${base + r.offset + r.length} (truncated)`)
          done += bytesRead
        }
        this.counters.payloadBytes += r.length
        out.push(buf)
      }
      return out
    } catch (e) {
      if (e instanceof CheckpointCorruptError) throw e
      throw checkpointFsError('cannot read checkpoint file', path, e)
    } finally {
      await fh.close()
    }
  }
}

/**
 * Rank files spread over several directories read by one process: old rank
 * r's file from `byRank[r]` (as `molotof inspect` sees `{node}` directories).
 *
 * ```ts
 * const source = new SpreadSource([new DirectorySource(node0), new DirectorySource(node0), new DirectorySource(node1)])
 * ```
 */
export class SpreadSource implements RankFileSource {
  constructor(private readonly byRank: readonly RankFileSource[]) {}

  get where(): string {
    return [...new Set(this.byRank.map((s) => s.where))].join(', ')
  }

  get counters(): SourceCounters {
    return sumCounters(this.byRank)
  }

  nameOf(seq: number, rank: number): string {
    return this.byRank[rank].nameOf(seq, rank)
  }

  header(seq: number, rank: number): Promise<SourceHeader> {
    return this.byRank[rank].header(seq, rank)
  }

  readRanges(seq: number, rank: number, dataStart: number, ranges: readonly ByteRange[], into?: readonly (Uint8Array | undefined)[]): Promise<Uint8Array[]> {
    return this.byRank[rank].readRanges(seq, rank, dataStart, ranges, into)
  }

  readAll(seq: number, requests: readonly RangeRequest[]): Promise<Uint8Array[][]> {
    return readEach(this, seq, requests)
  }
}

/**
 * A header with compressed payloads as if they were stored raw (raw lengths,
 * offsets laid out from them), beside its own entries; undefined when every
 * payload is stored raw.
 */
function encodedLayout(header: RankFileHeader): EncodedLayout | undefined {
  if (!header.entries.some((e) => e.stored !== undefined || e.blocks !== undefined)) return undefined
  let offset = 0
  const entries: EntryRecord[] = header.entries.map((e) => {
    const { stored: _stored, blocks: _blocks, ...rest } = e
    const logical = { ...rest, offset }
    offset = align(offset + e.length)
    return logical
  })
  return { logical: { ...header, entries, dataLength: offset }, stored: header.entries }
}

/** `readAll` of a source whose every file this process reads itself: each old rank's ranges in turn. */
export async function readEach(source: RankFileSource, seq: number, requests: readonly RangeRequest[]): Promise<Uint8Array[][]> {
  const out: Uint8Array[][] = []
  for (const [r, q] of requests.entries()) out.push(await source.readRanges(seq, r, q.dataStart, q.ranges, q.into))
  return out
}

/** The counters of several sources added up, each source once (`sources` may repeat one, as a per-rank table does). */
export function sumCounters(sources: readonly (RankFileSource | undefined)[]): SourceCounters {
  const out: SourceCounters = { headerBytes: 0, payloadBytes: 0 }
  for (const s of new Set(sources)) {
    if (!s) continue
    out.headerBytes += s.counters.headerBytes
    out.payloadBytes += s.counters.payloadBytes
  }
  return out
}
