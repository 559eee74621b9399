// Shared by the rank boot files (threads and processes): load the user's
// program — TypeScript through tsx, no build step — and hand `init` to the
// entry that the program's own copy of molotof attached to it. Every outcome
// that is not the program running is reported as a load error.
import { pathToFileURL } from 'node:url'

const RANK_ENTRY = Symbol.for('molotof.rank-entry')

/**
 * @param {{ programFile: string, tsconfig?: string, rank: number, control: { postMessage(m: unknown): void } }} where
 * @param {(program: object) => object} initFor the init object for the program's entry
 */
export async function runProgram({ programFile, tsconfig, rank, control }, initFor) {
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
        rank,
        message: `${programFile} does not export a molotof program: write \`export default defineProgram({ ... })\``,
      })
      return
    }
    await program[RANK_ENTRY](initFor(program))
  } catch (e) {
    control.postMessage({ type: 'load-error', rank, message: `cannot load ${programFile}: ${e && e.stack ? e.stack : String(e)}` })
  }
}
