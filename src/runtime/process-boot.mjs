// Entry of every rank process (the processes transport; rank-boot.mjs is its
// thread twin). Plain JavaScript on purpose: it loads the user's program
// (TypeScript through tsx, no build step) and hands control to the framework
// copy that program imported.
//
//   node process-boot.mjs <base64 of v8.serialize(init)>     (fd 3: IPC, fd 4: heartbeat pipe)
//
// init: the attempt's RankGroupSpec for this rank, plus `rank` and `endpoints`
// (the Unix socket path of every rank), or `tcp` ({ host, generation }: the TCP
// transport, endpoints exchanged through the launcher).
//
// A heartbeat thread writes this rank's status slot to fd 4 whenever it
// changes (looked at every POLL_MS) and at least every heartbeatMs, so the
// launcher can tell a long computation (beats go on) from a hung or stopped
// process (beats stop), and knows where a rank killed outright was.
//
// SIGINT and SIGTERM (Ctrl-C at a terminal, a batch scheduler: they reach the
// whole process group) do not kill a rank: they are forwarded to the
// launcher, whose supervisor makes every rank checkpoint and stop.
import { writeSync } from 'node:fs'
import { deserialize } from 'node:v8'
import { Worker } from 'node:worker_threads'
import { runProgram } from './load-program.mjs'

const HEARTBEAT_FD = 4
// How often the heartbeat thread looks at the status slot: a failure report is at most this far behind the rank.
const POLL_MS = 2
// Same order as PHASES in status.ts (only used to name the phase of an uncaught error);
// test/runtime/boot-constants.test.ts checks that the two agree.
const PHASES = ['start', 'light', 'init', 'calculate', 'route', 'checkpoint', 'swap', 'replay', 'restore', 'done']

const spec = deserialize(Buffer.from(process.argv[2] ?? '', 'base64'))
// The rest of the spec (argv, ft, inject, ...) goes to the rank as it is.
const { programFile, tsconfig, endpoints, tcp, heartbeatMs, ...common } = spec
const { rank, size } = common

// The status slots (4 Int32 per rank, see status.ts); only this rank's slot is used here.
const status = new Int32Array(new SharedArrayBuffer(size * 16))
for (let r = 0; r < size; r++) status[r * 4] = status[r * 4 + 1] = -1
const seq = new Int32Array(new SharedArrayBuffer(4))

/**
 * Write one heartbeat record (layout in heartbeat.ts). Runs in the heartbeat
 * thread and, for a last word before dying, in the main thread; both share
 * `seq`. Returns false when the launcher is gone (the pipe is broken).
 */
function beat(fd, status, seq, rank) {
  const b = rank * 4
  const rec = new DataView(new ArrayBuffer(24))
  rec.setInt32(0, 0x6d6f6c68, true)
  rec.setInt32(4, Atomics.add(seq, 0, 1), true)
  rec.setInt32(8, Atomics.load(status, b), true)
  rec.setInt32(12, Atomics.load(status, b + 1), true)
  rec.setInt32(16, Atomics.load(status, b + 2), true)
  rec.setInt32(20, Atomics.load(status, b + 3), true)
  try {
    writeSync(fd, new Uint8Array(rec.buffer)) // 24 bytes: atomic on a pipe, never interleaved
  } catch (e) {
    return e.code === 'EAGAIN' // a full pipe only drops this beat
  }
  return true
}

const heartbeat = new Worker(
  `const { workerData } = require('node:worker_threads')
   const { writeSync } = require('node:fs')
   const { fd, status, seq, rank, periodMs } = workerData
   const beat = ${beat.toString()}
   const b = rank * 4
   const nap = new Int32Array(new SharedArrayBuffer(4))
   let lastChanges = -1
   let lastAt = 0
   // A blocking loop: this thread has nothing else to do, and a timer could not poll this often cheaply.
   for (;;) {
     const changes = Atomics.load(status, b + 3)
     const now = performance.now()
     if (changes !== lastChanges || now - lastAt >= periodMs) {
       // The launcher died without killing us: do not outlive it.
       if (!beat(fd, status, seq, rank)) process.kill(process.pid, 'SIGKILL')
       lastChanges = changes
       lastAt = now
     }
     Atomics.wait(nap, 0, 0, ${POLL_MS})
   }`,
  { eval: true, workerData: { fd: HEARTBEAT_FD, status, seq, rank, periodMs: heartbeatMs } },
)
heartbeat.unref() // beats must not keep a finished rank alive
// A thread takes a while to start, longer while the main thread compiles the
// program on a loaded machine; the launcher's hang clock runs from the spawn,
// so the main thread beats until the heartbeat thread is up.
beat(HEARTBEAT_FD, status, seq, rank)
const early = setInterval(() => beat(HEARTBEAT_FD, status, seq, rank), heartbeatMs)
early.unref()
heartbeat.once('online', () => clearInterval(early))
heartbeat.on('error', (e) => process.stderr.write(`rank ${rank}: heartbeat thread failed: ${e.stack ?? e}\n`))

/** Tell the launcher where we are, then die at once (failure injection, lost launcher). */
function die() {
  beat(HEARTBEAT_FD, status, seq, rank)
  process.kill(process.pid, 'SIGKILL')
  process.exit(137) // not reached: SIGKILL is not deferred
}

// IPC sends are asynchronous: count them so the final result is flushed before we disconnect.
let unsent = 0
let drained = () => {}
const control = {
  postMessage: (m) => {
    unsent++
    process.send(m, () => {
      if (--unsent === 0) drained()
    })
  },
  onMessage: (handler) => process.on('message', handler),
}

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    if (process.connected) process.send({ type: 'signal', rank, signal }, () => {})
  })
}

let running = true
process.on('disconnect', () => {
  if (running) die() // the launcher went away
})
process.on('uncaughtException', (e) => {
  beat(HEARTBEAT_FD, status, seq, rank)
  const b = rank * 4
  const err = e instanceof Error ? e : new Error(String(e)) // a thrown non-Error, as an Error to report its message
  const message = {
    type: 'error',
    rank,
    skeleton: status[b],
    step: status[b + 1],
    phase: PHASES[status[b + 2]] ?? 'start',
    name: err.name,
    code: undefined,
    message: `uncaught ${err.message}`,
    stack: err.stack,
  }
  if (process.connected) process.send(message, () => process.exit(1))
  else process.exit(1)
})

await runProgram({ programFile, tsconfig, rank, control }, () => ({
  ...common,
  mode: 'run',
  // `tcp` (address and generation) is set by the TCP groups (tcp-group.ts, cluster nodes).
  transport: tcp ? { kind: 'tcp', ...tcp } : { kind: 'processes', endpoints },
  status,
  control,
  die,
}))

running = false
if (unsent > 0) await new Promise((resolve) => (drained = resolve))
if (process.connected) process.disconnect()
// Nothing should be left to keep us alive; if a program left a timer or a
// handle open, do not linger (the launcher would kill us anyway).
setTimeout(() => process.exit(0), 1000).unref()
