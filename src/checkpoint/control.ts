/**
 * Requests from outside the program that checkpoint points honour:
 * preemption (checkpoint now, then stop), checkpoint requests, and failure
 * injection. The runtime sets them; the coordinator reads them at each
 * checkpoint point.
 */
export interface CheckpointControl {
  /** Set when the launcher asks this rank to checkpoint and stop. */
  preemptRequested: boolean
  /** Set when the launcher asks for a checkpoint (SIGUSR1), without stopping. */
  checkpointRequested?: boolean
  /** Agree on preemption at every checkpoint point (ranks launched by a supervisor). */
  preemptible?: boolean
  /** Failures to inject at checkpoint points (tests and demonstrations). */
  faults?: CheckpointFaults
  /**
   * Set when the launcher stops this rank's run from outside (a survivor of a
   * failure, whose process runs the program again): the run, unwinding, waits
   * for its background checkpoint writes to end before it returns.
   */
  stopped?: boolean
}

/** A checkpoint point: superstep `step` of skeleton `skeleton`. */
export interface CheckpointAt {
  skeleton: number
  step: number
}

/** This rank's file of one checkpoint, encoded, about to be written. */
export interface RankFileToWrite {
  /** The checkpoint's directory. */
  dir: string
  /** The file's final path. */
  path: string
  parts: readonly Uint8Array[]
}

/**
 * Failure injection at checkpoint points. The checkpoint layer only calls it,
 * at the two places a failure is injected; the runtime implements it
 * (src/runtime/rank/rank-injections.ts), so no injection code lives here.
 *
 * ```ts
 * control.faults = { tornWrite: () => undefined, checkpointPointDone: () => {}, askedCheckpointPoint: () => undefined }  // inject nothing
 * ```
 */
export interface CheckpointFaults {
  /**
   * Called before this rank's file of checkpoint point `at` is written. To
   * inject a torn write, returns a promise that never settles (the rank dies);
   * otherwise undefined, and the write goes on.
   */
  tornWrite(at: CheckpointAt, file: RankFileToWrite): Promise<never> | undefined
  /**
   * Called when checkpoint point `at` is over, written or not: may end the
   * rank there. Not called for a checkpoint written in the background (the
   * memory level): `tornWrite` is called from that write, or from the disk
   * flush that follows it, so an injected failure lands during them.
   */
  checkpointPointDone(at: CheckpointAt): void
  /**
   * The checkpoint point the user asked to fail at (`--inject …,phase=checkpoint`,
   * not drawn at random), if any: the checkpoint layer refuses it when the
   * skeleton's policy writes no checkpoint at that step.
   */
  askedCheckpointPoint(): CheckpointAt | undefined
}
