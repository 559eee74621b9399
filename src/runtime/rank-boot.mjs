// Entry of every rank thread. Plain JavaScript on purpose: it loads the user's
// program (TypeScript through tsx, no build step) and hands control to the
// framework copy that program imported, so exactly one copy runs per rank.
import { parentPort, workerData } from 'node:worker_threads'
import { pathToFileURL } from 'node:url'

const RANK_ENTRY = Symbol.for('molotof.rank-entry')
const { programFile, tsconfig, init } = workerData
const control = {
  postMessage: (m) => parentPort.postMessage(m),
  onMessage: (handler) => parentPort.on('message', handler),
}

try {
  const url = pathToFileURL(programFile).href
  let mod
  if (/\.[mc]?tsx?$/.test(programFile)) {
    const { tsImport } = await import('tsx/esm/api')
    mod = await tsImport(url, { parentURL: import.meta.url, tsconfig: tsconfig ?? undefined })
  } else {
    mod = await import(url)
  }
  const program = mod.default ?? mod.program
  if (!program || typeof program[RANK_ENTRY] !== 'function') {
    control.postMessage({
      type: 'load-error',
      rank: init.rank,
      message: `${programFile} does not export a molotof program: write \`export default defineProgram({ ... })\``,
    })
  } else {
    // A thread cannot be SIGKILLed on its own: an injected failure ends the thread at once.
    await program[RANK_ENTRY]({ ...init, control, die: () => process.exit(137) })
  }
} catch (e) {
  control.postMessage({
    type: 'load-error',
    rank: init.rank,
    message: `cannot load ${programFile}: ${e && e.stack ? e.stack : String(e)}`,
  })
}
