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
  checkpointPoint(state: SkeletonState, last: boolean): Promise<void>
}

export const noHooks: SkeletonHooks = {
  recoveryFor: () => ({ kind: 'normal' }),
  restore: () => Promise.reject(new Error('no checkpoint to restore')),
  checkpointPoint: () => Promise.resolve(),
}

/** Per-rank services a skeleton runs on (internal). */
export interface RankRuntime {
  readonly comm: Communicator
  readonly status: RankStatus
  hooks: SkeletonHooks
}
