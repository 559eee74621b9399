// Entry of a warm spare process (spares.ts; process-boot.mjs is the one-shot
// twin). Loads the program ahead, then runs it for each rank number the
// launcher assigns (spare-host.mjs), in this same process.
//
//   node spare-boot.mjs <base64 of v8.serialize(host)>     (fd 3: IPC, fd 4: heartbeat pipe)
//
// host: { programFile, tsconfig, size, heartbeatMs, id }. Each assignment
// carries the rest of a rank's init (the attempt's spec, rank, endpoints).
//
// The heartbeat thread beats from the start, idle or not: the launcher's hang
// clock of a rank assigned to this process runs from the assignment. It
// reports the status slot of the rank running now (none while idle).
import { writeSync } from 'node:fs'
import { deserialize } from 'node:v8'
import { Worker } from 'node:worker_threads'
import { hostLoop } from './spare-host.mjs'

const HEARTBEAT_FD = 4
// Same order as PHASES in status.ts (only used to name the phase of an uncaught error).
const PHASES = ['start', 'light', 'init', 'calculate', 'route', 'checkpoint', 'swap', 'replay', 'restore', 'done']

const { programFile, tsconfig, size, heartbeatMs, id } = deserialize(Buffer.from(process.argv[2] ?? '', 'base64'))

// Status slots (4 Int32 per rank, see status.ts) and the rank running now (-1: idle).
const status = new Int32Array(new SharedArrayBuffer(size * 16))
for (let r = 0; r < size; r++) status[r * 4] = status[r * 4 + 1] = -1
const seq = new Int32Array(new SharedArrayBuffer(4))
const current = new Int32Array(new SharedArrayBuffer(4))
current[0] = -1

/** One heartbeat record (layout in heartbeat.ts) of the rank running now; false when the launcher is gone. */
function beat(fd, status, seq, current) {
  const rank = Atomics.load(current, 0)
  const b = rank * 4
  const rec = new DataView(new ArrayBuffer(24))
  rec.setInt32(0, 0x6d6f6c68, true)
  rec.setInt32(4, Atomics.add(seq, 0, 1), true)
  rec.setInt32(8, rank < 0 ? -1 : Atomics.load(status, b), true)
  rec.setInt32(12, rank < 0 ? -1 : Atomics.load(status, b + 1), true)
  rec.setInt32(16, rank < 0 ? 0 : Atomics.load(status, b + 2), true)
  rec.setInt32(20, rank < 0 ? 0 : Atomics.load(status, b + 3), true)
  try {
    writeSync(fd, new Uint8Array(rec.buffer)) // 24 bytes: atomic on a pipe
  } catch (e) {
    return e.code === 'EAGAIN' // a full pipe only drops this beat
  }
  return true
}

const heartbeat = new Worker(
  `const { workerData } = require('node:worker_threads')
   const { writeSync } = require('node:fs')
   const { fd, status, seq, current, periodMs } = workerData
   const beat = ${beat.toString()}
   const tick = () => {
     // The launcher died without killing us: do not outlive it.
     if (!beat(fd, status, seq, current)) process.kill(process.pid, 'SIGKILL')
   }
   tick()
   setInterval(tick, periodMs)`,
  { eval: true, workerData: { fd: HEARTBEAT_FD, status, seq, current, periodMs: heartbeatMs } },
)
heartbeat.unref()
beat(HEARTBEAT_FD, status, seq, current)
const early = setInterval(() => beat(HEARTBEAT_FD, status, seq, current), heartbeatMs)
early.unref()
heartbeat.once('online', () => clearInterval(early))
heartbeat.on('error', (e) => process.stderr.write(`spare ${id}: heartbeat thread failed: ${e.stack ?? e}\n`))

/** Tell the launcher where we are, then die at once (failure injection, lost launcher). */
function die() {
  beat(HEARTBEAT_FD, status, seq, current)
  process.kill(process.pid, 'SIGKILL')
  process.exit(137) // not reached: SIGKILL is not deferred
}

// A spare lives as long as its launcher wants it: it is killed when not needed.
process.on('disconnect', die)
process.on('uncaughtException', (e) => {
  beat(HEARTBEAT_FD, status, seq, current)
  const rank = Atomics.load(current, 0)
  const b = rank * 4
  const err = e instanceof Error ? e : new Error(String(e)) // a thrown non-Error, as an Error to report its message
  const message = {
    type: 'error',
    rank,
    skeleton: rank < 0 ? -1 : status[b],
    step: rank < 0 ? -1 : status[b + 1],
    phase: rank < 0 ? 'start' : (PHASES[status[b + 2]] ?? 'start'),
    name: err.name,
    code: undefined,
    message: `uncaught ${err.message}`,
    stack: err.stack,
  }
  if (process.connected) process.send(message, () => process.exit(1))
  else process.exit(1)
})

// IPC sends are asynchronous: count them so a rank's last messages leave before 'host-idle'.
let unsent = 0
let drained = () => {}
const post = (m) => {
  unsent++
  process.send(m, () => {
    if (--unsent === 0) drained()
  })
}

await hostLoop({
  programFile,
  tsconfig,
  namespace: `molotof-spare-${id}`,
  post,
  onMessage: (handler) => process.on('message', handler),
  onRank: (rank) => {
    // A new run starts from "nowhere yet", not from where this slot's last run stopped.
    if (rank >= 0) status.fill(0, rank * 4, rank * 4 + 3).fill(-1, rank * 4, rank * 4 + 2)
    Atomics.store(current, 0, rank)
  },
  flushed: () => (unsent === 0 ? Promise.resolve() : new Promise((resolve) => (drained = resolve))),
  initFor: (init, control) => ({
    ...init,
    mode: 'run',
    transport: { kind: 'processes', endpoints: init.endpoints },
    status,
    control,
    die,
  }),
})
