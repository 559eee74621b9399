import { PHASES, type Phase, type PhaseReporter } from '../skeletons/phase.js'
import { createStatusSlots, slotWhere, SLOT_CHANGES, SLOT_PHASE, SLOT_SKELETON, SLOT_STEP, STATUS_FIELDS } from './boot/status-layout.mjs'

/*
 * Where each rank is, in shared memory the launcher can read even while the
 * rank is busy computing or has died: skeleton, step, phase and a beat counter
 * (layout in boot/status-layout.mjs, shared with the boot files).
 */

export function createStatusBuffer(size: number): Int32Array {
  return createStatusSlots(size)
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
    const b = this.rank * STATUS_FIELDS
    this.shared[b + SLOT_SKELETON] = skeleton
    this.shared[b + SLOT_STEP] = step
    this.shared[b + SLOT_PHASE] = PHASES.indexOf(phase)
    Atomics.add(this.shared, b + SLOT_CHANGES, 1)
    this.onChange?.(skeleton, step, phase)
  }

  phase(phase: Phase): void {
    const b = this.rank * STATUS_FIELDS
    this.shared[b + SLOT_PHASE] = PHASES.indexOf(phase)
    Atomics.add(this.shared, b + SLOT_CHANGES, 1)
    this.onChange?.(this.shared[b + SLOT_SKELETON], this.shared[b + SLOT_STEP], phase)
  }
}

export function readStatus(shared: Int32Array, rank: number): { skeleton: number; step: number; phase: Phase; beats: number } {
  return { ...slotWhere(shared, rank), beats: Atomics.load(shared, rank * STATUS_FIELDS + SLOT_CHANGES) }
}
