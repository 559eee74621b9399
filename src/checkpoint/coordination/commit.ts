import { performance } from 'node:perf_hooks'
import type { DomainDesc } from '../../domains/desc.js'
import type { Domain } from '../../domains/domain.js'
import { bytesOf, dtypeOf } from '../../domains/dtype.js'
import { CheckpointError, ConfigError } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import type { FaultToleranceConfig, ProgramIdentity } from '../config.js'
import type { CheckpointAt, CheckpointControl } from '../control.js'
import type { CheckpointEvent, CheckpointLevel } from '../events.js'
import { encodeRankFile, type EntryInput } from '../format/rank-file.js'
import { encodeLight } from '../light/codec.js'
import { replayDigests } from '../recovery/replay-check.js'
import type { SkeletonState } from '../skeleton-hooks.js'
import type { CheckpointStore } from '../store/checkpoint-store.js'
import type { RankFileRecord } from '../store/marker.js'
import { availableMemoryBytes } from '../store/memory-level.js'
import { domainPayload, StagingBuffers } from '../store/staging.js'
import type { ClockState } from './vote.js'

/** A disk checkpoint whose write (or flush from memory) has started on this rank and that is not committed yet. */
interface PendingCheckpoint {
  seq: number
  skeleton: number
  step: number
  clock: ClockState
  started: number
  durable: Promise<{ written?: RankFileRecord; failure?: string; ms: number }>
  /** This rank's write has finished (successfully or not). */
  done: boolean
  /** Flushed from the memory level in the background (not written at the checkpoint point). */
  flushed: boolean
}

/** Where checkpoints go: the disk level (the checkpoint directory) and, when on, the memory level in RAM. */
export interface CheckpointStores {
  disk: CheckpointStore
  memory?: CheckpointStore
  /** Checkpoint numbers present in the memory level when the run opened it (pruned after the first memory commit). */
  memorySeqs?: number[]
}

/**
 * Writing this rank's file of a checkpoint and committing it with the other
 * ranks, on a level. Without a memory level a disk checkpoint is written and
 * committed at the checkpoint point. With one, every checkpoint is first
 * written to RAM and committed there at once (one allgather; the previous
 * memory checkpoint is discarded only then: double buffering); a disk
 * checkpoint is then flushed from that memory copy in the background and
 * committed later, at a collective place every rank reaches:
 * `commitIfAllDurable` at votes, `finishPending` before the next disk
 * checkpoint, at the end of a skeleton, on preemption or interruption. A
 * commit is collective: rank 0 writes the level's `COMMIT` marker once every
 * rank's file is there; a failure anywhere fails every rank alike and leaves
 * the previous checkpoint of that level the recovery line.
 *
 * ```ts
 * const commits = new CheckpointCommitter(comm, cfg, id, { disk, memory }, firstSeq, { onCheckpoint, control })
 * await commits.write(state, clock, performance.now(), 'memory')
 * await commits.finishPending()   // every rank, at the same point
 * ```
 */
export class CheckpointCommitter {
  /** A disk checkpoint flushed in the background, not committed yet. */
  private pending: PendingCheckpoint | undefined
  /** Rank 0: the commit marker (and prune) of a flushed disk checkpoint, written in the background; resolves to a failure message. */
  private markerWrite: Promise<string | undefined> | undefined
  private readonly staging = new StagingBuffers()
  private readonly store: CheckpointStore
  private readonly memory: CheckpointStore | undefined
  /** Memory checkpoints present (rank 0 discards all but the newest and the one being flushed). */
  private memoryKept: number[]
  /** Skeletons whose memory checkpoints were checked against free RAM. */
  private readonly ramChecked = new Set<number>()

  constructor(
    private readonly comm: Communicator,
    private readonly cfg: FaultToleranceConfig,
    private readonly id: ProgramIdentity,
    stores: CheckpointStores,
    /** The number of the next checkpoint (the same on every rank, over all levels). */
    private seq: number,
    private readonly hooks: { onCheckpoint?: (e: CheckpointEvent) => void; control?: CheckpointControl; log?: (text: string) => void } = {},
  ) {
    this.store = stores.disk
    this.memory = stores.memory
    this.memoryKept = [...(stores.memorySeqs ?? [])]
  }

  /** The number the next checkpoint will get. */
  get nextSeq(): number {
    return this.seq
  }

  /** Commit the background checkpoint if every rank's write is done (collective: one allreduce while one is in flight). */
  async commitIfAllDurable(): Promise<void> {
    if (this.pending && (await this.comm.allreduce(this.pending.done ? 0 : 1, 'max')) === 0) await this.finishPending()
  }

  /**
   * Commit the background checkpoint, if any (collective: all ranks reach it
   * together). `final` (end of a skeleton, preemption, interruption) also
   * waits, on rank 0, for the commit marker written in the background.
   */
  async finishPending(final = false): Promise<void> {
    const p = this.pending
    this.pending = undefined
    if (p) await this.commit(p)
    if (final) await this.settleMarker()
  }

  /** Rank 0: wait for the disk commit marker being written in the background; its failure is thrown here. */
  private async settleMarker(): Promise<void> {
    const m = this.markerWrite
    this.markerWrite = undefined
    const failure = m ? await m : undefined
    if (failure !== undefined) throw new CheckpointError(failure)
  }

  /**
   * Write this rank's file of a checkpoint of `state` to `level` and commit
   * it. With a memory level every checkpoint goes to memory first; a `disk`
   * one is then flushed in the background (committed at once when `final`:
   * the end of a skeleton, a preemption or an interruption).
   */
  async write(state: SkeletonState, clock: ClockState, started: number, level: CheckpointLevel, final = false): Promise<void> {
    const { rank, size } = this.comm
    if (level === 'disk') await this.finishPending()
    const seq = this.seq++
    const entries = this.entries(state)
    const digests = replayDigests(state)
    const parts = encodeRankFile(
      { fingerprint: this.id.fingerprint, skeleton: state.index, step: state.step, rank, size, settings: this.id.settings, digests },
      entries,
    )
    const at = { skeleton: state.index, step: state.step }
    if (this.memory === undefined) {
      const durable = this.writeDisk(seq, at, parts, started)
      const pending: PendingCheckpoint = { seq, skeleton: state.index, step: state.step, clock, started, durable, done: false, flushed: false }
      await this.commit(pending)
      return
    }
    const memory = this.memory
    if (!this.ramChecked.has(state.index)) await this.refuseBeyondRam(state, parts, memory)
    // A kill at a disk step fires during the background flush instead (see below).
    if (level === 'memory') {
      const torn = this.hooks.control?.faults?.tornWrite(at, { dir: memory.pathOf(seq), path: memory.fileOf(seq, rank), parts })
      if (torn) await torn
    }
    let written: RankFileRecord | undefined
    let failure: string | undefined
    try {
      const w = await memory.writeRankFile(seq, rank, parts)
      written = { rank, file: w.file, bytes: w.bytes, headerChecksum: w.headerChecksum }
    } catch (e) {
      failure = (e as Error).message
    }
    const pinned = level === 'disk' ? seq : this.pending?.seq
    const record = await this.commitMemory(seq, state, written, failure, started, pinned)
    const mem = clock.memory
    if (mem) {
      mem.costs.push(record.ms)
      mem.lastAt = performance.now()
    }
    if (level === 'memory') return
    // The disk copy is flushed from the memory copy while the next supersteps compute.
    const durable = (async () => {
      try {
        const torn = this.hooks.control?.faults?.tornWrite(at, { dir: this.store.pathOf(seq), path: this.store.fileOf(seq, rank), parts })
        if (torn) await torn
        const w = await this.store.flushRankFile(seq, rank, memory, written!.headerChecksum)
        return { written: { rank, file: w.file, bytes: w.bytes, headerChecksum: w.headerChecksum }, ms: performance.now() - started }
      } catch (e) {
        return { failure: (e as Error).message, ms: performance.now() - started }
      }
    })()
    const pending: PendingCheckpoint = { seq, skeleton: state.index, step: state.step, clock, started, durable, done: false, flushed: true }
    void durable.then(() => (pending.done = true))
    this.pending = pending
    if (final) await this.finishPending(true)
  }

  /** This rank's file written to the disk level at the checkpoint point (no memory level). */
  private async writeDisk(seq: number, at: CheckpointAt, parts: Uint8Array[], started: number): Promise<{ written?: RankFileRecord; failure?: string; ms: number }> {
    const { rank } = this.comm
    try {
      const torn = this.hooks.control?.faults?.tornWrite(at, { dir: this.store.pathOf(seq), path: this.store.fileOf(seq, rank), parts })
      if (torn) await torn
      const w = await this.store.writeRankFile(seq, rank, parts)
      return { written: { rank, file: w.file, bytes: w.bytes, headerChecksum: w.headerChecksum }, ms: performance.now() - started }
    } catch (e) {
      return { failure: (e as Error).message, ms: performance.now() - started }
    }
  }

  /**
   * Commit a memory checkpoint (collective: one allgather). Rank 0 writes the
   * marker and then discards older memory checkpoints, but never `pinned`
   * (the copy a background flush reads).
   */
  private async commitMemory(
    seq: number,
    state: SkeletonState,
    written: RankFileRecord | undefined,
    failure: string | undefined,
    started: number,
    pinned: number | undefined,
  ): Promise<{ ms: number }> {
    const memory = this.memory!
    const { rank, size } = this.comm
    const all = await this.comm.allgather({ written, failure, ms: performance.now() - started })
    const failed = all.map((a, r) => (a.failure ? `rank ${r}: ${a.failure}` : '')).filter(Boolean)
    if (failed.length > 0) {
      throw new CheckpointError(`memory checkpoint ${seq} could not be written in ${memory.dir} (the previous one is intact):\n  ${failed.join('\n  ')}`)
    }
    if (rank === 0) {
      await memory.commit(seq, {
        seq,
        skeleton: state.index,
        step: state.step,
        size,
        fingerprint: this.id.fingerprint,
        settings: this.id.settings,
        ranks: all.map((a) => a.written!),
        createdAt: new Date().toISOString(),
      })
      // Double buffering: the previous memory checkpoint goes only now that this one is complete everywhere.
      for (const old of this.memoryKept) if (old !== seq && old !== pinned) memory.discardSync(old)
    }
    this.memoryKept = pinned !== undefined && pinned !== seq ? [pinned, seq] : [seq]
    const ms = Math.max(...all.map((a) => a.ms))
    const totalBytes = all.reduce((s, a) => s + (a.written?.bytes ?? 0), 0)
    this.hooks.onCheckpoint?.({ seq, skeleton: state.index, step: state.step, bytes: written!.bytes, totalBytes, ms, level: 'memory', stallMs: performance.now() - started })
    return { ms }
  }

  /**
   * The memory level holds up to three checkpoints at once (the newest, the
   * one being written, the one being flushed): refuse before the first is
   * written when that is more than the node's free RAM, with the figures.
   * Collective, once per skeleton (its checkpoints may differ in size).
   */
  private async refuseBeyondRam(state: SkeletonState, parts: readonly Uint8Array[], memory: CheckpointStore): Promise<void> {
    this.ramChecked.add(state.index)
    const mine = parts.reduce((n, p) => n + p.byteLength, 0)
    const total = await this.comm.allreduce(mine, 'sum')
    const available = availableMemoryBytes(memory.dir)
    const flushes = !('kind' in this.cfg.policy && this.cfg.policy.kind === 'off')
    const copies = flushes ? 3 : 2
    if (available !== undefined && copies * total > available) {
      throw new ConfigError(
        `the memory level needs ${formatMiB(copies * total)} in ${memory.dir} (${copies} copies of ${formatMiB(total)}: ` +
          `the newest checkpoint, the next one, and the one being flushed to disk) and this node has ${formatMiB(available)} free; ` +
          'write fewer bytes (unregister what replay rebuilds), or use the disk level only',
      )
    }
  }

  /** Commit a disk checkpoint whose write was started: collective, every rank calls it at the same point. */
  private async commit(p: PendingCheckpoint): Promise<void> {
    const { rank, size } = this.comm
    const { seq, clock, started } = p
    const { written, failure, ms: durableMs } = await p.durable
    // Commit only when every rank's file is durable; any failure fails every rank alike.
    const all = await this.comm.allgather({ written, failure, ms: durableMs })
    const failed = all.map((a, r) => (a.failure ? `rank ${r}: ${a.failure}` : '')).filter(Boolean)
    if (failed.length > 0) {
      throw new CheckpointError(`checkpoint ${seq} could not be written (the previous checkpoint is intact):\n  ${failed.join('\n  ')}`)
    }
    const marker = {
      seq,
      skeleton: p.skeleton,
      step: p.step,
      size,
      fingerprint: this.id.fingerprint,
      settings: this.id.settings,
      ranks: all.map((a) => a.written!),
      createdAt: new Date().toISOString(),
    }
    const totalBytes = all.reduce((s, a) => s + (a.written?.bytes ?? 0), 0)
    if (p.flushed) {
      // Every rank's file is durable: rank 0 writes the marker in the background (the others need not
      // wait for its fsyncs), after the previous one; a failure surfaces at the next commit or at the end.
      const ms = Math.max(...all.map((a) => a.ms))
      clock.costs.push(ms)
      clock.lastAt = performance.now()
      if (rank === 0) {
        await this.settleMarker()
        const event: CheckpointEvent = { seq, skeleton: p.skeleton, step: p.step, bytes: written!.bytes, totalBytes, ms, level: 'disk', stallMs: 0 }
        this.markerWrite = (async () => {
          try {
            await this.store.commit(seq, marker)
            await this.store.prune(this.cfg.keep)
          } catch (e) {
            return `checkpoint ${seq} could not be committed (the previous checkpoint is intact): ${(e as Error).message}`
          }
          this.hooks.onCheckpoint?.(event)
          return undefined
        })()
      }
      return
    }
    let commitFailure: string | undefined
    if (rank === 0) {
      try {
        await this.store.commit(seq, marker)
        await this.store.prune(this.cfg.keep)
      } catch (e) {
        commitFailure = (e as Error).message
      }
    }
    const ms = await this.comm.allreduce(commitFailure ? Infinity : performance.now() - started, 'max')
    if (!Number.isFinite(ms)) {
      const why = (await this.comm.allgather(commitFailure)).find((x) => x !== undefined) ?? 'rank 0 could not commit'
      throw new CheckpointError(`checkpoint ${seq} could not be committed (the previous checkpoint is intact): ${why}`)
    }
    clock.costs.push(ms)
    clock.lastAt = performance.now()
    this.hooks.onCheckpoint?.({ seq, skeleton: p.skeleton, step: p.step, bytes: written!.bytes, totalBytes, ms, level: 'disk', stallMs: ms })
  }

  /** The payloads of a checkpoint, as views of the program's memory (written before the next superstep). */
  private entries(state: SkeletonState): EntryInput[] {
    const { rank } = this.comm
    const reg = state.registry
    const all = this.cfg.contents === 'default'
    const includes = (name: 'read' | 'write' | 'iterator') => all || reg.includes(name)
    const out: EntryInput[] = []
    if (includes('read')) {
      // In circulation the blocks have already moved: save what this rank now holds for the next step.
      const box = state.mode === 'circulation' && state.next ? state.next.needed[rank] : state.partition.possessed[rank]
      out.push(this.domainEntry('read', state.write, box))
    }
    if (includes('write')) out.push(this.domainEntry('write', state.read, state.partition.possessed[rank].intersect(state.read.box)))
    if (includes('iterator')) out.push({ name: 'iterator', kind: 'light', bytes: encodeLight(state.it, undefined, 'iterator') })
    for (const h of reg.heavy.values()) out.push({ name: h.name, kind: 'heavy', dtype: dtypeOf(h.array), bytes: bytesOf(h.array) })
    for (const l of reg.light.values()) out.push({ name: l.name, kind: 'light', bytes: encodeLight(l.cell.value, l.serializer, l.name) })
    return out
  }

  /** A domain's cells in `box` as a payload written from the domain's memory (see domainPayload). */
  private domainEntry(name: string, d: Domain, box: DomainDesc): EntryInput {
    const record = { lower: [...box.lower], upper: [...box.upper] }
    return { name, kind: 'heavy', dtype: d.dtype, box: record, bytes: domainPayload(d, box, this.staging, name) }
  }
}

function formatMiB(n: number): string {
  return `${(n / 2 ** 20).toFixed(1)} MiB`
}
