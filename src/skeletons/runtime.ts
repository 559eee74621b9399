import type { SkeletonHooks } from '../checkpoint/skeleton-hooks.js'
import { InternalError } from '../errors.js'
import type { Communicator } from '../routing/communicator.js'
import type { PartitionShare } from '../routing/partition.js'
import type { PhaseReporter } from './phase.js'
import type { SparseClock } from './sparse-clock.js'
import type { StepScheduler } from './step-scheduler.js'

/** Skeletons without fault tolerance: no checkpoints, no recovery. */
export const noHooks: SkeletonHooks = {
  recoveryFor: () => ({ kind: 'normal' }),
  restore: () => Promise.reject(new InternalError('restore called on a run without checkpoints')),
  checkpointPoint: () => undefined,
  resumed: () => {},
  request: () => {},
}

/** Per-rank services a skeleton runs on (internal). */
export interface RankRuntime {
  readonly comm: Communicator
  readonly status: PhaseReporter
  hooks: SkeletonHooks
  /** Partitions shared with the other ranks of this heap (`runLocal`), so the group holds O(P) boxes, not O(P²). */
  readonly partitions?: PartitionShare
  /** When the skeletons of all ranks of this thread (`runLocal`) let the event loop run: once per period for the group, not once per rank. */
  readonly yieldClock?: SparseClock
  /** Runs the superstep loops of all ranks of this thread (`runLocal`) from one call stack: no await per rank and superstep. */
  readonly scheduler?: StepScheduler
  /** Called after every superstep (progress reports; throttled by the receiver). */
  onStep?: (skeleton: number, step: number, total: number | undefined) => void
  /** Called when a skeleton starts running (failure injection draws random points and checks its steps here). */
  onSkeletonStart?: (skeleton: number, total: number | undefined, name: string) => void
}
