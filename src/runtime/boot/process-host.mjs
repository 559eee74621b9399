// The setup every rank process shares, whether it starts as a rank
// (process-boot.mjs) or waits as a warm spare (spare-boot.mjs); its launcher
// side is groups/rank-host.ts. Plain JavaScript on purpose: it runs before tsx
// is loaded.
//
// - SIGINT and SIGTERM (a terminal's Ctrl-C, a batch scheduler: they reach the
//   whole process group) do not kill a rank process: the rank running in it
//   forwards them to the launcher, whose supervisor makes every rank
//   checkpoint and stop (an idle spare has nothing to stop: its launcher got
//   the same signal).
// - A heartbeat thread (boot-heartbeat.mjs) writes the status slot of the rank
//   running now to fd 4 whenever it changes and at least every heartbeatMs.
// - An uncaught error is reported to the launcher with the rank's place.
// - IPC sends are counted, so that the last messages can be flushed.
import { beat, reportUncaught, startHeartbeat } from './boot-heartbeat.mjs'
import { createStatusSlots } from './status-layout.mjs'

/** fd of the heartbeat pipe (0–2 inherited, 3 IPC); groups/rank-host.ts reads it. */
const HEARTBEAT_FD = 4

/**
 * Set up this rank process for `size` ranks. `current` (an Int32Array of one
 * element) holds the rank running now, -1 while idle (a spare); a one-shot
 * rank process passes one that holds its rank throughout. Call it first,
 * before anything slow: a stop signal from then on is forwarded, never fatal.
 *
 * ```js
 * const { status, die, post, flushed } = startProcessHost({ size, heartbeatMs, current, label: `rank ${rank}` })
 * ```
 */
export function startProcessHost({ size, heartbeatMs, current, label }) {
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => {
      const rank = Atomics.load(current, 0)
      if (rank >= 0 && process.connected) process.send({ type: 'signal', rank, signal }, () => {})
    })
  }

  // The status slots (status-layout.mjs); only the running rank's slot is used here.
  const status = createStatusSlots(size)
  const seq = new Int32Array(new SharedArrayBuffer(4))

  startHeartbeat({ fd: HEARTBEAT_FD, status, seq, periodMs: heartbeatMs, current, label })

  /** Tell the launcher where we are, then die at once (failure injection, lost launcher). */
  function die() {
    beat(HEARTBEAT_FD, status, seq, Atomics.load(current, 0))
    process.kill(process.pid, 'SIGKILL')
    process.exit(137) // not reached: SIGKILL is not deferred
  }

  process.on('uncaughtException', (e) => reportUncaught(e, { fd: HEARTBEAT_FD, status, seq, rank: Atomics.load(current, 0) }))

  // IPC sends are asynchronous: count them so that the last messages leave before what comes next.
  let unsent = 0
  let drained = () => {}
  const post = (m) => {
    unsent++
    process.send(m, () => {
      if (--unsent === 0) drained()
    })
  }
  const flushed = () => (unsent === 0 ? Promise.resolve() : new Promise((resolve) => (drained = resolve)))

  return { status, die, post, flushed }
}
