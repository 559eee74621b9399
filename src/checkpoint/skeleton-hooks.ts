import type { Domain } from '../domains/domain.js'
import type { Partition } from '../routing/partition.js'
import type { RoutingMode } from '../routing/plan.js'
import type { CheckpointPolicy } from './policy/policy.js'
import type { CheckpointRegistry } from './registry.js'

// The checkpoint layer sits below skeletons: it declares what it reads of a
// skeleton at a checkpoint point and the hooks a skeleton calls; skeletons
// build the state and call the hooks, the runtime plugs the two together.

/**
 * What a skeleton exposes to checkpoint hooks at a checkpoint point. The
 * object is reused from one superstep to the next: copy what you keep.
 */
export interface SkeletonState<It = unknown, D extends Domain = Domain> {
  readonly index: number
  readonly name: string
  readonly step: number
  readonly it: It
  /** The domain read in this superstep (written by the next one). */
  readonly read: D
  /** The domain written in this superstep (read by the next one). */
  readonly write: D
  readonly mode: RoutingMode
  readonly partition: Partition
  /** The partition of the next superstep (undefined after the last one). */
  readonly next: Partition | undefined
  readonly registry: CheckpointRegistry
  /** The skeleton's own checkpoint policy, if it has one. */
  readonly policy: CheckpointPolicy | undefined
  /** The skeleton's own memory-level policy, if it has one. */
  readonly memoryPolicy?: CheckpointPolicy | undefined
}

/** What recovery decided for one skeleton. */
export type RecoveryDecision = { kind: 'normal' } | { kind: 'skip' } | { kind: 'resume'; step: number }

/**
 * The fault-tolerance side of a run as skeletons see it. The default does
 * nothing (no checkpoints, no recovery); the checkpoint coordinator fills it in.
 */
export interface SkeletonHooks {
  recoveryFor(index: number): RecoveryDecision
  /**
   * Restore registered data at the recovery step; `reroute` when halos must be
   * refilled; `read`/`write`: whether that domain came from the checkpoint
   * (the kernel's `rebuild` fills the ones that did not).
   */
  restore(state: SkeletonState): Promise<RestoreOutcome>
  /** Called after every superstep; undefined when done at once (the common case: no promise, no garbage). */
  checkpointPoint(state: SkeletonState, last: boolean): Promise<void> | undefined
  /** Ask for a checkpoint at the next checkpoint point. */
  request(): void
  /** Replay and restore are done; the skeleton continues in normal mode. */
  resumed(figures: ResumeFigures): void
}

/** What `restore` put back (see SkeletonHooks.restore). */
export interface RestoreOutcome {
  reroute: boolean
  read: boolean
  write: boolean
  /**
   * When the checkpoint left out the domain the next step reads and recorded
   * its digest (same rank count): what the refilled domain must match (see
   * replay-check.ts, `checkRefilledRead`).
   */
  readDigest?: string
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
