// Entry of a warm spare process (spares.ts; process-boot.mjs is the one-shot
// twin). Loads the program ahead, then runs it for each rank number the
// launcher assigns (spare-host.mjs), in this same process.
//
//   node spare-boot.mjs <base64 of v8.serialize(host)>     (fd 3: IPC, fd 4: heartbeat pipe)
//
// host: { programFile, tsconfig, compiled, size, heartbeatMs, id }. Each assignment
// carries the rest of a rank's init (the attempt's spec, rank, endpoints; or
// `tcp` for a spare node's rank of a cluster run).
//
// The heartbeat thread beats from the start, idle or not: the launcher's hang
// clock of a rank assigned to this process runs from the assignment. It
// reports the status slot of the rank running now (none while idle).
//
// The setup it shares with one-shot rank processes is process-host.mjs.
import { deserialize } from 'node:v8'
import { startProcessHost } from './process-host.mjs'
import { clearStatusSlot } from './status-layout.mjs'
import { hostLoop } from './spare-host.mjs'

const { programFile, tsconfig, compiled, size, heartbeatMs, id } = deserialize(Buffer.from(process.argv[2] ?? '', 'base64'))
// A spare node's warm process gets the run's key as every rank process does (process-boot.mjs): from its
// environment, taken out before the program loads.
const rankKey = process.env.MOLOTOF_RANK_KEY
delete process.env.MOLOTOF_RANK_KEY

// The rank running now (-1: idle): a stop signal is forwarded for it, an idle spare has nothing to stop.
const current = new Int32Array(new SharedArrayBuffer(4))
current[0] = -1
const { status, die, post, flushed } = startProcessHost({ size, heartbeatMs, current, label: `spare ${id}` })

// A spare lives as long as its launcher wants it: it is killed when not needed.
process.on('disconnect', die)

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
  flushed,
  initFor: (init, control) => ({
    ...init,
    mode: 'run',
    // `tcp` (address and generation): a spare node's warm rank of a cluster run (node-group.ts, startWarmHosts).
    transport: init.tcp ? { kind: 'tcp', ...init.tcp, key: rankKey ? Buffer.from(rankKey, 'hex') : undefined } : { kind: 'processes', endpoints: init.endpoints },
    status,
    control,
    die,
  }),
})
