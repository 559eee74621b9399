// @ts-check
// The heartbeat thread of a rank or spare process (started by startHeartbeat
// in boot-heartbeat.mjs, which says what a heartbeat is for). Plain
// JavaScript on purpose: it runs before tsx is loaded.
import { workerData } from 'node:worker_threads'
import { beat } from './boot-heartbeat.mjs'
import { SLOT_CHANGES, STATUS_FIELDS } from './status-layout.mjs'

// How often the heartbeat thread looks at the status slot: a failure report is at most this far behind
// the rank. Each look is a timed wake-up of the thread: every 2 ms cost a rank about 2 % of a core on
// this development VM (CPU time of the thread, from /proc), every 10 ms a fifth of that, and caps
// the records (a slot changes four times a superstep) at 100 a second for the launcher to read.
const POLL_MS = 10

/**
 * What startHeartbeat hands over: the heartbeat pipe, the status slots, the
 * record counter it shares with the main thread, the period, and the rank
 * (or `current`, holding the rank running now, -1 while idle).
 *
 * @typedef {{ fd: number, status: Int32Array, seq: Int32Array, rank: number, current?: Int32Array, periodMs: number }} HeartbeatThreadData
 */
const { fd, status, seq, rank, current, periodMs } = /** @type {HeartbeatThreadData} */ (workerData)
const nap = new Int32Array(new SharedArrayBuffer(4))
let lastRank = -2
let lastChanges = -1
let lastAt = 0
// A blocking loop: this thread has nothing else to do, and a timer could not poll this often cheaply.
for (;;) {
  const r = current ? Atomics.load(current, 0) : rank
  const changes = r < 0 ? -1 : Atomics.load(status, r * STATUS_FIELDS + SLOT_CHANGES)
  const now = performance.now()
  if (r !== lastRank || changes !== lastChanges || now - lastAt >= periodMs) {
    // The launcher died without killing us: do not outlive it.
    if (!beat(fd, status, seq, r)) process.kill(process.pid, 'SIGKILL')
    lastRank = r
    lastChanges = changes
    lastAt = now
  }
  Atomics.wait(nap, 0, 0, POLL_MS)
}
