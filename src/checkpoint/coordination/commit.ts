import { performance } from 'node:perf_hooks'
import type { DomainDesc } from '../../domains/desc.js'
import type { Domain } from '../../domains/domain.js'
import { bytesOf, dtypeOf } from '../../domains/dtype.js'
import { CheckpointError } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import type { FaultToleranceConfig, ProgramIdentity } from '../config.js'
import type { CheckpointControl } from '../control.js'
import type { CheckpointEvent } from '../events.js'
import { encodeRankFile, type EntryInput } from '../format/rank-file.js'
import { encodeLight } from '../light/codec.js'
import { replayDigests } from '../recovery/replay-check.js'
import type { SkeletonState } from '../skeleton-hooks.js'
import type { CheckpointStore } from '../store/checkpoint-store.js'
import type { RankFileRecord } from '../store/marker.js'
import { domainPayload, StagingBuffers } from '../store/staging.js'
import type { ClockState } from './vote.js'

/** A checkpoint whose write has started on this rank and that is not committed yet. */
interface PendingCheckpoint {
  seq: number
  skeleton: number
  step: number
  clock: ClockState
  started: number
  durable: Promise<{ written?: RankFileRecord; failure?: string }>
  /** This rank's write has finished (successfully or not). */
  done: boolean
}

/**
 * Writing this rank's file of a checkpoint and committing it with the other
 * ranks. A write runs in the foreground, or in the background (payloads
 * copied to staging buffers first) and is committed later, at a collective
 * place every rank reaches: `commitIfAllDurable` at votes, `finishPending`
 * before the next checkpoint, at the end of a skeleton, on preemption or
 * interruption. The commit is collective: rank 0 writes the `COMMIT` marker
 * once every rank's file is durable (in every directory, when ranks have
 * their own: `{node}` or `{rank}` in the directory name); a failure anywhere fails every rank
 * alike and leaves the previous checkpoint the recovery line.
 *
 * ```ts
 * const commits = new CheckpointCommitter(comm, cfg, id, store, firstSeq, { onCheckpoint, control })
 * await commits.write(state, clock, performance.now(), cfg.async === true)
 * await commits.finishPending()   // every rank, at the same point
 * ```
 */
export class CheckpointCommitter {
  /** A checkpoint written in the background, not committed yet. */
  private pending: PendingCheckpoint | undefined
  private readonly staging = new StagingBuffers()

  constructor(
    private readonly comm: Communicator,
    private readonly cfg: FaultToleranceConfig,
    private readonly id: ProgramIdentity,
    private readonly store: CheckpointStore,
    /** The number of the next checkpoint (the same on every rank). */
    private seq: number,
    private readonly hooks: { onCheckpoint?: (e: CheckpointEvent) => void; control?: CheckpointControl } = {},
    /**
     * Whether this rank writes the `COMMIT` marker and prunes: the lowest rank
     * of each checkpoint directory (rank 0 when all share one; every node's
     * first rank with `{node}` directories).
     */
    private readonly writesMarker = comm.rank === 0,
  ) {}

  /** The number the next checkpoint will get. */
  get nextSeq(): number {
    return this.seq
  }

  /** Commit the background checkpoint if every rank's write is done (collective: one allreduce while one is in flight). */
  async commitIfAllDurable(): Promise<void> {
    if (this.pending && (await this.comm.allreduce(this.pending.done ? 0 : 1, 'max')) === 0) await this.finishPending()
  }

  /** Commit the background checkpoint, if any (collective: all ranks reach it together). */
  async finishPending(): Promise<void> {
    const p = this.pending
    if (!p) return
    this.pending = undefined
    await this.commit(p)
  }

  /** Write this rank's file of a checkpoint of `state` and commit it now, or later when `background`. */
  async write(state: SkeletonState, clock: ClockState, started: number, background: boolean): Promise<void> {
    const { rank, size } = this.comm
    await this.finishPending()
    const seq = this.seq++
    const entries = this.entries(state, background)
    const digests = replayDigests(state)
    const durable = (async (): Promise<{ written?: RankFileRecord; failure?: string }> => {
      try {
        const parts = encodeRankFile(
          { fingerprint: this.id.fingerprint, skeleton: state.index, step: state.step, rank, size, settings: this.id.settings, digests },
          entries,
        )
        const torn = this.hooks.control?.faults?.tornWrite(
          { skeleton: state.index, step: state.step },
          { dir: this.store.pathOf(seq), path: this.store.fileOf(seq, rank), parts },
        )
        if (torn) await torn
        const w = await this.store.writeRankFile(seq, rank, parts)
        return { written: { rank, file: w.file, bytes: w.bytes, headerChecksum: w.headerChecksum } }
      } catch (e) {
        return { failure: (e as Error).message }
      }
    })()
    const pending: PendingCheckpoint = { seq, skeleton: state.index, step: state.step, clock, started, durable, done: false }
    void durable.then(() => (pending.done = true))
    if (background) this.pending = pending
    else await this.commit(pending)
  }

  /** Commit a checkpoint whose write was started: collective, every rank calls it at the same point. */
  private async commit(p: PendingCheckpoint): Promise<void> {
    const { size } = this.comm
    const { seq, clock, started } = p
    const { written, failure } = await p.durable
    // Commit only when every rank's file is durable; any failure fails every rank alike.
    const all = await this.comm.allgather({ written, failure })
    const failed = all.map((a, r) => (a.failure ? `rank ${r}: ${a.failure}` : '')).filter(Boolean)
    if (failed.length > 0) {
      throw new CheckpointError(`checkpoint ${seq} could not be written (the previous checkpoint is intact):\n  ${failed.join('\n  ')}`)
    }
    let commitFailure: string | undefined
    if (this.writesMarker) {
      try {
        await this.store.commit(seq, {
          seq,
          skeleton: p.skeleton,
          step: p.step,
          size,
          fingerprint: this.id.fingerprint,
          settings: this.id.settings,
          ranks: all.map((a) => a.written!),
          createdAt: new Date().toISOString(),
        })
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
    const totalBytes = all.reduce((s, a) => s + (a.written?.bytes ?? 0), 0)
    const event: CheckpointEvent = { seq, skeleton: p.skeleton, step: p.step, bytes: written!.bytes, totalBytes, ms }
    this.hooks.onCheckpoint?.(event)
  }

  /** The payloads of a checkpoint; `copy` detaches them from memory the next supersteps overwrite. */
  private entries(state: SkeletonState, copy: boolean): EntryInput[] {
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
    return copy ? out.map((e) => (e.kind === 'heavy' ? { ...e, bytes: this.staging.copy(e.name, e.bytes) } : e)) : out
  }

  /** A domain's cells in `box` as a payload written from the domain's memory (see domainPayload). */
  private domainEntry(name: string, d: Domain, box: DomainDesc): EntryInput {
    const record = { lower: [...box.lower], upper: [...box.upper] }
    return { name, kind: 'heavy', dtype: d.dtype, box: record, bytes: domainPayload(d, box, this.staging, name) }
  }
}
