import type { Communicator } from '../runtime/communicator.js'
import type { RankStatus } from '../runtime/status.js'
import type { SkeletonState } from './skeleton.js'

/** What recovery decided for one skeleton. */
export type RecoveryDecision = { kind: 'normal' } | { kind: 'skip' } | { kind: 'resume'; step: number }

/**
 * The fault-tolerance side of a run as skeletons see it. The default does
 * nothing (no checkpoints, no recovery); the checkpoint service fills it in.
 */
export interface SkeletonHooks {
  recoveryFor(index: number): RecoveryDecision
  /** Restore registered data at the recovery step; `reroute` when halos must be refilled. */
  restore(state: SkeletonState): Promise<{ reroute: boolean }>
  /** Called after every superstep; undefined when done at once (the common case: no promise, no garbage). */
  checkpointPoint(state: SkeletonState, last: boolean): Promise<void> | undefined
  /** Ask for a checkpoint at the next checkpoint point. */
  request(): void
  /** Replay and restore are done; the skeleton continues in normal mode. */
  resumed(figures: ResumeFigures): void
}

/** How long getting back to work took on this rank. */
export interface ResumeFigures {
  skeleton: number
  step: number
  /** Fast-forward of the iterator (and skipped light code inside the loop). */
  replayMs: number
  /** Reading the rank file, restoring registered data and re-routing halos. */
  restoreMs: number
}

export const noHooks: SkeletonHooks = {
  recoveryFor: () => ({ kind: 'normal' }),
  restore: () => Promise.reject(new Error('no checkpoint to restore')),
  checkpointPoint: () => undefined,
  resumed: () => {},
  request: () => {},
}

/** Per-rank services a skeleton runs on (internal). */
export interface RankRuntime {
  readonly comm: Communicator
  readonly status: RankStatus
  hooks: SkeletonHooks
  /** Called after every superstep (progress reports; throttled by the receiver). */
  onStep?: (skeleton: number, step: number, total: number | undefined) => void
  /** Called when a skeleton starts running (failure injection draws random points here). */
  onSkeletonStart?: (skeleton: number, total: number | undefined) => void
}
