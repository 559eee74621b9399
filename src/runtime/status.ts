import { PHASES, type Phase, type PhaseReporter } from '../skeletons/phase.js'

/*
 * Where each rank is, in shared memory the launcher can read even while the
 * rank is busy computing or has died: skeleton, step, phase and a beat counter.
 */

const FIELDS = 4

export function createStatusBuffer(size: number): Int32Array {
  const s = new Int32Array(new SharedArrayBuffer(size * FIELDS * 4))
  for (let r = 0; r < size; r++) {
    s[r * FIELDS] = -1
    s[r * FIELDS + 1] = -1
  }
  return s
}

/** One rank's view of its own status slot. */
export class RankStatus implements PhaseReporter {
  /** Called on every change (failure injection watches it). */
  onChange: ((skeleton: number, step: number, phase: Phase) => void) | undefined

  constructor(
    private readonly shared: Int32Array,
    private readonly rank: number,
  ) {}

  set(skeleton: number, step: number, phase: Phase): void {
    const b = this.rank * FIELDS
    this.shared[b] = skeleton
    this.shared[b + 1] = step
    this.shared[b + 2] = PHASES.indexOf(phase)
    Atomics.add(this.shared, b + 3, 1)
    this.onChange?.(skeleton, step, phase)
  }

  phase(phase: Phase): void {
    const b = this.rank * FIELDS
    this.shared[b + 2] = PHASES.indexOf(phase)
    Atomics.add(this.shared, b + 3, 1)
    this.onChange?.(this.shared[b], this.shared[b + 1], phase)
  }
}

export function readStatus(shared: Int32Array, rank: number): { skeleton: number; step: number; phase: Phase; beats: number } {
  const b = rank * FIELDS
  return {
    skeleton: shared[b],
    step: shared[b + 1],
    phase: PHASES[shared[b + 2]] ?? 'start',
    beats: Atomics.load(shared, b + 3),
  }
}
