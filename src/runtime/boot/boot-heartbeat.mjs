// The heartbeat of a rank process, started by process-host.mjs for one-shot
// rank processes (process-boot.mjs) and warm spare processes (spare-boot.mjs).
// Plain JavaScript on purpose: it runs before tsx is loaded.
//
// A heartbeat record (layout in status-layout.mjs) carries a rank's status slot.
// The heartbeat thread (heartbeat-thread.mjs) writes one whenever the slot
// changes (looked at every POLL_MS) and at least every heartbeat period, so
// the launcher can tell a long computation (beats go on) from a hung or
// stopped process (beats stop), and knows where a rank killed outright was.
import { writeSync } from 'node:fs'
import { Worker } from 'node:worker_threads'
import { sourceLocations } from './source-locations.mjs'
import { HEARTBEAT_MAGIC, HEARTBEAT_RECORD_BYTES, SLOT_CHANGES, SLOT_PHASE, SLOT_SKELETON, SLOT_STEP, STATUS_FIELDS, slotWhere } from './status-layout.mjs'

/**
 * Write one heartbeat record of `rank`'s status slot to `fd` (a negative rank:
 * an idle spare, nowhere yet). Runs in the heartbeat thread and, for a last
 * word before dying, in the main thread; both share `seq`. Returns false when
 * the launcher is gone (the pipe is broken).
 */
export function beat(fd, status, seq, rank) {
  const b = rank * STATUS_FIELDS
  const rec = new DataView(new ArrayBuffer(HEARTBEAT_RECORD_BYTES))
  rec.setInt32(0, HEARTBEAT_MAGIC, true)
  rec.setInt32(4, Atomics.add(seq, 0, 1), true)
  rec.setInt32(8, rank < 0 ? -1 : Atomics.load(status, b + SLOT_SKELETON), true)
  rec.setInt32(12, rank < 0 ? -1 : Atomics.load(status, b + SLOT_STEP), true)
  rec.setInt32(16, rank < 0 ? 0 : Atomics.load(status, b + SLOT_PHASE), true)
  rec.setInt32(20, rank < 0 ? 0 : Atomics.load(status, b + SLOT_CHANGES), true)
  try {
    writeSync(fd, new Uint8Array(rec.buffer)) // 24 bytes: atomic on a pipe, never interleaved
  } catch (e) {
    return e.code === 'EAGAIN' // a full pipe only drops this beat
  }
  return true
}

/**
 * Start the heartbeat thread of this process. `rank` is the rank it runs, or
 * `current` (an Int32Array of one element) holds the rank running now, -1
 * while idle (warm spares). A thread takes a while to start, longer while the
 * main thread compiles the program on a loaded machine, and the launcher's
 * hang clock runs from the spawn: the main thread beats until the thread is up.
 *
 * ```js
 * startHeartbeat({ fd: 4, status, seq, periodMs: 200, rank, label: `rank ${rank}` })
 * ```
 */
export function startHeartbeat({ fd, status, seq, periodMs, rank = -1, current, label }) {
  const rankNow = () => (current ? Atomics.load(current, 0) : rank)
  const thread = new Worker(new URL('./heartbeat-thread.mjs', import.meta.url), { workerData: { fd, status, seq, rank, current, periodMs } })
  thread.unref() // beats must not keep a finished process alive
  beat(fd, status, seq, rankNow())
  const early = setInterval(() => beat(fd, status, seq, rankNow()), periodMs)
  early.unref()
  thread.once('online', () => clearInterval(early))
  thread.on('error', (e) => process.stderr.write(`${label}: heartbeat thread failed: ${e.stack ?? e}\n`))
}

/**
 * The last word of a rank process dying of an uncaught error: a heartbeat
 * with its place, then the error to the launcher, then exit 1. `rank` < 0: an
 * idle spare, nowhere yet.
 */
export function reportUncaught(e, { fd, status, seq, rank }) {
  beat(fd, status, seq, rank)
  const err = e instanceof Error ? e : new Error(String(e)) // a thrown non-Error, as an Error to report its message
  const message = {
    type: 'error',
    rank,
    ...(rank < 0 ? { skeleton: -1, step: -1, phase: 'start' } : slotWhere(status, rank)),
    name: err.name,
    code: undefined,
    message: `uncaught ${err.message}`,
    stack: sourceLocations(err.stack),
  }
  if (process.connected) process.send(message, () => process.exit(1))
  else process.exit(1)
}
