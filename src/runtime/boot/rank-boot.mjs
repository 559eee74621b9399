// Entry of every rank thread. Plain JavaScript on purpose: it loads the user's
// program and hands control to the framework copy that program imported, so
// exactly one copy runs per rank (see load-program.mjs).
import { parentPort, workerData } from 'node:worker_threads'
import { runProgram } from './load-program.mjs'

const { programFile, tsconfig, compiled, init } = workerData
const control = {
  postMessage: (m) => parentPort.postMessage(m),
  onMessage: (handler) => parentPort.on('message', handler),
}

// A thread cannot be SIGKILLed on its own: an injected failure ends the thread at once.
await runProgram({ programFile, tsconfig, compiled, rank: init.rank, control }, () => ({ ...init, control, die: () => process.exit(137) }))
