import { PHASES } from '../runtime/boot/status-layout.mjs'

/**
 * Where a rank is in its program: the phases of a superstep, plus the light
 * code around skeletons and the replay of recovery. Skeletons report them; the
 * runtime publishes them to the launcher (status slots, heartbeats) and
 * failure injection watches them.
 */
// The list lives in plain JavaScript, beside the boot files that publish a
// rank's phase before the framework is loaded (a leaf module below skeletons).
export { PHASES }
export type Phase = (typeof PHASES)[number]

/** A rank's current position, as a skeleton reports it. The runtime's `RankStatus` implements it. */
export interface PhaseReporter {
  /** At `step` of skeleton `skeleton` (-1 for none), in `phase`. */
  set(skeleton: number, step: number, phase: Phase): void
  /** Same skeleton and step, a new phase. */
  phase(phase: Phase): void
}
