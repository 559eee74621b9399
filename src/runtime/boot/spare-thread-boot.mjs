// Entry of a warm spare thread (spares.ts, threads transport; rank-boot.mjs is
// the one-shot twin). Loads the program ahead, then runs it for each rank
// number the launcher assigns (spare-host.mjs). Each assignment carries the
// rank's whole init: its ends of the channel mesh and the status slots.
import { parentPort, workerData } from 'node:worker_threads'
import { hostLoop } from './spare-host.mjs'

const { programFile, tsconfig, compiled, id } = workerData

await hostLoop({
  programFile,
  tsconfig,
  compiled,
  namespace: `molotof-spare-${id}`,
  post: (m) => parentPort.postMessage(m),
  onMessage: (handler) => parentPort.on('message', handler),
  // A thread cannot be SIGKILLed on its own: an injected failure ends the thread at once.
  initFor: (init, control) => ({ ...init, mode: 'run', control, die: () => process.exit(137) }),
})
