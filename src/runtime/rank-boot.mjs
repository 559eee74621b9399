// Entry of every rank thread. Plain JavaScript on purpose: it loads the user's
// program (TypeScript through tsx, no build step) and hands control to the
// framework copy that program imported, so exactly one copy runs per rank.
import { parentPort, workerData } from 'node:worker_threads'
import { pathToFileURL } from 'node:url'

const RANK_ENTRY = Symbol.for('molotof.rank-entry')
const { programFile, tsconfig, init } = workerData

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
    parentPort.postMessage({
      type: 'load-error',
      rank: init.rank,
      message: `${programFile} does not export a molotof program: write \`export default defineProgram({ ... })\``,
    })
  } else {
    await program[RANK_ENTRY]({ ...init, control: parentPort })
  }
} catch (e) {
  parentPort.postMessage({
    type: 'load-error',
    rank: init.rank,
    message: `cannot load ${programFile}: ${e && e.stack ? e.stack : String(e)}`,
  })
}
