// Entry of every rank process (the processes transport; rank-boot.mjs is its
// thread twin). Plain JavaScript on purpose: it loads the user's program
// (TypeScript through tsx, no build step) and hands control to the framework
// copy that program imported.
//
//   node process-boot.mjs <base64 of v8.serialize(init)>     (fd 3: IPC, fd 4: heartbeat pipe)
//
// init: the attempt's RankGroupSpec for this rank, plus `rank` and `endpoints`
// (the Unix socket path of every rank), or `tcp` ({ host, generation }: the TCP
// transport, endpoints exchanged through the launcher). A TCP rank's key (the
// run's secret, see transport/auth.ts) comes in the environment, never on the
// command line, which every user of the host can read: MOLOTOF_RANK_KEY (hex),
// taken out of the environment before the program loads.
//
// The setup it shares with spare processes (process-host.mjs): stop signals
// forwarded to the launcher, whose supervisor makes every rank checkpoint and
// stop; a heartbeat thread writing this rank's status slot to fd 4; uncaught
// errors reported; IPC sends counted.
import { deserialize } from 'node:v8'
import { startProcessHost } from './process-host.mjs'
import { runProgram } from './load-program.mjs'

const spec = deserialize(Buffer.from(process.argv[2] ?? '', 'base64'))
// The rest of the spec (argv, ft, inject, ...) goes to the rank as it is.
const { programFile, tsconfig, compiled, endpoints, tcp, heartbeatMs, ...common } = spec
const { rank, size } = common
const rankKey = process.env.MOLOTOF_RANK_KEY
delete process.env.MOLOTOF_RANK_KEY

// First, before anything slow: a stop signal from here on is forwarded, never fatal. (One that comes while Node
// itself starts still ends the process; the launcher takes that death as the same stop request, see attempt.ts.)
const current = new Int32Array(new SharedArrayBuffer(4))
current[0] = rank
const { status, die, post, flushed } = startProcessHost({ size, heartbeatMs, current, label: `rank ${rank}` })

const control = { postMessage: post, onMessage: (handler) => process.on('message', handler) }

let running = true
process.on('disconnect', () => {
  if (running) die() // the launcher went away
})

await runProgram({ programFile, tsconfig, compiled, rank, control }, () => ({
  ...common,
  mode: 'run',
  // `tcp` (address and generation) is set by the TCP groups (tcp-group.ts, cluster nodes).
  transport: tcp ? { kind: 'tcp', ...tcp, key: rankKey ? Buffer.from(rankKey, 'hex') : undefined } : { kind: 'processes', endpoints },
  status,
  control,
  die,
}))

running = false
await flushed()
if (process.connected) process.disconnect()
// Nothing should be left to keep us alive; if a program left a timer or a
// handle open, do not linger (the launcher would kill us anyway).
setTimeout(() => process.exit(0), 1000).unref()
