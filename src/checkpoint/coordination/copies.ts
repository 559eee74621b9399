import { performance } from 'node:perf_hooks'
import { CheckpointError, InternalError } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import type { SharedLevelConfig } from '../config.js'
import type { CheckpointEvent, CheckpointLevel, CopyLevel } from '../events.js'
import type { CheckpointStore } from '../store/checkpoint-store.js'
import { BackgroundWork } from './background.js'
import type { CommitMarker } from '../store/marker.js'
import { receiveRankFile, sendRankFile, type PartnerRing } from '../store/partner.js'
import { makeParitySlice } from '../redundancy/exchange.js'
import type { XorSets } from '../redundancy/sets.js'

/**
 * A level the copies go to (a copy level of levels.ts): `partner` (this rank
 * keeps its source's files in `store`, on its own node, and sends its own to
 * its holder, on `tag`: each copied level's transfers, in flight at the same
 * time, need their own) or `shared` (every rank copies its own file there, as
 * `config` says). `writesMarker`: this rank commits and prunes it.
 */
export interface CopyTarget {
  name: CopyLevel
  store: CheckpointStore
  writesMarker: boolean
  feed: { kind: 'partner'; ring: PartnerRing; tag: number } | { kind: 'shared'; config: SharedLevelConfig } | { kind: 'xor'; sets: XorSets; tag: number }
}

interface PendingCopies {
  marker: CommitMarker
  started: number
  shared: boolean
  /** Shared level: the markers of the earlier files of a delta's chain this rank copied along (see CheckpointStore.copyWithChain). */
  carried: CommitMarker[]
  /** This rank's part: resolves to a failure message, or undefined. Never rejects. */
  work: Promise<string | undefined>
  done: boolean
  /** The bytes of this rank's XOR parity slice, once written; then every rank's (their events report these, not the file's). */
  sliceBytes?: number
  allSliceBytes?: number
}

/**
 * The partner and shared copies of committed disk checkpoints, made in the
 * background and committed like a level of their own. Once every rank's
 * disk file of a checkpoint is durable (the committer's collective commit),
 * `start` has each rank send its file to its partner holder over the
 * communicator while receiving its source's file into its partner store,
 * and, when the shared policy says so, copy its file to the shared
 * directory. `finish` (collective) commits them when every rank's part is
 * written: the lowest rank of each directory writes the partner store's
 * `COMMIT` (the disk checkpoint's marker: the bytes are the same), rank 0
 * the shared one; older copies are pruned only then (double buffering).
 *
 * ```ts
 * const copies = new CheckpointCopies(comm, disk, [{ name: 'partner', store, writesMarker, feed: { kind: 'partner', ring, tag } }], keep, runId, onCheckpoint)
 * copies.start(marker, started, copies.sharedDue())   // every rank, after the disk commit
 * await copies.finish()                                // every rank, at the same point
 * ```
 */
export class CheckpointCopies {
  /** The copies' transfers, writes and markers until they end (see CheckpointCommitter.settle). */
  readonly background = new BackgroundWork()
  private pending: PendingCopies | undefined
  /** The commit markers of the last copies, written in the background; `done` resolves to a failure message. */
  private markers: { seq: number; done: Promise<string | undefined> } | undefined
  /** The newest checkpoint whose copies every rank knows to be committed (see `pinned`). */
  private committed: number | undefined
  /** Disk checkpoints offered so far (for `every`). */
  private offered = 0
  private lastSharedAt = -Infinity

  constructor(
    private readonly comm: Communicator,
    /** The level copied (disk, or memory): this rank's files are copied from there. */
    private readonly disk: CheckpointStore,
    /** Where the copies go, in the order of the run's levels. */
    private readonly targets: readonly CopyTarget[],
    private readonly keep: number,
    private readonly runId: string | undefined,
    private readonly onCheckpoint?: (e: CheckpointEvent) => void,
    /** The newest checkpoint whose copies an earlier attempt committed on every rank, if any (see `pinned`). */
    committed?: number,
    /** The level whose checkpoints these are copies of. */
    readonly from: CheckpointLevel = 'disk',
  ) {
    this.committed = committed
  }

  /** The shared level's policy, when the copies go to one. */
  private get sharedConfig(): SharedLevelConfig | undefined {
    for (const t of this.targets) if (t.feed.kind === 'shared') return t.feed.config
    return undefined
  }

  /**
   * The checkpoints' worth of another rank's files this rank holds for these
   * copies at most (the newest committed and the one being made): two
   * partner copies, or two parity slices of 1/(G−1) of a file each.
   */
  get heldForOthers(): number {
    let held = 0
    for (const t of this.targets) {
      if (t.feed.kind === 'partner') held += 2
      else if (t.feed.kind === 'xor') held += 2 / (t.feed.sets.setSize - 1)
    }
    return held
  }

  /** Copies are being made and wait for their commit. */
  get inFlight(): boolean {
    return this.pending !== undefined
  }

  /**
   * Disk checkpoints the disk level must keep whatever `keep` says: the
   * newest one whose copies are known committed everywhere, and the one whose
   * markers are being written — the newest committed copy in any partner
   * directory is one of the two. The copies lag the disk level by a
   * checkpoint or two; without this, a disk prune could leave a surviving
   * rank's own checkpoints and a lost rank's copies with no checkpoint in
   * common. The one being copied is kept too (with `keep` 1 it would be
   * pruned while its copies are read). The level then holds up to two
   * checkpoints more than `keep`.
   */
  get pinned(): number[] {
    // The checkpoint being copied too: its files are still being read.
    return [this.committed, this.markers?.seq, this.pending?.marker.seq].filter((s): s is number => s !== undefined)
  }

  /** This rank's part of the copies in flight is finished (or nothing is in flight). */
  get done(): boolean {
    return this.pending === undefined || this.pending.done
  }

  /**
   * Whether the next committed disk checkpoint goes to the shared level, as
   * this rank sees it (the committer uses rank 0's answer, so a time policy
   * decides alike everywhere).
   */
  sharedDue(): boolean {
    const s = this.sharedConfig
    if (!s) return false
    if (s.every !== undefined) return this.offered % s.every === 0
    return performance.now() - this.lastSharedAt >= (s.seconds ?? 0) * 1000
  }

  /**
   * Start the copies of the disk checkpoint `marker` records (collective
   * point: every rank calls it after the disk commit; the previous copies
   * must be finished). `shared`: rank 0's `sharedDue()`.
   */
  start(marker: CommitMarker, started: number, shared: boolean): void {
    if (this.pending) throw new InternalError('partner or shared copies started before the previous ones were committed')
    this.offered++
    const sharedTo = shared && this.sharedConfig !== undefined
    if (!this.targets.some((t) => due(t, sharedTo))) return
    if (sharedTo) this.lastSharedAt = performance.now()
    const { rank } = this.comm
    const { seq } = marker
    const jobs: Promise<unknown>[] = []
    const slice: { bytes?: number } = {}
    const carried: CommitMarker[] = []
    for (const t of this.targets) {
      if (!due(t, sharedTo)) continue
      const { feed, store } = t
      if (feed.kind === 'partner') {
        const source = feed.ring.sourceOf(rank)
        jobs.push(sendRankFile(this.comm, feed.ring.holderOf(rank), feed.tag, this.disk.fileOf(seq, rank)))
        jobs.push(
          (async () => {
            const parts = await receiveRankFile(this.comm, source, feed.tag, marker.ranks[source], `the partner copy of rank ${source}'s file of checkpoint ${seq}`)
            await store.writeRankFile(seq, source, parts)
          })(),
        )
      } else if (feed.kind === 'xor') {
        jobs.push(
          makeParitySlice(this.comm, feed.sets, feed.tag, this.disk.fileOf(seq, rank), marker)
            .then((parts) => store.writeRankFile(seq, rank, parts))
            .then((w) => (slice.bytes = w.bytes)),
        )
      } else jobs.push(store.copyWithChain(seq, rank, this.disk, marker.ranks[rank].headerChecksum).then((m) => void carried.push(...m)))
    }
    const pending: PendingCopies = { marker, started, shared: sharedTo, carried, done: false, work: this.background.track(settleAll(jobs).then((why) => ((pending.sliceBytes = slice.bytes), why))) }
    void pending.work.then(() => (pending.done = true))
    this.pending = pending
  }

  /**
   * Commit the copies in flight (collective; waits for this rank's part).
   * A failure on any rank fails every rank alike; the previous copies stay.
   * The markers are written in the background (as a flushed disk
   * checkpoint's): a failure to write them surfaces at the next `finish`, or
   * here when `final` (the end of a skeleton, a preemption, an
   * interruption), which waits for them.
   */
  async finish(final = false): Promise<void> {
    const p = this.pending
    if (!p && !(final && this.markers)) return
    this.pending = undefined
    // Collective even when only some ranks write markers: every rank learns of a failure alike.
    const last = this.markers
    this.markers = undefined
    const previous = last ? await last.done : undefined
    const work = p ? await p.work : undefined
    const outcomes = await this.comm.allgather({ work, previous, sliceBytes: p?.sliceBytes ?? 0 })
    const why = outcomes.find((o) => o.previous !== undefined)?.previous
    if (why !== undefined) throw new CheckpointError(why)
    if (last) this.committed = last.seq
    if (!p) return
    const { seq } = p.marker
    p.allSliceBytes = outcomes.reduce((n, o) => n + o.sliceBytes, 0)
    const failed = outcomes.map((o, r) => (o.work === undefined ? '' : `rank ${r}: ${o.work}`)).filter(Boolean)
    if (failed.length > 0) throw new CheckpointError(`the copies of checkpoint ${seq} could not be made (the previous copies are intact):\n  ${failed.join('\n  ')}`)
    this.markers = { seq, done: this.background.track(this.commitAll(p)) }
    if (final) await this.finish(true)
  }

  /** This rank's markers of copies every rank has written (the lowest rank of each partner directory, rank 0 in the shared one); then the events. */
  private async commitAll(p: PendingCopies): Promise<string | undefined> {
    const { marker } = p
    try {
      // The earlier files of a delta's chain carried to the shared level: committed by each rank that carried them, first.
      for (const t of this.targets) if (due(t, p.shared) && t.feed.kind === 'shared') for (const m of p.carried) await t.store.commit(m.seq, m)
      for (const t of this.targets) if (due(t, p.shared) && t.writesMarker) await this.commitIn(t.store, marker, t.feed.kind !== 'shared')
    } catch (e) {
      return `the copies of checkpoint ${marker.seq} could not be committed (the previous copies are intact): ${(e as Error).message}`
    }
    const ms = performance.now() - p.started
    const bytes = marker.ranks[this.comm.rank].bytes
    const totalBytes = marker.ranks.reduce((n, r) => n + r.bytes, 0)
    const event = { seq: marker.seq, skeleton: marker.skeleton, step: marker.step, bytes, totalBytes, ms, stallMs: 0 }
    for (const t of this.targets) {
      if (!due(t, p.shared)) continue
      // A parity slice is not the file: what the rank holds for redundancy is reported.
      const held = t.feed.kind === 'xor' ? { bytes: p.sliceBytes ?? 0, totalBytes: p.allSliceBytes ?? 0 } : {}
      this.onCheckpoint?.({ ...event, ...held, level: t.name })
    }
    return undefined
  }

  /**
   * The marker, then the prune. In the shared level other ranks may still be
   * committing the earlier files of their chains (older checkpoints, below this
   * one) while this rank prunes: their markers' temporary files are theirs, so
   * the prune leaves temporary files there (a crash's leftovers, named
   * `*.tmp-<pid>-<random>`, are ignored by every reader). Deleting them raced
   * a carrier's marker write (ENOENT).
   */
  private async commitIn(store: CheckpointStore, marker: CommitMarker, cleanTemporary: boolean): Promise<void> {
    await store.commit(marker.seq, marker)
    await store.prune(this.keep, { runId: this.runId, temporaryFiles: cleanTemporary })
  }
}

/** Whether `target` gets this checkpoint's copy: a partner or XOR level every one, the shared level when its policy said so (`shared`). */
function due(target: CopyTarget, shared: boolean): boolean {
  return target.feed.kind !== 'shared' || shared
}

/** Wait for every job; the first failure's message, or undefined. Never rejects (no job's rejection goes unhandled). */
async function settleAll(jobs: readonly Promise<unknown>[]): Promise<string | undefined> {
  const outcomes = await Promise.allSettled(jobs)
  const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected')
  return failed === undefined ? undefined : ((failed.reason as Error)?.message ?? String(failed.reason))
}
