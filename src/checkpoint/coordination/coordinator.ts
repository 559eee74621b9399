import { performance } from 'node:perf_hooks'
import { ConfigError, errorRecord, InternalError, PreemptedError, reviveError, RunInterruptedError, type ErrorRecord } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import type { FaultToleranceConfig, ProgramIdentity } from '../config.js'
import type { CheckpointAt, CheckpointControl } from '../control.js'
import type { CheckpointEvent, RecoveryInfo, ResumedFigures } from '../events.js'
import type { DecodedRankFile } from '../format/rank-file.js'
import { codeIdentityOf, type CodeIdentity } from '../identity/code.js'
import { checkResumeCode, newestComplete, newRunId, otherRuns } from '../identity/run.js'
import { parsePolicy } from '../policy/policy.js'
import type { ElasticLine } from '../recovery/elastic/line.js'
import { restoreElastic } from '../recovery/elastic/restore.js'
import { negotiateRecoveryLine, type RejectedLine } from '../recovery/negotiate.js'
import { restoreFromFile } from '../recovery/restore.js'
import type { RecoveryDecision, RestoreOutcome, ResumeFigures, SkeletonHooks, SkeletonState } from '../skeleton-hooks.js'
import { CheckpointStore } from '../store/checkpoint-store.js'
import { CheckpointCommitter } from './commit.js'
import { CheckpointVote, type ClockState } from './vote.js'

/** Callbacks and outside requests the coordinator reports to or honours. */
export interface CoordinatorHooks {
  onCheckpoint?: (e: CheckpointEvent) => void
  onResumed?: (r: ResumedFigures) => void
  control?: CheckpointControl
  /** Checkpoints found damaged by an earlier elastic restore of this session: passed over. */
  rejected?: readonly RejectedLine[]
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
  /** The recovery line when it was written by another rank count. */
  private elasticLine: ElasticLine | undefined

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
    // Rank 0 decides the run lineage and hashes the program's code (once per run start); one allgather shares both.
    const { runId, code } = (await comm.allgather(comm.rank === 0 ? lineageOf(cfg, id, listed) : undefined))[0]!
    const vote = new CheckpointVote(comm, cfg.policy, hooks.control)
    const commits = new CheckpointCommitter(comm, cfg, id, store, seq, hooks, { runId, code })
    if (!cfg.resume) return new CheckpointCoordinator(comm, cfg, store, vote, commits, undefined, log, hooks)

    // Only this run's lineage: another run's checkpoints are never a recovery line.
    const { info, file, elastic } = await negotiateRecoveryLine(comm, store, id.settings, listed, log, hooks.rejected, otherRuns(listed, runId))
    if (info.seq !== undefined) {
      const marker = listed.find((c) => c.seq === info.seq)?.marker ?? (await store.readMarker(info.seq))
      // The same inputs on every rank (the code identity comes from rank 0): all refuse alike, or all go on.
      const warning = checkResumeCode(marker.code, code, { seq: info.seq, allow: cfg.allowCodeChange === true, programFile: id.code?.programFile })
      if (warning !== undefined) {
        info.warnings.push(warning)
        if (comm.rank === 0) log(`warning: ${warning}`)
      }
    }
    const coordinator = new CheckpointCoordinator(comm, cfg, store, vote, commits, info, log, hooks)
    coordinator.restoredFile = file
    coordinator.elasticLine = elastic
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
    if (this.elasticLine) return this.restoreElastic(state, this.elasticLine)
    const file = this.restoredFile ?? (await this.store.loadRankFile(r.seq, this.comm.rank))
    this.restoredFile = undefined
    const restored = restoreFromFile(state, file, r.seq)
    const clock = this.vote.clockFor(state)
    clock.lastAt = performance.now()
    return restored
  }

  /** A line of another rank count: read the parts of the old files this rank needs (collective). */
  private async restoreElastic(state: SkeletonState, line: ElasticLine): Promise<RestoreOutcome> {
    this.elasticLine = undefined
    const { outcome, figures } = await restoreElastic(state, line, this.comm)
    const all = await this.comm.allgather([figures.bytesRead, figures.bytesNeeded, figures.headerBytes, figures.verifyBytes])
    const sum = (k: number) => all.reduce((n, f) => n + f[k], 0)
    const total = { bytesRead: sum(0), bytesNeeded: sum(1), headerBytes: sum(2), verifyBytes: sum(3) }
    if (this.recovery) this.recovery.elastic = total
    if (this.comm.rank === 0) {
      this.log(
        `elastic restore from ${line.oldSize} ranks: read ${total.bytesRead} payload bytes for ${total.bytesNeeded} needed ` +
          `(×${(total.bytesRead / Math.max(1, total.bytesNeeded)).toFixed(3)}), ${total.headerBytes} header bytes, ${total.verifyBytes} bytes read only to verify checksums`,
      )
    }
    this.vote.clockFor(state).lastAt = performance.now()
    return outcome
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

  /**
   * Most checkpoint points have nothing to do (no checkpoint due by a step
   * policy, no vote due, nothing in flight, not the last superstep): those
   * return undefined at once, without a promise or any other allocation, so
   * a superstep with a policy that never fires allocates nothing.
   */
  checkpointPoint(state: SkeletonState, last: boolean): Promise<void> | undefined {
    const clock = this.vote.clockFor(state)
    const stop = this.cfg.interrupt
    if (!last && !this.commits.inFlight && this.vote.quiet(state, clock) && !(stop !== undefined && stop.skeleton === state.index && stop.step === state.step)) {
      const faults = this.hooks.control?.faults
      if (faults) {
        const at = this.quietAt
        at.skeleton = state.index
        at.step = state.step
        faults.checkpointPointDone(at)
      }
      return undefined
    }
    return this.checkpointPointAsync(state, last, clock)
  }

  /** Where the last quiet checkpoint point was (one object, reused: the faults hook only reads it). */
  private readonly quietAt: CheckpointAt = { skeleton: 0, step: 0 }

  private async checkpointPointAsync(state: SkeletonState, last: boolean, clock: ClockState): Promise<void> {
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

/**
 * The lineage the ranks write and resume: the configured run id (a supervised
 * run passes its own), else, resuming, the newest complete checkpoint's, else
 * a new one; and the program's code identity when it was loaded from a file.
 */
function lineageOf(cfg: FaultToleranceConfig, id: ProgramIdentity, listed: Parameters<typeof newestComplete>[0]): { runId: string; code: CodeIdentity | undefined } {
  const newest = cfg.resume ? newestComplete(listed)?.marker : undefined
  const runId = cfg.runId ?? (newest !== undefined ? (newest.runId ?? '') : newRunId())
  return { runId, code: id.code ? codeIdentityOf(id.code.programFile, id.code.modules) : undefined }
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
