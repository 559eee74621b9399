// @ts-check
// The layout of the gate a staged job of the checkpoint I/O thread waits at
// (an Int32Array over a SharedArrayBuffer): one module, read by the thread
// (thread.mjs) and by the rank's side (io-thread.ts), so neither copies it.

/** The slots of the gate. */
export const GATE = Object.freeze({
  /** 1 once the rank has left its checkpoint point (`release`); the thread sets it back to 0. */
  open: 0,
  /** How many staged jobs have reached the gate. */
  arrived: 1,
  /** How many left it because the rank released it (not after GATE_MS). */
  released: 2,
  /** The number of slots. */
  length: 3,
})
