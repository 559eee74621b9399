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
// A heartbeat thread (boot-heartbeat.mjs) writes this rank's status slot to
// fd 4 whenever it changes and at least every heartbeatMs.
//
// SIGINT and SIGTERM (Ctrl-C at a terminal, a batch scheduler: they reach the
// whole process group) do not kill a rank: they are forwarded to the
// launcher, whose supervisor makes every rank checkpoint and stop.
import { deserialize } from 'node:v8'
import { beat, reportUncaught, startHeartbeat } from './boot-heartbeat.mjs'
import { createStatusSlots } from './status-layout.mjs'
import { runProgram } from './load-program.mjs'

const HEARTBEAT_FD = 4

const spec = deserialize(Buffer.from(process.argv[2] ?? '', 'base64'))
// The rest of the spec (argv, ft, inject, ...) goes to the rank as it is.
const { programFile, tsconfig, compiled, endpoints, tcp, heartbeatMs, ...common } = spec
const { rank, size } = common

// First, before anything slow: a stop signal from here on is forwarded, never fatal. (One that comes while Node
// itself starts still ends the process; the launcher takes that death as the same stop request, see attempt.ts.)
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    if (process.connected) process.send({ type: 'signal', rank, signal }, () => {})
  })
}

// The status slots (status-layout.mjs); only this rank's slot is used here.
const status = createStatusSlots(size)
const seq = new Int32Array(new SharedArrayBuffer(4))

startHeartbeat({ fd: HEARTBEAT_FD, status, seq, periodMs: heartbeatMs, rank, label: `rank ${rank}` })

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

let running = true
process.on('disconnect', () => {
  if (running) die() // the launcher went away
})
process.on('uncaughtException', (e) => reportUncaught(e, { fd: HEARTBEAT_FD, status, seq, rank }))

await runProgram({ programFile, tsconfig, compiled, rank, control }, () => ({
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
