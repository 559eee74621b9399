// How a checkpoint point stops a run on purpose: every rank throws the same
// error at the same checkpoint point, and the runtime reports it.

/** Thrown on every rank after the checkpoint a preemption asked for: the run stops cleanly. */
export class Preempted extends Error {
  override readonly name = 'Preempted'
  constructor(
    /** The checkpoint taken for the preemption. */
    readonly seq: number | undefined,
  ) {
    super('preempted: checkpoint taken, stopping')
  }
}

/** Thrown on every rank by `interrupt`: the run stopped on purpose after a checkpoint point. */
export class RunInterrupted extends Error {
  constructor(
    readonly skeleton: number,
    readonly step: number,
  ) {
    super(`run interrupted after skeleton ${skeleton}, step ${step}`)
  }
}
