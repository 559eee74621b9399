import { performance } from 'node:perf_hooks'
import type { DomainDesc } from '../../domains/desc.js'
import type { Domain } from '../../domains/domain.js'
import { bytesOf, dtypeOf } from '../../domains/dtype.js'
import { CheckpointError, ConfigError, InternalError } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import type { FaultToleranceConfig, ProgramIdentity } from '../config.js'
import type { CheckpointAt, CheckpointControl } from '../control.js'
import type { CheckpointEvent, CheckpointLevel } from '../events.js'
import type { CodeIdentity } from '../format/code-record.js'
import { encodeRankFile, PLACEHOLDER_CHECKSUM, type EntryInput, type RankFileMeta } from '../format/rank-file.js'
import { encodeLight } from '../light/codec.js'
import { READ_DIGEST, readDigest, replayDigests } from '../recovery/replay-check.js'
import type { DefaultEntry } from '../registry.js'
import type { SkeletonState } from '../skeleton-hooks.js'
import type { CheckpointStore, RankFileWritten } from '../store/checkpoint-store.js'
import { CheckpointIoThread, type Staged } from '../store/io-thread.js'
import type { CommitMarker, MembershipRecord, RankFileRecord } from '../store/marker.js'
import { availableMemoryBytes } from '../store/memory-level.js'
import { DeltaChain } from '../store/delta-chain.js'
import { domainPayload, StagingBuffers } from '../store/staging.js'
import { BackgroundWork } from './background.js'
import type { CheckpointCopies } from './copies.js'
import type { Level } from './levels.js'
import type { ClockState } from './vote.js'
import type { CheckpointNumbers } from '../store/numbering.js'
import { formatSize } from '../../util/bytes.js'

/** What one rank's write (or flush) of a checkpoint came to. */
interface WriteResult {
  written?: RankFileRecord
  failure?: string
  /** From the checkpoint point to the file being there (ms). */
  ms: number
}

/** One rank's record of a disk checkpoint's write, as the commit gathers it. */
interface DurableRecord extends WriteResult {
  /** Rank 0's word: this checkpoint also goes to the shared level. */
  shared: boolean
}

/** A checkpoint whose file is being written on this rank and that is not committed yet. */
interface PendingCheckpoint {
  seq: number
  skeleton: number
  step: number
  clock: ClockState
  started: number
  durable: Promise<WriteResult>
  /** This rank's write has finished (successfully or not). */
  done: boolean
  /** Written in the background (a memory checkpoint, or a disk one flushed from memory), not at the checkpoint point. */
  background: boolean
  /** How long the compute waited at the checkpoint point for it (ms, this rank). */
  stallMs: number
  /** A memory checkpoint that is also a disk one: flushed once committed in memory. */
  flush?: boolean
  /** Heavy entries the flush stores raw with compression on (registered `{ compress: false }`). */
  raw?: ReadonlySet<string>
}

/**
 * A level the committer writes to (memory and disk: the levels the vote
 * writes to), what is in flight on it and the copies it feeds.
 */
interface OwnLevel {
  readonly level: Level
  /** Its checkpoint being written (memory) or flushed (disk) in the background, not committed yet. */
  pending: PendingCheckpoint | undefined
  /** The copies of its committed checkpoints to the levels it feeds (levels.ts), when the run makes any. */
  readonly copies: CheckpointCopies | undefined
}

/**
 * Writing this rank's file of a checkpoint and committing it with the other
 * ranks, on a level.
 *
 * Without a memory level a disk checkpoint is written and committed at the
 * checkpoint point. With one, the checkpoint point only copies the payloads
 * to shared staging buffers (the stall: one memory copy); a helper thread
 * computes their CRCs, the thread pool writes the file to RAM, and the
 * memory checkpoint is committed at the next collective place where every
 * rank's file is there — only then is the previous memory checkpoint
 * discarded (double buffering). A disk checkpoint is then flushed from that
 * memory copy in the background and committed in the same way. The
 * collective places: `commitIfAllDurable` at votes (or at every checkpoint
 * point when the run does not vote), the next checkpoint, the end of a
 * skeleton, preemption and interruption (`finishPending(true)`). A commit is
 * collective: rank 0 writes the level's `COMMIT` marker once every rank's
 * file is there (the lowest rank of each directory, when ranks have their
 * own: `{node}` or `{rank}` in the directory name); a failure anywhere fails every rank alike and leaves the
 * previous checkpoint of that level intact.
 *
 * The levels it writes are a list, fastest first (`own`: memory, disk),
 * walked where every level is treated alike (what is in flight, the poll,
 * committing everything); the memory and disk entries of that list are also
 * named where the protocol differs (the memory write, the flush from it).
 *
 * ```ts
 * const commits = new CheckpointCommitter(comm, cfg, id, await openLevels(comm, cfg, policies), new CheckpointNumbers(firstSeq), { onCheckpoint, control })
 * await commits.write(state, clock, performance.now(), 'memory')
 * await commits.finishPending(true)   // every rank, at the same point
 * ```
 */
export class CheckpointCommitter {
  /** The levels this committer writes, fastest first: memory (when the run has it), disk. */
  private readonly own: OwnLevel[]
  /** The memory level of `own`, when the run has one: checkpoints are written there and flushed to disk. */
  private readonly memory: OwnLevel | undefined
  /** The disk level of `own`. */
  private readonly disk: OwnLevel
  /** Rank 0: the commit marker (and prune) of a flushed disk checkpoint, written in the background; resolves to a failure message. */
  private markerWrite: Promise<string | undefined> | undefined
  private readonly staging = new StagingBuffers()
  /** Copies of the payloads of the memory checkpoint in flight (SharedArrayBuffers: the checksum thread reads them). */
  private readonly shared = new StagingBuffers(true)
  private readonly io = new CheckpointIoThread()
  /** The disk flush's thread (`compress`: compression; `incremental`: block digests): its own, so the memory level's copies never wait behind it. */
  private readonly flushIo: CheckpointIoThread | undefined
  /** Every write, flush and marker started in the background, until it ends (see `settle`). */
  private readonly background = new BackgroundWork()
  /** Memory checkpoints present (rank 0 discards all but the newest and the one being flushed). */
  private memoryKept: number[]
  /** Skeletons whose memory checkpoints were checked against free RAM. */
  private readonly ramChecked = new Set<number>()

  constructor(
    private readonly comm: Communicator,
    private readonly cfg: FaultToleranceConfig,
    private readonly id: ProgramIdentity,
    /** The run's levels (levels.ts): the committer writes to the memory and disk ones and commits them. */
    levels: readonly Level[],
    /** The numbers of the next checkpoints (the same on every rank, over all levels). */
    private readonly numbers: CheckpointNumbers,
    private readonly hooks: { onCheckpoint?: (e: CheckpointEvent) => void; control?: CheckpointControl } = {},
    /** The run lineage and program code every file and marker carries (see identity/run.ts). */
    private readonly stamp: { runId?: string; code?: CodeIdentity; membership?: MembershipRecord } = {},
    /**
     * The copies of committed checkpoints, one per level copied (see
     * levels.ts): the partner and shared copies of disk checkpoints, the
     * partner copies of memory checkpoints (in the partner's memory level).
     * Disk's first: commitIfAllDurable gives each its digit in this order.
     */
    private readonly allCopies: readonly CheckpointCopies[] = [],
  ) {
    // The levels the vote writes to, in the order of the run's levels (fastest first).
    this.own = levels.filter((l) => l.policy !== undefined && !l.copy).map((level) => ({ level, pending: undefined, copies: allCopies.find((c) => c.from === level.name) }))
    const disk = this.own.find((w) => w.level.name === 'disk')
    if (!disk) throw new InternalError('a run without a disk level')
    this.disk = disk
    this.memory = this.own.find((w) => w.level.name === 'memory')
    this.memoryKept = this.memory ? this.memory.level.listed.map((s) => s.seq) : []
    this.flushIo = cfg.compress === true || cfg.incremental ? new CheckpointIoThread() : undefined
    // Deltas are made by the background flush from the memory copy.
    if (cfg.incremental && !this.memory) throw new ConfigError('incremental checkpoints need a memory level (memory or async): the background flush makes the deltas')
    this.chain = cfg.incremental ? new DeltaChain(cfg.incremental.every) : undefined
  }

  /**
   * With a memory level: start its I/O thread now, so that it has loaded by
   * the first checkpoint instead of loading in that checkpoint's stall (see
   * CheckpointIoThread.warm). Called once the run is sure to go on (a
   * refused resume would leave the thread idle), and stopped by `settle`.
   */
  startIoThread(): void {
    // A thread that fails to start fails the first memory checkpoint, which names it: nothing to do here.
    if (this.memory) void this.io.warm().catch(() => undefined)
  }

  /** This rank's chain of incremental disk checkpoints (`incremental`). */
  private readonly chain: DeltaChain | undefined

  /** The number the next checkpoint will get. */
  get nextSeq(): number {
    return this.numbers.next
  }

  /** The number the last checkpoint got (undefined before the first). */
  get lastSeq(): number | undefined {
    return this.numbers.last
  }

  /**
   * Wait until no file work this rank started in the background is left
   * (memory writes, flushes, markers, partner and shared copies), then stop
   * the I/O thread. For a run stopped from outside whose process runs the
   * program again: its communicator is closed first, so the copies waiting
   * for a peer end at once and only file I/O is waited for.
   */
  async settle(): Promise<void> {
    const all = [this.background, ...this.allCopies.map((c) => c.background)]
    while (!all.every((b) => b.idle)) for (const b of all) await b.settled()
    await this.io.close()
    await this.flushIo?.close()
  }

  /** A checkpoint is being written or flushed in the background and not committed yet (plain loops: asked at checkpoint points). */
  get inFlight(): boolean {
    for (let j = 0; j < this.own.length; j++) if (this.own[j].pending !== undefined) return true
    for (let i = 0; i < this.allCopies.length; i++) if (this.allCopies[i].inFlight) return true
    return false
  }

  /**
   * Commit what was written in the background if every rank's write is done
   * (collective: one allreduce while anything is in flight). One sum answers
   * every level, one digit in base size+1 each: the own levels' writes not
   * done count 1 in theirs, the slowest level lowest (with a memory level: a
   * flush not done counts 1, a memory write size+1), and the copies of
   * level i of `allCopies` count 1 in the digit above them, (size+1)^(n+i)
   * for n own levels; the highest digit is committed first.
   */
  async commitIfAllDurable(): Promise<void> {
    if (!this.inFlight) return
    const n = this.own.length
    // What was in flight when this rank polled: only that is committed (a commit may start a flush meanwhile).
    const polled = this.own.map((w) => w.pending)
    const copying = this.allCopies.map((c) => c.inFlight)
    const base = this.comm.size + 1
    let notDone = 0
    for (const [j, p] of polled.entries()) if (p && !p.done) notDone += base ** (n - 1 - j)
    for (const [i, c] of this.allCopies.entries()) if (copying[i] && !c.done) notDone += base ** (n + i)
    const sum = await this.comm.allreduce(notDone, 'sum')
    const doneEverywhere = (digit: number) => Math.floor(sum / base ** digit) % base === 0
    for (let i = this.allCopies.length - 1; i >= 0; i--) if (copying[i] && doneEverywhere(n + i)) await this.allCopies[i].finish()
    for (const [j, p] of polled.entries()) if (p && doneEverywhere(n - 1 - j) && this.own[j].pending === p) await this.commitUpTo(j)
  }

  /**
   * Commit everything in flight (collective: all ranks reach it together):
   * every own level's checkpoint, fastest first (the memory checkpoint, then
   * the disk flush). `final` (end of a skeleton, preemption, interruption)
   * also waits for a flush started by that commit, for the copies and, on
   * rank 0, for the disk commit marker written in the background.
   */
  async finishPending(final = false): Promise<void> {
    await this.commitUpTo(this.own.length - 1)
    // The end of a skeleton, a preemption or an interruption also waits for the copies of the last checkpoints.
    if (final) for (const c of this.allCopies) await c.finish(true)
    if (final && this.memory) await this.agreeOnBackgroundMarker()
  }

  /**
   * Commit the checkpoints in flight on the own levels up to `j`, fastest
   * first: a slower level's checkpoint is committed only after the faster
   * ones (a disk flush after the memory checkpoint it may come from).
   */
  private async commitUpTo(j: number): Promise<void> {
    for (let k = 0; k <= j; k++) {
      const w = this.own[k]
      if (w === this.memory) await this.finishMemory()
      else {
        const p = w.pending
        w.pending = undefined
        if (p) await this.commit(p)
      }
    }
  }

  /**
   * Every rank leaves a final point only once rank 0's background marker is
   * written: a run stopped right after it (interruption, preemption, the
   * end) has that checkpoint committed, and a failure to write it fails
   * every rank alike.
   */
  private async agreeOnBackgroundMarker(): Promise<void> {
    const failure = await this.markerFailure()
    const why = (await this.comm.allgather(failure)).find((f) => f !== undefined)
    if (why !== undefined) throw new CheckpointError(why)
  }

  /** Rank 0: wait for the background marker write; its failure message, if any. */
  private async markerFailure(): Promise<string | undefined> {
    const m = this.markerWrite
    this.markerWrite = undefined
    return m ? await m : undefined
  }

  /**
   * Write this rank's file of a checkpoint of `state` to `level` and commit
   * it. With a memory level every checkpoint goes to memory, in the
   * background; a `disk` one is then flushed from there. `final` (the end of
   * a skeleton, a preemption or an interruption) commits everything before
   * returning.
   */
  async write(state: SkeletonState, clock: ClockState, started: number, level: CheckpointLevel, final = false): Promise<void> {
    await this.makeRoom(clock, started, level)
    const seq = this.numbers.take()
    const meta = this.metaOf(state)
    const memory = this.memory?.level.store
    if (memory === undefined) {
      await this.writeAndCommitDisk(state, clock, started, seq, meta)
      return
    }
    const pending = await this.stageMemoryWrite(state, clock, started, seq, meta, level, memory)
    this.memory!.pending = pending
    // The point is over: the I/O thread may take a core now.
    this.io.release()
    if (final) await this.finishPending(true)
  }

  /**
   * Before a checkpoint: commit the one in flight on the levels it goes to.
   * The staging buffers are reused, so the previous memory checkpoint must be
   * written (and is committed) first; a disk checkpoint commits the previous
   * flush. A background checkpoint commits at a later vote: its level's
   * interval runs from this point, or that vote would find the level due
   * again and write a second checkpoint right behind this one.
   */
  private async makeRoom(clock: ClockState, started: number, level: CheckpointLevel): Promise<void> {
    if (this.memory) await this.finishMemory()
    if (level === 'disk') await this.finishPending()
    if (this.memory && clock.memory) clock.memory.lastAt = started
    if (this.memory && level === 'disk') clock.lastAt = started
  }

  /** The header fields of this rank's file of a checkpoint of `state`, with the digests a replay checks. */
  private metaOf(state: SkeletonState): RankFileMeta {
    const { rank, size } = this.comm
    const digests = replayDigests(state)
    // The domain the next step reads, when left out: its digest lets a recovery check what refills it.
    const read = this.saves(state, 'read') ? undefined : readDigest(state, rank)
    if (read !== undefined) digests[READ_DIGEST] = read
    return { fingerprint: this.id.fingerprint, skeleton: state.index, step: state.step, rank, size, settings: this.id.settings, digests, ...this.stamp }
  }

  /** No memory level: this rank's file written to disk at the checkpoint point, and committed there with the others'. */
  private async writeAndCommitDisk(state: SkeletonState, clock: ClockState, started: number, seq: number, meta: RankFileMeta): Promise<void> {
    const parts = encodeRankFile(meta, this.entries(state, this.staging))
    const durable = this.background.track(this.writeDisk(seq, { skeleton: state.index, step: state.step }, parts, started))
    await this.commit({ seq, skeleton: state.index, step: state.step, clock, started, durable, done: false, background: false, stallMs: 0 })
  }

  /**
   * A memory checkpoint: copy at the point what the next superstep may
   * change and hand the rest to the I/O thread (see below); the file is then
   * written in the background, and its commit waits for a collective place.
   */
  private async stageMemoryWrite(
    state: SkeletonState,
    clock: ClockState,
    started: number,
    seq: number,
    meta: RankFileMeta,
    level: CheckpointLevel,
    memory: CheckpointStore,
  ): Promise<PendingCheckpoint> {
    const { rank } = this.comm
    const at = { skeleton: state.index, step: state.step }
    // The stall: copy the payloads the next superstep may change (the program's arrays, the domain it
    // writes). Domain payloads are already copies in a shared buffer; views of arrays are copied here.
    const staged = this.entries(state, this.shared, true).map((e) => (e.kind === 'heavy' && !e.staged ? { ...e, bytes: this.shared.copy(e.name, e.bytes) } : e))
    if (!this.ramChecked.has(state.index)) await this.refuseBeyondRam(state, staged, memory)
    // The rest is the I/O thread's, in one go: it copies the domain the next superstep only reads (when it
    // lives in shared memory; the skeleton waits for that copy before it writes the domain again), moves
    // the runs of hull copies together, sums the payloads and writes the file's body behind room left for
    // the header. The header, made here from its checksums, is written last.
    const copies = this.shared.takeDeferred()
    const uncompacted = this.shared.takeUncompacted()
    const copiedAt = new Map<EntryInput['bytes'], number>(copies.map((c, i) => [c.to, i]))
    const summed = staged.filter((e) => e.kind === 'heavy' && !copiedAt.has(e.bytes))
    const createdAt = new Date().toISOString()
    const reserved = encodeRankFile({ ...meta, createdAt }, staged.map((e) => (e.kind === 'heavy' ? { ...e, checksum: PLACEHOLDER_CHECKSUM } : e)))
    const headerBytes = reserved[0].byteLength
    const header = async (s: Staged): Promise<Uint8Array> => {
      const checksums = new Map<EntryInput['bytes'], number>([...copiedAt].map(([bytes, i]) => [bytes, s.copied[i]]))
      summed.forEach((e, i) => checksums.set(e.bytes, s.sums[i]))
      const parts = encodeRankFile({ ...meta, createdAt }, staged.map((e) => (e.kind === 'heavy' ? { ...e, checksum: checksums.get(e.bytes) } : e)), { headerBytes })
      // A kill injected at a disk step fires during the flush instead (see startFlush).
      if (level === 'memory') {
        const torn = this.hooks.control?.faults?.tornWrite(at, { dir: memory.pathOf(seq), path: memory.fileOf(seq, rank), parts })
        if (torn) await torn
      }
      return parts[0]
    }
    const job = { copies, uncompacted, sums: summed.map((e) => (e.bytes instanceof Uint8Array ? [e.bytes] : e.bytes)) }
    const { copied, written } = memory.writeRankFileStaged(seq, rank, this.io, job, reserved.slice(1), headerBytes, header)
    return this.trackMemoryWrite(state, clock, started, seq, level, written, copies.length > 0 ? copied : undefined)
  }

  /**
   * The memory checkpoint in flight, as the commit waits for it: done once
   * this rank's file is written (or failed). `copied`: the deferred copy of
   * the domain the next superstep only reads, lent until it ends.
   */
  private trackMemoryWrite(
    state: SkeletonState,
    clock: ClockState,
    started: number,
    seq: number,
    level: CheckpointLevel,
    written: Promise<RankFileWritten>,
    copied: Promise<void> | undefined,
  ): PendingCheckpoint {
    const { rank } = this.comm
    const durable = this.background.track(
      written.then(
        (w): WriteResult => ({ written: { rank, file: w.file, bytes: w.bytes, headerChecksum: w.headerChecksum }, ms: performance.now() - started }),
        (e: unknown): WriteResult => ({ failure: (e as Error).message, ms: performance.now() - started }),
      ),
    )
    const pending: PendingCheckpoint = {
      seq,
      skeleton: state.index,
      step: state.step,
      clock,
      started,
      durable,
      done: false,
      background: true,
      stallMs: performance.now() - started,
      flush: level === 'disk',
      ...(this.flushIo ? { raw: rawEntries(state) } : {}),
    }
    void durable.then(() => (pending.done = true))
    // A superstep that has to wait for the deferred copy stalls too: that wait counts in the stall.
    if (copied) state.write.lend(copied, (ms) => (pending.stallMs += ms))
    return pending
  }

  /** This rank's file written to the disk level at the checkpoint point (no memory level). */
  private async writeDisk(seq: number, at: CheckpointAt, parts: Uint8Array[], started: number): Promise<WriteResult> {
    const { rank } = this.comm
    const store = this.disk.level.store
    try {
      const torn = this.hooks.control?.faults?.tornWrite(at, { dir: store.pathOf(seq), path: store.fileOf(seq, rank), parts })
      if (torn) await torn
      const w = await store.writeRankFile(seq, rank, parts)
      return { written: { rank, file: w.file, bytes: w.bytes, headerChecksum: w.headerChecksum }, ms: performance.now() - started }
    } catch (e) {
      return { failure: (e as Error).message, ms: performance.now() - started }
    }
  }

  /**
   * Commit the memory checkpoint in flight, if any (collective: one
   * allgather). Rank 0 writes the marker and then discards older memory
   * checkpoints, but never the one a flush reads. A disk checkpoint's flush
   * starts here, from the committed memory copy.
   */
  private async finishMemory(): Promise<void> {
    const own = this.memory
    const p = own?.pending
    if (!own || !p) return
    own.pending = undefined
    const memory = own.level
    const { seq } = p
    const r = await p.durable
    const all = await this.comm.allgather({ written: r.written, failure: r.failure, ms: r.ms, stallMs: p.stallMs })
    const failed = all.map((a, i) => (a.failure ? `rank ${i}: ${a.failure}` : '')).filter(Boolean)
    if (failed.length > 0) {
      throw new CheckpointError(`memory checkpoint ${seq} could not be written in ${memory.store.dir} (${await this.previousOf(memory, seq)}):\n  ${failed.join('\n  ')}`)
    }
    const marker = this.markerOf(p, all)
    // Kept besides this one: the checkpoint a flush reads, and those the partner copies still need (see CheckpointCopies.pinned).
    const flushing = this.disk.pending
    const kept = new Set([seq, ...(!p.flush && flushing ? [flushing.seq] : []), ...(own.copies?.pinned ?? [])])
    if (memory.writesMarker) {
      await memory.store.commit(seq, marker)
      // Double buffering: the previous memory checkpoint goes only now that this one is complete everywhere.
      for (const old of this.memoryKept) if (!kept.has(old)) memory.store.discardSync(old)
    }
    this.memoryKept = [...new Set([...this.memoryKept.filter((old) => kept.has(old)), seq])]
    const mem = p.clock.memory
    // Young/Daly and the frequency warning count what the compute lost: the stall, slowest rank.
    const stall = Math.max(...all.map((a) => a.stallMs))
    if (mem) {
      mem.costs.push(stall)
      mem.lastAt = performance.now()
    }
    const ms = Math.max(...all.map((a) => a.ms))
    const totalBytes = all.reduce((n, a) => n + (a.written?.bytes ?? 0), 0)
    this.hooks.onCheckpoint?.({ seq, skeleton: p.skeleton, step: p.step, bytes: r.written!.bytes, totalBytes, ms, level: 'memory', stallMs: p.stallMs })
    if (p.flush) this.startFlush(p, r.written!)
    // The partner's copy, in its memory level.
    await startCopies(own.copies, marker, p.started, false)
  }

  /** Copy this rank's memory file of a committed memory checkpoint to disk, in the background. */
  private startFlush(p: PendingCheckpoint, inMemory: RankFileRecord): void {
    const memory = this.memory!.level.store
    const store = this.disk.level.store
    const { rank } = this.comm
    const { seq, started } = p
    const durable = this.background.track(
      (async (): Promise<WriteResult> => {
        try {
          const torn = this.hooks.control?.faults?.tornWrite({ skeleton: p.skeleton, step: p.step }, { dir: store.pathOf(seq), path: store.fileOf(seq, rank), parts: [] })
          if (torn) await torn
          const compress = this.flushIo && this.cfg.compress === true ? { io: this.flushIo, raw: p.raw ?? new Set<string>() } : undefined
          const incremental = this.chain ? { chain: this.chain, ...(this.flushIo ? { io: this.flushIo } : {}) } : undefined
          const w = await store.flushRankFile(seq, rank, memory, inMemory.headerChecksum, compress, incremental)
          const needs = w.delta?.delta?.needs
          return { written: { rank, file: w.file, bytes: w.bytes, headerChecksum: w.headerChecksum, ...(needs !== undefined ? { needs } : {}) }, ms: performance.now() - started }
        } catch (e) {
          return { failure: (e as Error).message, ms: performance.now() - started }
        }
      })(),
    )
    const flush: PendingCheckpoint = { ...p, durable, done: false, background: true, stallMs: 0, flush: false }
    void durable.then(() => (flush.done = true))
    this.disk.pending = flush
  }

  /** Rank 0: wait for the disk commit marker being written in the background; its failure is thrown here. */
  private async settleMarker(): Promise<void> {
    const failure = await this.markerFailure()
    if (failure !== undefined) throw new CheckpointError(failure)
  }

  /**
   * The memory level holds up to three checkpoints at once (the newest, the
   * one being written, the one being flushed): refuse before the first is
   * written when that is more than the node's free RAM, with the figures.
   * Collective, once per skeleton (its checkpoints may differ in size).
   */
  private async refuseBeyondRam(state: SkeletonState, entries: readonly EntryInput[], memory: CheckpointStore): Promise<void> {
    this.ramChecked.add(state.index)
    const mine = entries.reduce((n, e) => n + (e.bytes instanceof Uint8Array ? e.bytes.byteLength : e.bytes.reduce((m, p) => m + p.byteLength, 0)), 0)
    const total = await this.comm.allreduce(mine, 'sum')
    const available = availableMemoryBytes(memory.dir)
    const flushes = !('kind' in this.cfg.policy && this.cfg.policy.kind === 'off')
    const memoryCopies = this.memory?.copies
    // With partner copies: up to three checkpoints more kept for them here, and two of the partner's held for it
    // (with XOR parity, two slices of 1/(G−1) of a file instead).
    const copies = (flushes ? 3 : 2) + (memoryCopies ? 3 + memoryCopies.heldForOthers : 0)
    if (available !== undefined && copies * total > available) {
      throw new ConfigError(
        `the memory level needs ${formatMiB(copies * total)} in ${memory.dir} (${Number(copies.toFixed(2))} copies of ${formatMiB(total)}: ` +
          `the newest checkpoint, the next one${flushes ? ', the one being flushed to disk' : ''}${memoryCopies ? ', those being copied to the partner and the partner’s copies (or parity slices)' : ''}) and this node has ${formatMiB(available)} free; ` +
          'write fewer bytes (unregister what replay rebuilds), or use the disk level only',
      )
    }
  }

  /**
   * What a failed checkpoint leaves to restart from, for its message: the
   * previous checkpoint of this run on that level when there is one (a
   * full disk before the first commit leaves none). Read from the
   * directory: only on a failure.
   */
  private async previousOf(level: Level, failed: number): Promise<string> {
    // Unreadable now: say what can be said without it.
    const listed = await level.store.list().catch(() => undefined)
    if (listed === undefined) return 'the previous checkpoint, if any, is untouched'
    const previous = listed.filter((c) => c.complete && c.seq < failed && (this.stamp.runId === undefined || c.marker?.runId === this.stamp.runId)).pop()
    const what = level.name === 'memory' ? 'memory checkpoint' : 'checkpoint'
    return previous ? `the previous ${what}, ${previous.seq}, is intact` : `no earlier ${what} of this run was committed`
  }

  /** The commit marker of `p` from every rank's record. */
  private markerOf(p: PendingCheckpoint, all: readonly { written?: RankFileRecord }[]): CommitMarker {
    return {
      seq: p.seq,
      skeleton: p.skeleton,
      step: p.step,
      size: this.comm.size,
      fingerprint: this.id.fingerprint,
      settings: this.id.settings,
      ranks: all.map((a) => a.written!),
      createdAt: new Date().toISOString(),
      ...this.stamp,
    }
  }

  /**
   * Commit a disk checkpoint whose write was started: collective, every rank
   * calls it at the same point. The steps: every rank's write is known to be
   * durable (or the checkpoint fails everywhere), then the marker — in the
   * background for a flushed checkpoint, at the point otherwise — and the
   * copies.
   */
  private async commit(p: PendingCheckpoint): Promise<void> {
    const all = await this.allDurable(p)
    this.chain?.committed(p.seq)
    const marker = this.markerOf(p, all)
    const totalBytes = all.reduce((s, a) => s + (a.written?.bytes ?? 0), 0)
    // Rank 0's clock decides whether this checkpoint also goes to the shared level.
    const shared = all[0].shared
    if (p.background) await this.commitFlushed(p, all, marker, totalBytes, shared)
    else await this.commitAtPoint(p, all, marker, totalBytes, shared)
  }

  /**
   * Every rank's record of its write of `p` (one allgather). Commit only when
   * every rank's file is durable: any failure fails every rank alike, and the
   * partial checkpoint is removed rather than left to fill the disk.
   */
  private async allDurable(p: PendingCheckpoint): Promise<DurableRecord[]> {
    const { seq } = p
    const disk = this.disk.level
    const { written, failure, ms } = await p.durable
    const all = await this.comm.allgather({ written, failure, ms, shared: this.disk.copies?.sharedDue() === true })
    const failed = all.map((a, r) => (a.failure ? `rank ${r}: ${a.failure}` : '')).filter(Boolean)
    if (failed.length > 0) {
      this.chain?.reset()
      // Every rank's write has ended (the allgather above): the partial checkpoint is removed before any rank
      // throws (the first error ends the attempt).
      if (disk.writesMarker) await disk.store.remove(seq).catch(() => undefined)
      await this.comm.allreduce(0, 'max')
      throw new CheckpointError(`checkpoint ${seq} could not be written (${await this.previousOf(disk, seq)}):\n  ${failed.join('\n  ')}`)
    }
    return all
  }

  /**
   * A flushed checkpoint, durable on every rank: rank 0 writes the marker in
   * the background (the others need not wait for its fsyncs), after the
   * previous one; a failure surfaces at the next commit or at the end.
   */
  private async commitFlushed(p: PendingCheckpoint, all: readonly DurableRecord[], marker: CommitMarker, totalBytes: number, shared: boolean): Promise<void> {
    const { seq, clock } = p
    const disk = this.disk.level
    const ms = Math.max(...all.map((a) => a.ms))
    clock.costs.push(ms)
    clock.lastAt = performance.now()
    if (disk.writesMarker) {
      await this.settleMarker()
      const event: CheckpointEvent = { seq, skeleton: p.skeleton, step: p.step, bytes: all[this.comm.rank].written!.bytes, totalBytes, ms, level: 'disk', stallMs: 0 }
      this.markerWrite = this.background.track(
        (async () => {
          try {
            await this.commitAndPrune(seq, marker)
          } catch (e) {
            return `checkpoint ${seq} could not be committed (${await this.previousOf(disk, seq)}): ${(e as Error).message}`
          }
          this.hooks.onCheckpoint?.(event)
          return undefined
        })(),
      )
    }
    await startCopies(this.disk.copies, marker, p.started, shared)
  }

  /**
   * A checkpoint written at the point (no memory level): the marker is
   * written now and every rank waits for it; its cost, for Young/Daly, is
   * the slowest rank's time from the point to the commit.
   */
  private async commitAtPoint(p: PendingCheckpoint, all: readonly DurableRecord[], marker: CommitMarker, totalBytes: number, shared: boolean): Promise<void> {
    const { seq, clock, started } = p
    const disk = this.disk.level
    let commitFailure: string | undefined
    if (disk.writesMarker) {
      try {
        await this.commitAndPrune(seq, marker)
      } catch (e) {
        commitFailure = (e as Error).message
      }
    }
    const ms = await this.comm.allreduce(commitFailure ? Infinity : performance.now() - started, 'max')
    if (!Number.isFinite(ms)) {
      const why = (await this.comm.allgather(commitFailure)).find((x) => x !== undefined) ?? 'the commit marker could not be written'
      throw new CheckpointError(`checkpoint ${seq} could not be committed (${await this.previousOf(disk, seq)}): ${why}`)
    }
    clock.costs.push(ms)
    clock.lastAt = performance.now()
    // After the commit: the copies' I/O must not slow this checkpoint point's own writes. Starting them
    // (and committing the previous ones) is part of the stall.
    await startCopies(this.disk.copies, marker, started, shared)
    const stallMs = this.disk.copies ? performance.now() - started : ms
    this.hooks.onCheckpoint?.({ seq, skeleton: p.skeleton, step: p.step, bytes: all[this.comm.rank].written!.bytes, totalBytes, ms, level: 'disk', stallMs })
  }

  /** The disk level's marker of `seq`, then its prune (keeping what the copies still read). */
  private async commitAndPrune(seq: number, marker: CommitMarker): Promise<void> {
    const { store } = this.disk.level
    await store.commit(seq, marker)
    await store.prune(this.cfg.keep, { runId: this.stamp.runId, pinned: this.disk.copies?.pinned })
  }


  /** Whether checkpoints of `state`'s skeleton hold a default entry (all of them with `contents: 'default'`). */
  private saves(state: SkeletonState, name: DefaultEntry): boolean {
    return this.cfg.contents === 'default' || state.registry.includes(name)
  }

  /**
   * The payloads of a checkpoint: views of the program's memory (written
   * before the next superstep), or, with shared staging, copies of the
   * domains (`staged`). `defer`: the domain the next superstep only reads may
   * be left for the I/O thread to copy (see domainPayload).
   */
  private entries(state: SkeletonState, staging: StagingBuffers, defer = false): (EntryInput & { staged?: boolean })[] {
    const { rank } = this.comm
    const reg = state.registry
    const includes = (name: 'read' | 'write' | 'iterator') => this.saves(state, name)
    const out: (EntryInput & { staged?: boolean })[] = []
    if (includes('read')) {
      // In circulation the blocks have already moved: save what this rank now holds for the next step.
      const box = state.mode === 'circulation' && state.next ? state.next.needed[rank] : state.partition.possessed[rank]
      // `state.write` is the domain the next superstep reads (the domains swap after this point). Only in
      // border mode is it read-only then: a circulation kernel may change its block in place before it moves on.
      out.push(domainEntry('read', state.write, box, staging, defer && state.mode === 'border'))
    }
    if (includes('write')) out.push(domainEntry('write', state.read, state.partition.possessed[rank].intersect(state.read.box), staging, false))
    if (includes('iterator')) out.push({ name: 'iterator', kind: 'light', bytes: encodeLight(state.it, undefined, 'iterator') })
    for (const h of reg.heavy.values()) {
      out.push({ name: h.name, kind: 'heavy', dtype: dtypeOf(h.array), ...(h.box ? { box: h.box.toJSON() } : {}), bytes: bytesOf(h.array) })
    }
    for (const l of reg.light.values()) out.push({ name: l.name, kind: 'light', bytes: encodeLight(l.cell.value, l.serializer, l.name) })
    return out
  }

}

/** A domain's cells in `box` as a payload (see domainPayload): `staged` when it is a copy, not a view of the domain. */
function domainEntry(name: string, d: Domain, box: DomainDesc, staging: StagingBuffers, defer: boolean): EntryInput & { staged: boolean } {
  const record = { lower: [...box.lower], upper: [...box.upper] }
  return { name, kind: 'heavy', dtype: d.dtype, box: record, bytes: domainPayload(d, box, staging, name, defer), staged: staging.sharesBuffers }
}

/** The heavy entries of `state`'s checkpoints registered to be stored raw (`{ compress: false }`). */
function rawEntries(state: SkeletonState): Set<string> {
  const raw = new Set<string>()
  for (const h of state.registry.heavy.values()) if (!h.compress) raw.add(h.name)
  return raw
}

function formatMiB(n: number): string {
  return formatSize(n, { unit: 'MiB', digits: 1 })
}

/**
 * Every rank's file of a checkpoint is committed on its level: copy it to the
 * partner (and, for a disk checkpoint, the shared level) in the background,
 * once the previous copies are committed (collective).
 */
async function startCopies(copies: CheckpointCopies | undefined, marker: CommitMarker, started: number, shared: boolean): Promise<void> {
  if (!copies) return
  await copies.finish()
  copies.start(marker, started, shared)
}

