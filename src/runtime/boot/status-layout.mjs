// Where each rank is, as the launcher reads it: the phase list, the status
// slots in shared memory and the heartbeat record that carries a slot out of
// a rank process. Plain JavaScript on purpose: the boot files run before tsx
// is loaded, and they import it like the TypeScript side (status.ts,
// heartbeat.ts, skeletons/phase.ts; types in status-layout.d.mts), so the
// layout is written once.

/** The phases of a rank, in the order of their index in a status slot. */
export const PHASES = ['start', 'light', 'init', 'calculate', 'route', 'checkpoint', 'swap', 'replay', 'restore', 'done']

// A status slot: STATUS_FIELDS Int32 per rank, at rank * STATUS_FIELDS.
export const STATUS_FIELDS = 4
/** Offsets in a slot: the skeleton (-1: none yet), the step (-1: none yet), the phase index, a count of changes. */
export const SLOT_SKELETON = 0
export const SLOT_STEP = 1
export const SLOT_PHASE = 2
export const SLOT_CHANGES = 3

/** Status slots for `size` ranks in shared memory, each "nowhere yet" (no skeleton, no step, phase start). */
export function createStatusSlots(size) {
  const status = new Int32Array(new SharedArrayBuffer(size * STATUS_FIELDS * 4))
  for (let r = 0; r < size; r++) clearStatusSlot(status, r)
  return status
}

/** Put `rank`'s slot back to "nowhere yet"; its count of changes goes on (the heartbeat thread watches it). */
export function clearStatusSlot(status, rank) {
  const b = rank * STATUS_FIELDS
  status[b + SLOT_SKELETON] = -1
  status[b + SLOT_STEP] = -1
  status[b + SLOT_PHASE] = 0
}

/** `rank`'s slot as { skeleton, step, phase } (an unknown phase index reads as start). */
export function slotWhere(status, rank) {
  const b = rank * STATUS_FIELDS
  return { skeleton: status[b + SLOT_SKELETON], step: status[b + SLOT_STEP], phase: PHASES[status[b + SLOT_PHASE]] ?? 'start' }
}

// One heartbeat record, written by boot-heartbeat.mjs to the heartbeat pipe and read by heartbeat.ts:
//   i32 magic | i32 seq | i32 skeleton | i32 step | i32 phase index | i32 changes   (little-endian)
export const HEARTBEAT_RECORD_BYTES = 24
export const HEARTBEAT_MAGIC = 0x6d6f6c68
