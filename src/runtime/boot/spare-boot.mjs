// Entry of a warm spare process (spares.ts; process-boot.mjs is the one-shot
// twin). Loads the program ahead, then runs it for each rank number the
// launcher assigns (spare-host.mjs), in this same process.
//
//   node spare-boot.mjs <base64 of v8.serialize(host)>     (fd 3: IPC, fd 4: heartbeat pipe)
//
// host: { programFile, tsconfig, compiled, size, heartbeatMs, id }. Each assignment
// carries the rest of a rank's init (the attempt's spec, rank, endpoints).
//
// The heartbeat thread beats from the start, idle or not: the launcher's hang
// clock of a rank assigned to this process runs from the assignment. It
// reports the status slot of the rank running now (none while idle).
import { deserialize } from 'node:v8'
import { beat, reportUncaught, startHeartbeat } from './boot-heartbeat.mjs'
import { clearStatusSlot, createStatusSlots } from './status-layout.mjs'
import { hostLoop } from './spare-host.mjs'

const HEARTBEAT_FD = 4

const { programFile, tsconfig, compiled, size, heartbeatMs, id } = deserialize(Buffer.from(process.argv[2] ?? '', 'base64'))

// Status slots (status-layout.mjs) and the rank running now (-1: idle).
const status = createStatusSlots(size)
const seq = new Int32Array(new SharedArrayBuffer(4))
const current = new Int32Array(new SharedArrayBuffer(4))
current[0] = -1

// SIGINT and SIGTERM (a terminal's Ctrl-C, a scheduler: they reach the whole process group) do not kill a
// spare: a running rank forwards them to the launcher, whose supervisor stops the run gracefully; an idle
// spare has nothing to stop (its launcher got the same signal).
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    const rank = Atomics.load(current, 0)
    if (rank >= 0 && process.connected) process.send({ type: 'signal', rank, signal }, () => {})
  })
}

startHeartbeat({ fd: HEARTBEAT_FD, status, seq, periodMs: heartbeatMs, current, label: `spare ${id}` })

/** Tell the launcher where we are, then die at once (failure injection, lost launcher). */
function die() {
  beat(HEARTBEAT_FD, status, seq, Atomics.load(current, 0))
  process.kill(process.pid, 'SIGKILL')
  process.exit(137) // not reached: SIGKILL is not deferred
}

// A spare lives as long as its launcher wants it: it is killed when not needed.
process.on('disconnect', die)
process.on('uncaughtException', (e) => reportUncaught(e, { fd: HEARTBEAT_FD, status, seq, rank: Atomics.load(current, 0) }))

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
  compiled,
  namespace: `molotof-spare-${id}`,
  post,
  onMessage: (handler) => process.on('message', handler),
  onRank: (rank) => {
    // A new run starts from "nowhere yet", not from where this slot's last run stopped.
    if (rank >= 0) clearStatusSlot(status, rank)
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
