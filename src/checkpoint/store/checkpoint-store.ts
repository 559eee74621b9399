import { lstat, open, readdir, readFile, rename, rm, stat, unlink } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { performance } from 'node:perf_hooks'
import { CheckpointCorruptError, CheckpointError, CheckpointMismatchError, ConfigError, InternalError } from '../../errors.js'
import { DTYPES, plainAllocator, sharedAllocator, type BufferAllocator } from '../../domains/dtype.js'
import { closeSync, constants, existsSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, renameSync, rmSync } from 'node:fs'
import { cleanEntries, removeEmptyDirectory } from './owned-dir.js'
import type { CheckpointIoThread, StageJob, Staged } from './io-thread.js'
import { copyDurably, isTemporaryName, makeDirectory, syncDirectory, temporaryNameFor, writeDurably } from './durable.js'
import {
  decodeRankFile,
  decodeRankFileHeader,
  encodeRankFile,
  headerChecksumOf,
  MAGIC,
  metaOfHeader,
  readHeaderOnly,
  storedLength,
  type DecodedRankFile,
  type EntryInput,
  type EntryRecord,
  type RankFileHeader,
} from '../format/rank-file.js'
import { PAYLOAD_CODEC } from './io-worker/payload-codec.mjs'
import { checkpointFsError, errorCode, explainFsError } from './fs-errors.js'
import { encodeMarker, parseMarker, type CommitMarker, type RankFileRecord } from './marker.js'
import { CheckpointNumbers, numberingOf } from './numbering.js'
import { assembleChain, compressedBlocks, deltaCandidates, type DeltaChain, type DeltaWritten } from './delta-chain.js'
import { DELTA_BLOCK_BYTES } from '../format/delta.js'

/** What writeRankFile reports: the marker record for this rank plus where and how long. */
export interface RankFileWritten extends RankFileRecord {
  /** Absolute path of the file. */
  path: string
  durationMs: number
}

/**
 * How a flush compresses the payloads it writes (see CheckpointStore.flushRankFile).
 *
 * ```ts
 * const compress: FlushCompression = { io: new CheckpointIoThread(), raw: new Set(['lookup']) }
 * ```
 */
export interface FlushCompression {
  /** The thread that compresses: one of the flush's own, so that the memory level's copies never queue behind it. */
  io: CheckpointIoThread
  /** Heavy entries stored raw whatever they hold (registered with `{ compress: false }`). */
  raw: ReadonlySet<string>
}

/** Why a checkpoint without a commit marker is incomplete. */
const NO_MARKER = 'no commit marker: the checkpoint was not completed'
/** Why a folder named like a checkpoint is not read as one. */
const NOT_MOLOTOFS = "not molotof's (no rank file or commit marker of its format): left as it is, never read as a checkpoint"

export interface CheckpointSummary {
  seq: number
  path: string
  /** A readable commit marker is present. */
  complete: boolean
  marker?: CommitMarker
  /** Why the checkpoint is not complete (missing or unreadable marker, unreadable directory). */
  problem?: string
  /** What `problem` is about when it is not the commit marker: the checkpoint's directory, which cannot be listed. */
  problemPath?: string
  /**
   * No commit marker, and newer than every complete checkpoint here: a write
   * (or a flush from the memory level) that its run's end interrupted before
   * the commit. It was never a recovery line, so nothing of it is lost: not a
   * damaged checkpoint (a damaged or missing marker under a newer commit is).
   */
  uncommitted?: boolean
  /**
   * Named like a checkpoint, but not molotof's (see isMolotofFolder): the
   * user's files, never read as a checkpoint nor deleted. Listed (incomplete,
   * with `problem` saying so) so that its number is never written to, and a
   * resume names it among what it skipped.
   */
  foreign?: boolean
  /** Rank files present, with their sizes, in rank order. */
  files: { rank: number; file: string; bytes: number }[]
}

/** A file of a checkpoint that cannot be used, and why. */
export interface ValidationProblem {
  file: string
  reason: string
  /** The rank whose file it is; undefined for the commit marker (which spoils every rank's). */
  rank?: number
}

export interface ValidationReport {
  ok: boolean
  problems: ValidationProblem[]
}

/**
 * The ranks of `checked` whose files a validation found good: none when the
 * commit marker itself is the problem.
 *
 * ```ts
 * validRanks(await store.validate(seq, 4, { ranks: [0, 2] }), [0, 2])   // [0] when rank 2's file is damaged
 * ```
 */
export function validRanks(report: ValidationReport, checked: readonly number[]): number[] {
  if (report.problems.some((p) => p.rank === undefined)) return []
  return checked.filter((r) => !report.problems.some((p) => p.rank === r))
}

export interface ValidateOptions {
  /** Only check these ranks' files (a rank checks its own); all `size` ranks by default. */
  ranks?: readonly number[]
  /** Also read every payload and verify its checksum (default false: headers and sizes only). */
  checksums?: boolean
}

export interface PruneResult {
  /** Sequence numbers of the checkpoints deleted. */
  removed: number[]
  /** Number of temporary files (leftovers of interrupted writes) deleted. */
  temporaryFiles: number
  /** Unusable checkpoints that could not be deleted (an unreadable directory), with why: left, never a recovery line. */
  left?: { seq: number; reason: string }[]
}

const CKPT_DIR = /^ckpt-(\d{8,})$/
const RANK_FILE = /^rank-(\d+)\.mlf$/
const MARKER = 'COMMIT'
const SPARE_DIR = 'spare'
/** The sub-directory of partner copies (see partner.ts): a store of the same layout. */
const PARTNER_DIR = 'partner'
/** The sub-directory of XOR parity slices (see redundancy/parity-file.ts): a store of the same layout. */
const XOR_DIR = 'xor'

/** A temporary file of a rank file's or a commit marker's write (see temporaryNameFor). */
const STORE_TEMPORARY = /^(rank-\d+\.mlf|COMMIT)\.tmp-/

/**
 * Whether an entry of a checkpoint directory is one the store writes:
 * checkpoint folders, their rank files, commit markers and temporary files,
 * the spare folder, the partner copies' and the XOR slices' folders. Cleaning removes these only;
 * anything else a user put there stays. With `path`, a checkpoint or spare
 * folder counts only when it is provably molotof's (see isMolotofFolder).
 *
 * ```ts
 * isStoreEntry('ckpt-00000007', true)   // true
 * isStoreEntry('notes.txt', false)      // false
 * ```
 */
export function isStoreEntry(name: string, dir: boolean, path?: string): boolean {
  if (!dir) return RANK_FILE.test(name) || name === MARKER || isTemporaryName(name)
  if (name === PARTNER_DIR || name === XOR_DIR) return true
  if (!CKPT_DIR.test(name) && name !== SPARE_DIR) return false
  return path === undefined || isMolotofFolder(path, namesOrNone(path))
}

/**
 * The one rule of what molotof may delete in a checkpoint directory: a
 * checkpoint (or spare) folder is molotof's when it holds a rank file that
 * starts with molotof's magic bytes, a commit marker molotof's reader parses,
 * or a temporary file of molotof's naming (an interrupted write) — or nothing
 * at all. A folder of the user's that only has molotof's names
 * (`ckpt-00000007/rank-0.mlf` of other content) is none of these: it is
 * never deleted, nor read as a checkpoint.
 *
 * ```ts
 * isMolotofFolder('/scratch/ckpt/ckpt-00000007', ['COMMIT', 'rank-0.mlf'])   // false when neither is molotof's format
 * ```
 */
export function isMolotofFolder(dir: string, names: readonly string[]): boolean {
  if (names.length === 0) return true
  for (const name of names) if (STORE_TEMPORARY.test(name) && isTemporaryName(name)) return true
  for (const name of names) if (RANK_FILE.test(name) && startsWithMagic(join(dir, name))) return true
  if (!names.includes(MARKER)) return false
  try {
    parseMarker(readFileSync(join(dir, MARKER)), MARKER)
    return true
  } catch {
    // Unreadable or not a marker of ours: no proof the folder is molotof's.
    return false
  }
}

/** The file begins with the rank-file magic (a symlink is not followed: never proof). */
function startsWithMagic(path: string): boolean {
  let fd: number | undefined
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW)
    const head = new Uint8Array(MAGIC.length)
    if (readSync(fd, head, 0, head.length, 0) !== head.length) return false
    return head.every((b, i) => b === MAGIC[i])
  } catch {
    // Unreadable, or a symlink (O_NOFOLLOW): no proof.
    return false
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
}

/** readdirSync, or none when the directory is gone; other failures are thrown. */
function namesOrNone(dir: string): string[] {
  try {
    return readdirSync(dir)
  } catch (e) {
    if (errorCode(e) === 'ENOENT') return []
    throw e
  }
}

/**
 * Deletes the files the store wrote in checkpoint folder (or spare folder)
 * `dir`, then the folder if nothing else is in it: a file someone else put
 * there keeps the folder, and the file. Call only for a folder found to be
 * molotof's (isMolotofFolder) before anything of it was deleted.
 */
function removeStoreFolder(dir: string): void {
  if (cleanEntries(dir, isStoreEntry).length === 0) removeEmptyDirectory(dir)
}

/**
 * Checkpoints in a directory: `<dir>/ckpt-<seq, 8 digits>/rank-<r>.mlf` plus a
 * `COMMIT` marker written last. Every file is written durably (temporary name,
 * fsync, rename, directory fsync), so a crash or a full disk never damages an
 * earlier checkpoint; every failure is a CheckpointError naming the path.
 * Pruning keeps each rank's newest discarded file in `<dir>/spare/`, and that
 * rank's next write overwrites it instead of allocating a new file.
 *
 * ```ts
 * const store = new CheckpointStore('/scratch/ckpt')
 * await store.assertFingerprint(fingerprint)
 * const w = await store.writeRankFile(seq, rank, encodeRankFile(meta, entries))  // each rank
 * await store.commit(seq, { seq, skeleton, step, size, fingerprint, settings, ranks: allW, createdAt })  // one rank, after all wrote
 * await store.prune(2)
 * ```
 *
 * Several ranks (threads or processes) may use stores on the same directory at
 * once: each writes only its own rank file, one rank commits and prunes.
 */
export class CheckpointStore {
  readonly dir: string
  /**
   * A directory in RAM (the memory level, on tmpfs): files are never
   * fsynced (there is no disk). Same layout, same format, same commit rule.
   */
  readonly volatile: boolean

  constructor(dir: string, options: { volatile?: boolean } = {}) {
    if (typeof dir !== 'string' || dir === '') throw new ConfigError('the checkpoint directory must be a non-empty path')
    this.dir = resolve(dir)
    this.volatile = options.volatile === true
  }

  /** Directory of checkpoint `seq`. */
  pathOf(seq: number): string {
    if (!Number.isSafeInteger(seq) || seq < 0) throw new ConfigError(`checkpoint sequence numbers are non-negative integers (got ${seq})`)
    return join(this.dir, `ckpt-${String(seq).padStart(8, '0')}`)
  }

  /** Path of rank `rank`'s file in checkpoint `seq`. */
  fileOf(seq: number, rank: number): string {
    return join(this.pathOf(seq), `rank-${rank}.mlf`)
  }

  /**
   * Where a pruned checkpoint leaves rank `rank`'s file for that rank's next
   * write to overwrite (see writeDurably's `reuse`): the directory then holds
   * the kept checkpoints plus one spare file per rank — the same peak as
   * while a new checkpoint is being written.
   */
  spareOf(rank: number): string {
    return join(this.dir, SPARE_DIR, `rank-${rank}.mlf`)
  }

  /**
   * Rank `rank`'s spare file when it is one molotof wrote (it starts with the
   * rank-file magic; a symlink never does): a `spare/rank-0.mlf` of the
   * user's is never overwritten.
   */
  private spareToReuse(rank: number): string | undefined {
    const spare = this.spareOf(rank)
    return startsWithMagic(spare) ? spare : undefined
  }

  /** The spare files present (see spareOf), in rank order; none when the directory has none. */
  async spares(): Promise<{ rank: number; bytes: number }[]> {
    const dir = join(this.dir, SPARE_DIR)
    const names = await namesIn(dir)
    return (await rankFilesIn(dir, names)).map(({ rank, bytes }) => ({ rank, bytes }))
  }

  /** Path of the commit marker of checkpoint `seq`. */
  markerOf(seq: number): string {
    return join(this.pathOf(seq), MARKER)
  }

  /**
   * Writes this rank's file of checkpoint `seq` durably with one writev of
   * `parts` (from encodeRankFile; payloads are written from the caller's
   * memory, not copied). Refuses to touch an already committed checkpoint.
   */
  async writeRankFile(seq: number, rank: number, parts: readonly Uint8Array[]): Promise<RankFileWritten> {
    const t0 = performance.now()
    const dir = this.pathOf(seq)
    const path = this.fileOf(seq, rank)
    const headerChecksum = headerChecksumOf(parts[0] ?? new Uint8Array(0))
    try {
      await makeDirectory(dir)
    } catch (e) {
      throw checkpointFsError('cannot create checkpoint directory', dir, e)
    }
    if (await exists(this.markerOf(seq))) {
      throw new CheckpointError(`checkpoint ${seq} in ${this.dir} is already committed and is not overwritten: is another run writing to this directory?`)
    }
    let bytes: number
    try {
      // The spare folder is used only when it is a real folder of this directory, never a symlink out of it.
      const spares = await lstat(join(this.dir, SPARE_DIR)).catch(() => undefined)
      const sync = !this.volatile
      const reuse = spares?.isDirectory() ? this.spareToReuse(rank) : undefined
      bytes = await writeDurably(path, parts, reuse !== undefined ? { reuse, sync } : { sync })
    } catch (e) {
      throw checkpointFsError('cannot write checkpoint file', path, e)
    }
    return { rank, file: `rank-${rank}.mlf`, path, bytes, headerChecksum, durationMs: performance.now() - t0 }
  }

  /**
   * This rank's file of checkpoint `seq` written by the rank's I/O thread
   * (the memory level; see CheckpointIoThread): the thread runs `job`'s
   * copies, compactions and checksums, then writes `body` behind
   * `headerBytes` bytes left for the header; `header` makes the header part
   * (exactly that long) from the checksums, and the thread writes it and
   * renames the file to its final name. `copied` resolves once the domains
   * the job reads are free again (at once when nothing was started). Files
   * are not fsynced. Refuses to touch an already committed checkpoint.
   *
   * ```ts
   * const { copied, written } = store.writeRankFileStaged(seq, rank, io, { copies, uncompacted, sums: [] }, body, at, async (s) => headerWith(s.copied))
   * ```
   */
  writeRankFileStaged(
    seq: number,
    rank: number,
    io: CheckpointIoThread,
    job: Omit<StageJob, 'body'>,
    body: readonly Uint8Array[],
    headerBytes: number,
    header: (staged: Staged) => Promise<Uint8Array>,
  ): { copied: Promise<void>; written: Promise<RankFileWritten> } {
    const t0 = performance.now()
    const path = this.fileOf(seq, rank)
    const tmp = temporaryNameFor(path)
    // A file-system error becomes a CheckpointError naming the file; the store's own errors pass as they are.
    const failed = (e: unknown): CheckpointError => (e instanceof CheckpointError ? e : checkpointFsError('cannot write checkpoint file', path, e))
    let started: ReturnType<CheckpointIoThread['stage']>
    try {
      mkdirSync(this.pathOf(seq), { recursive: true })
      if (existsSync(this.markerOf(seq))) throw new CheckpointError(`checkpoint ${seq} in ${this.dir} is already committed`)
      const reuse = this.spareToReuse(rank)
      started = io.stage({ ...job, body: { tmp, ...(reuse !== undefined ? { reuse } : {}), at: headerBytes, parts: body } })
    } catch (e) {
      return { copied: Promise.resolve(), written: Promise.reject(failed(e)) }
    }
    const written = (async () => {
      const staged = await started.done.catch((e: unknown) => Promise.reject(failed(e)))
      const head = await header(staged)
      if (head.byteLength !== headerBytes) throw new InternalError(`a rank file's header took ${head.byteLength} bytes where ${headerBytes} were left for it`)
      await io.seal(tmp, path, head).catch((e: unknown) => Promise.reject(failed(e)))
      return { rank, file: `rank-${rank}.mlf`, path, bytes: staged.bytes, headerChecksum: headerChecksumOf(head), durationMs: performance.now() - t0 }
    })()
    return { copied: started.copied, written }
  }

  /**
   * Copies this rank's file of checkpoint `seq` from another level's store
   * (the memory level) into this one, durably and in the background (see
   * copyDurably): the bytes move as they are, the format is the same on
   * every level. `headerChecksum` is the one the source level recorded.
   * With `compress`, the heavy payloads (but those in `compress.raw`) are
   * compressed on `compress.io`'s thread instead and the file is written
   * anew, with its own header (the result's headerChecksum); each payload's
   * checksum is carried over from the source as it is, so a payload damaged
   * before or during the compression is found when it is read back.
   */
  async flushRankFile(seq: number, rank: number, from: CheckpointStore, headerChecksum: number, compress?: FlushCompression, incremental?: { chain: DeltaChain; io?: CheckpointIoThread }): Promise<RankFileWritten & { delta?: DeltaWritten }> {
    if (incremental) return this.flushIncremental(seq, rank, from, incremental.chain, compress?.io ?? incremental.io, compress)
    if (compress) return this.flushCompressed(seq, rank, from, compress)
    const t0 = performance.now()
    const dir = this.pathOf(seq)
    const path = this.fileOf(seq, rank)
    try {
      await makeDirectory(dir)
    } catch (e) {
      throw checkpointFsError('cannot create checkpoint directory', dir, e)
    }
    let bytes: number
    try {
      bytes = await copyDurably(from.fileOf(seq, rank), path)
    } catch (e) {
      throw checkpointFsError('cannot flush checkpoint file', path, e)
    }
    return { rank, file: `rank-${rank}.mlf`, path, bytes, headerChecksum, durationMs: performance.now() - t0 }
  }

  /**
   * Copies this rank's file of checkpoint `seq` from `from` (flushRankFile)
   * and, when it is a delta, each earlier file of its chain this store does
   * not hold yet, with the commit marker `from` has for it: a level that
   * gets only some checkpoints (the shared level, every k-th) then holds
   * every chain its deltas need. Returns the markers of the files carried
   * along (or whose marker is missing here), for the caller to write once
   * every rank's copies are durable.
   */
  async copyWithChain(seq: number, rank: number, from: CheckpointStore, headerChecksum: number): Promise<CommitMarker[]> {
    await this.flushRankFile(seq, rank, from, headerChecksum)
    const source = from.fileOf(seq, rank)
    let needs: number[]
    try {
      needs = (await readHeaderOnly(source)).header.delta?.needs ?? []
    } catch (e) {
      throw checkpointFsError('cannot read checkpoint file to copy its chain', source, e)
    }
    const carried: CommitMarker[] = []
    for (const need of needs) {
      const fileHere = await exists(this.fileOf(need, rank))
      if (fileHere && (await exists(this.markerOf(need)))) continue
      const marker = await from.readMarker(need)
      if (!fileHere) await this.flushRankFile(need, rank, from, marker.ranks[rank].headerChecksum)
      carried.push(marker)
    }
    return carried
  }

  /**
   * flushRankFile with a delta chain (`incremental`): read the source whole,
   * write only the blocks changed since the chain's previous file, or the
   * file as it is when the chain says full (see DeltaChain). With
   * `compress`, a full file is compressed as flushCompressed does, and each
   * held block of a delta on its own (compressedBlocks).
   */
  private async flushIncremental(seq: number, rank: number, from: CheckpointStore, chain: DeltaChain, io?: CheckpointIoThread, compress?: FlushCompression): Promise<RankFileWritten & { delta: DeltaWritten }> {
    const t0 = performance.now()
    const source = from.fileOf(seq, rank)
    let file: Uint8Array
    try {
      // Shared memory when a thread digests the payloads: they cross to it as views.
      file = await readWhole(source, io ? sharedAllocator : plainAllocator)
    } catch (e) {
      throw checkpointFsError('cannot read checkpoint file to flush', source, e)
    }
    const { header, dataStart } = decodeRankFileHeader(file, source)
    const payload = (e: EntryRecord) => file.subarray(dataStart + e.offset, dataStart + e.offset + storedLength(e))
    // The previous file of the chain must still be here (it is committed: pruning keeps what a delta needs).
    const previous = chain.previousSeq
    const present = previous !== undefined && (await exists(this.fileOf(previous, rank)))
    const digests = io ? await io.digest(deltaCandidates(header).map(payload), DELTA_BLOCK_BYTES) : undefined
    if (!compress) {
      const { parts, written } = chain.encode(seq, header, payload, present, digests)
      const w = await this.writeRankFile(seq, rank, parts ?? [file])
      return { ...w, delta: written, durationMs: performance.now() - t0 }
    }
    const { entries, written } = chain.plan(seq, header, payload, present, digests)
    const parts = entries
      ? encodeRankFile({ ...metaOfHeader(header), delta: written.delta }, await compressDeltaEntries(entries, compress))
      : await compressedFile(header, payload, compress)
    const w = await this.writeRankFile(seq, rank, parts)
    return { ...w, delta: written, durationMs: performance.now() - t0 }
  }

  /** flushRankFile with `compress`: read the source whole, compress on the thread, write the file anew. */
  private async flushCompressed(seq: number, rank: number, from: CheckpointStore, compress: FlushCompression): Promise<RankFileWritten> {
    const t0 = performance.now()
    const source = from.fileOf(seq, rank)
    let file: Uint8Array
    try {
      // Shared memory: the payloads cross to the thread as views.
      file = await readWhole(source, sharedAllocator)
    } catch (e) {
      throw checkpointFsError('cannot read checkpoint file to flush', source, e)
    }
    const { header, dataStart } = decodeRankFileHeader(file, source)
    const payload = (e: EntryRecord) => file.subarray(dataStart + e.offset, dataStart + e.offset + storedLength(e))
    const w = await this.writeRankFile(seq, rank, await compressedFile(header, payload, compress))
    return { ...w, durationMs: performance.now() - t0 }
  }

  /**
   * Makes checkpoint `seq` complete by writing its commit marker, after making
   * the checkpoint directory's own entry durable. Call once, after every rank's
   * writeRankFile has resolved; `marker.ranks` are their results in rank order.
   */
  async commit(seq: number, marker: CommitMarker): Promise<void> {
    if (marker.seq !== seq) throw new ConfigError(`commit marker for checkpoint ${marker.seq} passed to commit(${seq})`)
    const bytes = encodeMarker(marker)
    const path = this.markerOf(seq)
    try {
      if (!this.volatile) await syncDirectory(this.dir)
      await writeDurably(path, [bytes], { sync: !this.volatile })
    } catch (e) {
      throw checkpointFsError('cannot write commit marker', path, e)
    }
  }

  /** Reads and checks the commit marker of `seq`; CheckpointCorruptError when missing or damaged. */
  async readMarker(seq: number): Promise<CommitMarker> {
    const path = this.markerOf(seq)
    let bytes: Uint8Array
    try {
      bytes = await readFile(path)
    } catch (e) {
      if (errorCode(e) === 'ENOENT') throw new CheckpointCorruptError(path, 'the commit marker is missing: the checkpoint was not completed')
      throw checkpointFsError('cannot read commit marker', path, e)
    }
    return parseMarker(bytes, path)
  }

  /**
   * Every checkpoint directory, oldest first; an absent directory lists as
   * empty. A folder named like a checkpoint that is not molotof's (see
   * isMolotofFolder) is listed `foreign`, without files: its number is taken,
   * nothing in it is read or deleted.
   */
  async list(): Promise<CheckpointSummary[]> {
    const seqs = await this.sequenceNumbers(true)
    const out: CheckpointSummary[] = []
    for (const seq of seqs) {
      const path = this.pathOf(seq)
      let names: string[]
      try {
        names = await readdir(path)
      } catch (e) {
        // Pruned by another process between the two readdirs: it no longer exists.
        if (errorCode(e) === 'ENOENT') continue
        // An unreadable checkpoint (EACCES, EIO) is an unusable one, as a damaged one is: the previous ones remain.
        out.push({ seq, path, complete: false, files: [], problem: `the directory cannot be read: ${explainFsError(e)}`, problemPath: path })
        continue
      }
      if (!isMolotofFolder(path, names)) {
        out.push({ seq, path, complete: false, files: [], foreign: true, problem: NOT_MOLOTOFS, problemPath: path })
        continue
      }
      const files = await rankFilesIn(path, names)
      const summary: CheckpointSummary = { seq, path, complete: false, files }
      if (!names.includes(MARKER)) {
        summary.problem = NO_MARKER
      } else {
        try {
          summary.marker = await this.readMarker(seq)
          summary.complete = true
        } catch (e) {
          summary.problem = e instanceof CheckpointCorruptError ? e.reason : (e as Error).message
        }
      }
      out.push(summary)
    }
    const newestComplete = out.reduce((m, s) => (s.complete ? Math.max(m, s.seq) : m), -1)
    for (const s of out) {
      if (!s.complete && s.problem === NO_MARKER && s.seq > newestComplete) {
        s.uncommitted = true
        s.problem = 'not committed: its write was interrupted when its run stopped (never a recovery line)'
      }
    }
    return out
  }

  /**
   * Checks that checkpoint `seq` can be restored by a run of `size` ranks:
   * the marker is present and intact, and each rank file (all, or
   * `options.ranks`) is present, has the size the marker records, a valid
   * header matching the marker, and (with `checksums`) intact payloads.
   * Never throws for bad data: every problem is reported with its file.
   */
  async validate(seq: number, size: number, options: ValidateOptions = {}): Promise<ValidationReport> {
    const problems: ValidationProblem[] = []
    let marker: CommitMarker
    try {
      marker = await this.readMarker(seq)
    } catch (e) {
      problems.push({ file: this.markerOf(seq), reason: reasonOf(e) })
      return { ok: false, problems }
    }
    if (marker.seq !== seq) problems.push({ file: this.markerOf(seq), reason: `the marker belongs to checkpoint ${marker.seq}` })
    if (marker.size !== size) {
      problems.push({ file: this.markerOf(seq), reason: `the checkpoint was taken with ${marker.size} ranks, this run has ${size}` })
      return { ok: false, problems }
    }
    const ranks = options.ranks ?? Array.from({ length: size }, (_, r) => r)
    for (const rank of ranks) {
      const reason = await this.checkRankFile(seq, rank, marker, options.checksums ?? false)
      if (reason !== undefined) problems.push({ file: this.fileOf(seq, rank), reason, rank })
    }
    return { ok: problems.length === 0, problems }
  }

  /**
   * Reads and fully validates one rank file (every checksum); throws
   * CheckpointCorruptError or CheckpointError. The file is read into memory
   * from `allocate` (a rank's communicator's: a warm spare's is touched ahead).
   */
  async loadRankFile(seq: number, rank: number, allocate: BufferAllocator = plainAllocator): Promise<DecodedRankFile> {
    const file = await this.loadOneFile(seq, rank, allocate)
    // A delta file comes back whole: its chain read and assembled (every block and payload checksum checked).
    return assembleChain(file, this.fileOf(seq, rank), (s) => this.loadOneFile(s, rank, plainAllocator), allocate)
  }

  /** One rank file read and checked on its own (a delta file's entries hold only their blocks). */
  private async loadOneFile(seq: number, rank: number, allocate: BufferAllocator): Promise<DecodedRankFile> {
    const path = this.fileOf(seq, rank)
    let bytes: Uint8Array
    try {
      bytes = await readWhole(path, allocate)
    } catch (e) {
      if (errorCode(e) === 'ENOENT') throw new CheckpointCorruptError(path, 'the file is missing')
      throw checkpointFsError('cannot read checkpoint file', path, e)
    }
    return decodeRankFile(bytes, path)
  }

  /**
   * Deletes all but the newest `keep` complete checkpoints, and incomplete
   * ones older than the newest complete checkpoint; nothing newer than the
   * newest complete checkpoint is touched, since it may be being written right
   * now. Temporary files left by interrupted writes in the remaining (finished)
   * checkpoints are deleted too. With `runId`, the complete checkpoints of
   * other runs are neither counted nor deleted: they are not this run's to
   * discard. `pinned` checkpoints are kept whatever their age (the memory copy
   * a background flush is reading). `temporaryFiles: false` leaves temporary
   * files alone: other ranks may still be committing older checkpoints here
   * (the earlier files of a delta's chain carried to the shared level).
   */
  async prune(keep: number, options: { runId?: string; pinned?: readonly number[]; temporaryFiles?: boolean } = {}): Promise<PruneResult> {
    if (!Number.isSafeInteger(keep) || keep < 1) throw new ConfigError(`prune needs to keep at least 1 checkpoint (got ${keep})`)
    const all = await this.list()
    const theirs = (s: CheckpointSummary) => s.foreign === true || (options.runId !== undefined && s.complete && s.marker?.runId !== options.runId)
    const complete = all.filter((s) => s.complete && !theirs(s)).map((s) => s.seq)
    if (complete.length === 0) return { removed: [], temporaryFiles: 0 }
    const newest = complete[complete.length - 1]
    const kept = new Set([...complete.slice(-keep), ...(options.pinned ?? [])])
    // A kept delta keeps every file of its chain (its base and the deltas before it), whatever their age.
    for (const s of all) if (kept.has(s.seq)) for (const need of await this.chainNeeds(s)) kept.add(need)
    const removed: number[] = []
    const left: { seq: number; reason: string }[] = []
    for (const s of all) {
      if (s.seq < newest && !kept.has(s.seq) && !theirs(s)) {
        try {
          await this.remove(s.seq, { keepSpares: true })
        } catch (e) {
          // An unusable checkpoint that cannot be deleted (EACCES) must not fail the commit of a good one.
          if (s.complete) throw e
          left.push({ seq: s.seq, reason: (e as Error).message })
          continue
        }
        removed.push(s.seq)
      }
    }
    const temporaryFiles = options.temporaryFiles === false ? 0 : await this.removeTemporaryFiles({ upTo: newest })
    return { removed, temporaryFiles, ...(left.length > 0 ? { left } : {}) }
  }

  /**
   * Deletes the temporary files of interrupted writes: in every checkpoint, or
   * only up to `upTo`. Call without `upTo` only when no rank is writing (e.g.
   * at the start of a recovery, before the first checkpoint point).
   */
  async removeTemporaryFiles(options: { upTo?: number; onRemoved?: (bytes: number) => void } = {}): Promise<number> {
    let count = 0
    for (const seq of await this.sequenceNumbers(true)) {
      if (options.upTo !== undefined && seq > options.upTo) continue
      const dir = this.pathOf(seq)
      // A directory that cannot be listed (EACCES) is an unusable checkpoint (see list): nothing to clean in it.
      const names = await namesIn(dir).catch(() => [])
      if (!isMolotofFolder(dir, names)) continue
      for (const name of names) {
        if (!isTemporaryName(name)) continue
        try {
          const bytes = options.onRemoved ? (await lstat(join(dir, name))).size : 0
          await unlink(join(dir, name))
          options.onRemoved?.(bytes)
          count++
        } catch (e) {
          if (errorCode(e) !== 'ENOENT') throw checkpointFsError('cannot delete temporary file', join(dir, name), e)
        }
      }
    }
    return count
  }

  /**
   * Deletes checkpoint `seq`, marker first, so an interrupted delete leaves an
   * incomplete checkpoint, never a "complete" one with missing files. With
   * `keepSpares`, its rank files become the spares the next writes overwrite.
   * A folder that is not molotof's (see isMolotofFolder) is left as it is:
   * false then.
   */
  async remove(seq: number, options: { keepSpares?: boolean } = {}): Promise<boolean> {
    const dir = this.pathOf(seq)
    try {
      if (!isMolotofFolder(dir, namesOrNone(dir))) return false
      await rm(this.markerOf(seq), { force: true })
      if (options.keepSpares) await this.keepAsSpares(dir)
      removeStoreFolder(dir)
      return true
    } catch (e) {
      throw checkpointFsError('cannot delete checkpoint', dir, e)
    }
  }

  /**
   * remove(seq, { keepSpares: true }) done synchronously, for the memory
   * level: on tmpfs it takes microseconds, and the rank that prunes does not
   * hop through the thread pool at its checkpoint point.
   */
  discardSync(seq: number): boolean {
    const dir = this.pathOf(seq)
    try {
      const names = namesOrNone(dir)
      if (!isMolotofFolder(dir, names)) return false
      rmSync(this.markerOf(seq), { force: true })
      const files = names.map((n) => RANK_FILE.exec(n)).filter((m): m is RegExpExecArray => m !== null)
      if (files.length > 0) mkdirSync(join(this.dir, SPARE_DIR), { recursive: true })
      for (const m of files) {
        try {
          renameSync(join(dir, m[0]), this.spareOf(Number(m[1])))
        } catch {
          // One spare fewer (a rank racing for its spare, a vanished file): the file goes with its directory.
        }
      }
      removeStoreFolder(dir)
      return true
    } catch (e) {
      throw checkpointFsError('cannot delete checkpoint', dir, e)
    }
  }

  /** Deletes the spare files (see spareOf), and their folder when nothing else is in it; a spare folder that is not molotof's stays. */
  discardSpares(): void {
    const dir = join(this.dir, SPARE_DIR)
    try {
      if (isMolotofFolder(dir, namesOrNone(dir))) removeStoreFolder(dir)
    } catch (e) {
      throw checkpointFsError('cannot delete spare files', dir, e)
    }
  }

  /** Moves the rank files of a checkpoint directory (already uncommitted) to the spare slots, replacing older spares. */
  private async keepAsSpares(dir: string): Promise<void> {
    const names = await namesIn(dir)
    const files = names.map((n) => RANK_FILE.exec(n)).filter((m): m is RegExpExecArray => m !== null)
    if (files.length === 0) return
    await makeDirectory(join(this.dir, SPARE_DIR))
    for (const m of files) {
      // Any failure (a rank racing for its spare, a vanished file) only means one spare fewer:
      // the file is deleted with its directory right after, and a spare is only a speed-up.
      await rename(join(dir, m[0]), this.spareOf(Number(m[1]))).catch(() => undefined)
    }
  }

  /**
   * The sequence number for a new checkpoint: one more than molotof's newest
   * here (complete or not), 0 when there is none; a number a folder or file
   * of someone else's has is skipped (see CheckpointNumbers).
   */
  async nextSeq(): Promise<number> {
    const { first, taken } = numberingOf(await this.list(), await this.numbersInUse())
    return new CheckpointNumbers(first, taken).next
  }

  /** Every number an entry of the directory is named with (`ckpt-<n>`, folder or file, molotof's or not), ascending. */
  numbersInUse(): Promise<number[]> {
    return this.sequenceNumbers(false)
  }

  /**
   * Throws CheckpointError if the directory holds checkpoints written by
   * another program (another fingerprint): resuming from them would restore
   * foreign data, and pruning would delete someone else's checkpoints.
   * Checks every commit marker, or, when there is none yet, any readable rank file header.
   */
  async assertFingerprint(fingerprint: string): Promise<void> {
    const all = await this.list()
    const foreign = (seq: number, found: string): CheckpointMismatchError =>
      new CheckpointMismatchError(
        `the checkpoint directory ${this.dir} holds checkpoints of another program ` +
          `(checkpoint ${seq} has fingerprint ${JSON.stringify(found)}, this program's is ${JSON.stringify(fingerprint)}); ` +
          'use another checkpoint directory, or delete these checkpoints to start afresh',
      )
    const markers = all.filter((s) => s.marker !== undefined)
    for (const s of markers) if (s.marker!.fingerprint !== fingerprint) throw foreign(s.seq, s.marker!.fingerprint)
    if (markers.length > 0) return
    for (const s of all) {
      for (const f of s.files) {
        // A header that cannot be read proves nothing either way; recovery validates every file it uses.
        const info = await readHeaderOnly(join(s.path, f.file)).catch(() => undefined)
        if (info && info.header.fingerprint !== fingerprint) throw foreign(s.seq, info.header.fingerprint)
      }
    }
  }

  /** Sequence numbers present in the directory, ascending (`dirsOnly`: skip entries that are not directories). */
  private async sequenceNumbers(dirsOnly: boolean): Promise<number[]> {
    let entries: import('node:fs').Dirent[]
    try {
      entries = await readdir(this.dir, { withFileTypes: true })
    } catch (e) {
      if (errorCode(e) === 'ENOENT') return []
      throw checkpointFsError('cannot list checkpoint directory', this.dir, e)
    }
    const seqs: number[] = []
    for (const d of entries) {
      const m = CKPT_DIR.exec(d.name)
      if (m && (!dirsOnly || d.isDirectory())) seqs.push(Number(m[1]))
    }
    return seqs.sort((a, b) => a - b)
  }

  /** The checkpoints the delta files of `s` need (read from their headers; a header that cannot be read needs none). */
  private async chainNeeds(s: CheckpointSummary): Promise<number[]> {
    // Every rank's chain as its marker records it: a directory holding some ranks' files (a node's) or none (parity
    // slices) keeps what the others' chains need too, so a lost rank's base stays rebuildable from the survivors.
    const needs = new Set<number>(s.marker?.ranks.flatMap((r) => r.needs ?? []) ?? [])
    for (const f of s.files) {
      // An unreadable header is that checkpoint's problem (it is not restorable); it protects nothing.
      const info = await readHeaderOnly(join(s.path, f.file)).catch(() => undefined)
      for (const n of info?.header.delta?.needs ?? []) needs.add(n)
    }
    return [...needs]
  }

  /** Why rank `rank`'s file of `seq` is unusable, or undefined when it is fine. */
  private async checkRankFile(seq: number, rank: number, marker: CommitMarker, checksums: boolean): Promise<string | undefined> {
    const path = this.fileOf(seq, rank)
    const rec = marker.ranks[rank]
    if (rec === undefined) return `the commit marker has no record of rank ${rank}`
    try {
      const st = await stat(path)
      if (st.size !== rec.bytes) return `the file is ${st.size} bytes, the commit marker records ${rec.bytes} (truncated or overwritten)`
      let header: RankFileHeader
      let headerChecksum: number
      if (checksums) {
        const file = decodeRankFile(await readWhole(path, plainAllocator), path)
        ;({ header, headerChecksum } = file)
        // A delta is usable only with its whole chain: assembling it checks every file of it.
        if (header.delta) await assembleChain(file, path, (s) => this.loadOneFile(s, rank, plainAllocator))
      } else {
        ;({ header, headerChecksum } = await readHeaderOnly(path))
        for (const need of header.delta?.needs ?? []) {
          if (!(await exists(this.fileOf(need, rank)))) return `checkpoint ${need}, which this delta needs, has no file for rank ${rank}`
        }
      }
      if (headerChecksum !== rec.headerChecksum) return 'the header differs from the one the commit marker records (overwritten?)'
      const mismatch = headerMismatch(header, marker, rank)
      if (mismatch !== undefined) return mismatch
      return undefined
    } catch (e) {
      if (errorCode(e) === 'ENOENT') return 'the file is missing'
      return reasonOf(e)
    }
  }
}

/** A field of a rank header that disagrees with the commit marker. */
function headerMismatch(h: RankFileHeader, m: CommitMarker, rank: number): string | undefined {
  if (h.rank !== rank) return `the file holds rank ${h.rank}'s data`
  if (h.size !== m.size) return `the file was written by a run of ${h.size} ranks, the marker says ${m.size}`
  if (h.skeleton !== m.skeleton || h.step !== m.step) {
    return `the file is from skeleton ${h.skeleton} step ${h.step}, the marker says skeleton ${m.skeleton} step ${m.step}`
  }
  if (h.fingerprint !== m.fingerprint) return `the file was written by another program (fingerprint ${JSON.stringify(h.fingerprint)})`
  if (h.runId !== m.runId) return `the file was written by another run (${JSON.stringify(h.runId ?? null)}, the marker says ${JSON.stringify(m.runId ?? null)})`
  return undefined
}

/** The rank files among `names` (entries of `dir`) that are regular files, with their sizes, in rank order. */
async function rankFilesIn(dir: string, names: readonly string[]): Promise<CheckpointSummary['files']> {
  const files: CheckpointSummary['files'] = []
  for (const name of names) {
    const m = RANK_FILE.exec(name)
    if (!m) continue
    const st = await statIfPresent(join(dir, name))
    if (st?.isFile()) files.push({ rank: Number(m[1]), file: name, bytes: st.size })
  }
  return files.sort((a, b) => a.rank - b.rank)
}

function reasonOf(e: unknown): string {
  if (e instanceof CheckpointCorruptError) return e.reason
  if (e instanceof CheckpointError) return e.message
  return explainFsError(e)
}

async function exists(path: string): Promise<boolean> {
  return (await statIfPresent(path)) !== undefined
}

/** Bytes per element of an entry's dtype: what its bytes are shuffled by before compression. */
function widthOf(e: { dtype?: EntryRecord['dtype'] }): number {
  return e.dtype === undefined ? 1 : DTYPES[e.dtype].BYTES_PER_ELEMENT
}

/** A full rank file (`header`, payloads by `payload`) encoded anew with its heavy payloads compressed on `compress.io`'s thread (but those in `compress.raw`). */
async function compressedFile(header: RankFileHeader, payload: (e: EntryRecord) => Uint8Array, compress: FlushCompression): Promise<Uint8Array[]> {
  const chosen = header.entries.filter((e) => e.kind === 'heavy' && e.stored === undefined && e.length > 0 && !compress.raw.has(e.name))
  const results = await compress.io.compress(chosen.map((e) => ({ bytes: payload(e), width: widthOf(e) })))
  const compressed = new Map(chosen.map((e, i) => [e.name, results[i]]))
  const entries: EntryInput[] = header.entries.map((e) => {
    const base = { name: e.name, kind: e.kind, ...(e.dtype !== undefined ? { dtype: e.dtype } : {}), ...(e.box !== undefined ? { box: e.box } : {}) }
    const c = compressed.get(e.name)
    if (c) return { ...base, bytes: c.stored, checksum: c.checksum, encoded: { codec: PAYLOAD_CODEC, shuffle: widthOf(e), length: e.length, checksum: e.checksum } }
    if (e.stored) return { ...base, bytes: payload(e), checksum: e.stored.checksum, encoded: { codec: e.stored.codec, shuffle: e.stored.shuffle, length: e.length, checksum: e.checksum } }
    return { ...base, bytes: payload(e), checksum: e.checksum }
  })
  return encodeRankFile(metaOfHeader(header), entries)
}

/** The entries of a delta file (DeltaChain.plan) with each held block compressed on `compress.io`'s thread (but the entries in `compress.raw`). */
async function compressDeltaEntries(entries: readonly EntryInput[], compress: FlushCompression): Promise<EntryInput[]> {
  const chosen = entries.filter((e) => e.delta !== undefined && e.delta.blocks.held.length > 0 && !compress.raw.has(e.name))
  const pieces = chosen.map((e) => e.bytes as readonly Uint8Array[])
  const results = await compress.io.compress(chosen.flatMap((e, i) => pieces[i].map((bytes) => ({ bytes, width: widthOf(e) }))))
  const out = new Map<string, EntryInput>()
  let at = 0
  for (const [i, e] of chosen.entries()) {
    out.set(e.name, compressedBlocks(e, pieces[i], results.slice(at, at + pieces[i].length), widthOf(e)))
    at += pieces[i].length
  }
  return entries.map((e) => out.get(e.name) ?? e)
}

/** stat(), or undefined when nothing is there (a file pruned meanwhile); any other failure is a CheckpointError. */
async function statIfPresent(path: string): Promise<import('node:fs').Stats | undefined> {
  try {
    return await stat(path)
  } catch (e) {
    if (errorCode(e) === 'ENOENT') return undefined
    throw checkpointFsError('cannot read', path, e)
  }
}

/** The entries of a directory; none when it does not exist (only ENOENT means empty; any other failure is a CheckpointError). */
async function namesIn(dir: string): Promise<string[]> {
  try {
    return await readdir(dir)
  } catch (e) {
    if (errorCode(e) === 'ENOENT') return []
    throw checkpointFsError('cannot list directory', dir, e)
  }
}

/**
 * Reads a whole file into a fresh ArrayBuffer (offset 0), so 8-byte-aligned
 * payloads become typed-array views without a copy (readFile may hand out a
 * slice of a shared pool at an arbitrary offset for small files).
 */
async function readWhole(path: string, allocate: BufferAllocator): Promise<Uint8Array> {
  const fh = await open(path, 'r')
  try {
    const size = (await fh.stat()).size
    const buf = new Uint8Array(allocate(readBufferBytes(size)), 0, size)
    let done = 0
    while (done < size) {
      const { bytesRead } = await fh.read(buf, done, size - done, done)
      if (bytesRead === 0) break
      done += bytesRead
    }
    return buf.subarray(0, done)
  } finally {
    await fh.close()
  }
}

const MiB = 2 ** 20

/**
 * The size of the buffer a rank file of `fileBytes` is read into: from 1 MiB
 * on, rounded up to whole MiB, so that every rank asks for the same size
 * (their headers differ by a few bytes) and a warm spare can have that
 * buffer's pages touched ahead (runtime/rank/warm-memory.ts).
 *
 * ```ts
 * readBufferBytes(16 * 2 ** 20 + 700)   // 17 MiB
 * ```
 */
export function readBufferBytes(fileBytes: number): number {
  return fileBytes < MiB ? fileBytes : Math.ceil(fileBytes / MiB) * MiB
}
