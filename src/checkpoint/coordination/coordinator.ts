import { performance } from 'node:perf_hooks'
import { ConfigError, errorRecord, InternalError, PreemptedError, reviveError, RunInterruptedError, type ErrorRecord } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import type { FaultToleranceConfig, ProgramIdentity } from '../config.js'
import type { CheckpointControl } from '../control.js'
import type { CheckpointEvent, RecoveryInfo, ResumedFigures } from '../events.js'
import type { DecodedRankFile } from '../format/rank-file.js'
import { parsePolicy } from '../policy/policy.js'
import { negotiateRecoveryLine } from '../recovery/negotiate.js'
import { restoreFromFile } from '../recovery/restore.js'
import type { RecoveryDecision, RestoreOutcome, ResumeFigures, SkeletonHooks, SkeletonState } from '../skeleton-hooks.js'
import { CheckpointStore } from '../store/checkpoint-store.js'
import { CheckpointCommitter } from './commit.js'
import { CheckpointVote } from './vote.js'

/** Callbacks and outside requests the coordinator reports to or honours. */
export interface CoordinatorHooks {
  onCheckpoint?: (e: CheckpointEvent) => void
  onResumed?: (r: ResumedFigures) => void
  control?: CheckpointControl
}

/**
 * The checkpoint side of a rank, as the skeletons' hooks: on a resumed run it
 * negotiates the recovery line (recovery/negotiate.ts) and restores registered
 * data (recovery/restore.ts); at each checkpoint point it asks the vote
 * whether to save or stop (vote.ts) and has the committer write and commit
 * (commit.ts). It only ties these together.
 *
 * ```ts
 * const ft = await CheckpointCoordinator.open(comm, config, { fingerprint, settings }, log)
 * rt.hooks = ft     // skeletons call recoveryFor / restore / checkpointPoint
 * ```
 */
export class CheckpointCoordinator implements SkeletonHooks {
  /** This rank's file of the recovery line, read and verified during negotiation. */
  private restoredFile: DecodedRankFile | undefined

  private constructor(
    private readonly comm: Communicator,
    private readonly cfg: FaultToleranceConfig,
    private readonly store: CheckpointStore,
    private readonly vote: CheckpointVote,
    private readonly commits: CheckpointCommitter,
    readonly recovery: RecoveryInfo | undefined,
    private readonly log: (text: string) => void,
    private readonly hooks: CoordinatorHooks,
  ) {}

  /** True when this run resumes from a checkpoint. */
  get recovering(): boolean {
    return this.recovery?.seq !== undefined
  }

  /** Open the checkpoint directory on every rank (collective) and, on `resume`, agree on the recovery line. */
  static async open(
    comm: Communicator,
    cfg: FaultToleranceConfig,
    id: ProgramIdentity,
    log: (text: string) => void,
    hooks: CoordinatorHooks = {},
  ): Promise<CheckpointCoordinator> {
    if (!Number.isSafeInteger(cfg.keep) || cfg.keep < 1) throw new ConfigError(`keep must be a positive integer (got ${cfg.keep})`)
    parsePolicy(cfg.policy)
    const store = new CheckpointStore(cfg.dir)
    // Every rank checks; any refusal is reported by all of them alike.
    const check = await settle(() => store.assertFingerprint(id.fingerprint))
    const checks = await comm.allgather(check)
    const refused = checks.find((c) => c !== undefined)
    if (refused) throw reviveError(refused)

    const listed = await store.list()
    const nextSeq = listed.reduce((m, s) => Math.max(m, s.seq + 1), 0)
    const seq = await comm.allreduce(nextSeq, 'max')
    const vote = new CheckpointVote(comm, cfg.policy, hooks.control)
    // Ranks may have directories of their own (`{node}`, `{rank}`): the lowest rank of each commits there.
    const dirs = await comm.allgather(store.dir)
    const commits = new CheckpointCommitter(comm, cfg, id, store, seq, hooks, dirs.indexOf(store.dir) === comm.rank)
    if (!cfg.resume) return new CheckpointCoordinator(comm, cfg, store, vote, commits, undefined, log, hooks)

    const { info, file } = await negotiateRecoveryLine(comm, store, id.settings, listed, log)
    const coordinator = new CheckpointCoordinator(comm, cfg, store, vote, commits, info, log, hooks)
    coordinator.restoredFile = file
    return coordinator
  }

  recoveryFor(index: number): RecoveryDecision {
    const r = this.recovery
    if (!r || r.seq === undefined || index > r.skeleton) return { kind: 'normal' }
    if (index < r.skeleton) return { kind: 'skip' }
    return { kind: 'resume', step: r.step }
  }

  async restore(state: SkeletonState): Promise<RestoreOutcome> {
    const r = this.recovery
    if (!r || r.seq === undefined) throw new InternalError('restore called without a recovery line')
    const file = this.restoredFile ?? (await this.store.loadRankFile(r.seq, this.comm.rank))
    this.restoredFile = undefined
    const restored = restoreFromFile(state, file, r.seq)
    const clock = this.vote.clockFor(state)
    clock.lastAt = performance.now()
    return restored
  }

  resumed(f: ResumeFigures): void {
    const r = this.recovery
    if (r) Object.assign(r, { replayMs: f.replayMs, restoreMs: f.restoreMs })
    if (r && r.seq !== undefined) {
      this.hooks.onResumed?.({ seq: r.seq, skeleton: r.skeleton, step: r.step, negotiateMs: r.negotiateMs, loadMs: r.loadMs, replayMs: f.replayMs, restoreMs: f.restoreMs })
    }
    if (this.comm.rank === 0) {
      this.log(`replayed ${f.step} supersteps of skeleton ${f.skeleton} in ${f.replayMs.toFixed(1)} ms, restored in ${f.restoreMs.toFixed(1)} ms`)
    }
  }

  async checkpointPoint(state: SkeletonState, last: boolean): Promise<void> {
    const clock = this.vote.clockFor(state)
    const now = performance.now()
    const { go, preempt, pollCommit } = await this.vote.decide(state, clock, now)
    if (pollCommit) await this.commits.commitIfAllDurable()
    const background = this.cfg.async === true && !preempt && !last
    if (go) await this.commits.write(state, clock, now, background)
    const stop = this.cfg.interrupt
    const stopping = stop !== undefined && stop.skeleton === state.index && stop.step === state.step
    // The end of a skeleton, a preemption or an interruption commit what is still in flight.
    if (last || preempt || stopping) await this.commits.finishPending()
    this.hooks.control?.faults?.checkpointPointDone({ skeleton: state.index, step: state.step })
    if (preempt) throw new PreemptedError(go ? this.commits.nextSeq - 1 : undefined)
    if (stopping) throw new RunInterruptedError(state.index, state.step)
  }

  /**
   * Checkpoint at the next checkpoint point (policy `request`, or sooner than
   * the policy would). Under a supervisor one rank asking is enough; in a run
   * without votes, call it on every rank.
   */
  request(): void {
    this.vote.request()
  }
}

/** Run `f`; its error as plain data (for an allgather), or undefined. */
async function settle(f: () => Promise<void>): Promise<ErrorRecord | undefined> {
  try {
    await f()
    return undefined
  } catch (e) {
    return errorRecord(e)
  }
}
