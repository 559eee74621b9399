/**
 * Stop signals (SIGINT, SIGTERM) that reached `molotof run` before it could
 * act on them: while the command was still loading (bin/molotof.mjs holds
 * them from its first line, before a second of loading through tsx), or
 * while the run was being set up. The run takes them as soon as it has a
 * supervisor to stop (see run.ts): a signal at any moment of a start ends
 * the run with a checkpoint and 75, never as killed by the signal.
 */

/** How bin/molotof.mjs hands over what it held (a global: it runs before any module of the CLI is loaded). */
interface EarlyHold {
  parent: number
  release(): string[]
}
const EARLY_HOLD = Symbol.for('molotof.early-stop-signals')

export const STOP_SIGNALS = ['SIGINT', 'SIGTERM'] as const
export type StopSignal = (typeof STOP_SIGNALS)[number]

const held: StopSignal[] = []
let parentAtStart: number | undefined

/** Take over the signals bin/molotof.mjs held while the CLI loaded, and stop holding there. */
export function takeEarlySignals(): StopSignal[] {
  const hold = (globalThis as Record<symbol, EarlyHold | undefined>)[EARLY_HOLD]
  if (!hold) return []
  delete (globalThis as Record<symbol, EarlyHold | undefined>)[EARLY_HOLD]
  parentAtStart = hold.parent
  return hold.release().filter((s): s is StopSignal => (STOP_SIGNALS as readonly string[]).includes(s))
}

/** This process's parent when bin/molotof.mjs started (undefined when the CLI was started otherwise). */
export function parentAtCliStart(): number | undefined {
  return parentAtStart
}

/** Keep a stop signal for the run to take. */
export function holdStopSignal(signal: StopSignal): void {
  held.push(signal)
}

/** The stop signals held so far, once (the run's handler takes them when it starts listening). */
export function takeHeldStopSignals(): StopSignal[] {
  return held.splice(0)
}

/**
 * A second copy of one stop within this long is the same request, not a
 * second signal: a group signal reaches `molotof` and a wrapper (npm exec
 * forwards SIGINT/SIGTERM to its child) at once, so the copy from the wrapper
 * follows within milliseconds.
 */
export const SAME_STOP_MS = 500
