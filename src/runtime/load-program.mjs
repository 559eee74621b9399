// Shared by the rank boot files (threads and processes): load the user's
// program — TypeScript through tsx, no build step — and hand `init` to the
// entry that the program's copy of molotof attached to it. Every outcome
// that is not the program running is reported as a load error.
//
// The program's `molotof` is always the framework copy these boot files
// belong to, i.e. the copy of the CLI (or `launch`) that started the rank:
// dist/ when it runs from the built package, src/ when it runs from sources.
import { existsSync } from 'node:fs'
import Module, { register } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'

const RANK_ENTRY = Symbol.for('molotof.rank-entry')

/** This copy's public entry: ESM and CommonJS (the same file when running from sources). */
function frameworkEntry() {
  const built = new URL('./index.js', import.meta.url)
  if (existsSync(built)) return { esm: built.href, cjs: fileURLToPath(new URL('./index.cjs', import.meta.url)) }
  const source = new URL('../index.ts', import.meta.url)
  return { esm: source.href, cjs: fileURLToPath(source) }
}

/** Make `molotof` resolve to this copy, for ESM imports (a loader hook) and CommonJS requires. */
function pinFramework(entry) {
  register(new URL('./resolve-molotof.mjs', import.meta.url), { data: { entry: entry.esm } })
  const resolveFilename = Module._resolveFilename
  Module._resolveFilename = function (request, ...rest) {
    return resolveFilename.call(this, request === 'molotof' ? entry.cjs : request, ...rest)
  }
}

/**
 * @param {{ programFile: string, tsconfig?: string, rank: number, control: { postMessage(m: unknown): void } }} where
 * @param {(program: object) => object} initFor the init object for the program's entry
 */
export async function runProgram({ programFile, tsconfig, rank, control }, initFor) {
  try {
    const loaded = await loadProgram({ programFile, tsconfig, namespace: `molotof-rank-${rank}` })
    if ('error' in loaded) {
      control.postMessage({ type: 'load-error', rank, message: loaded.error })
      return
    }
    await loaded.program[RANK_ENTRY](initFor(loaded.program))
  } catch (e) {
    control.postMessage({ type: 'load-error', rank, message: `cannot load ${programFile}: ${e && e.stack ? e.stack : String(e)}` })
  }
}

/**
 * Load the program without running it (warm spares load ahead, then run it
 * for each rank they are given). Resolves to the program, whose entry is
 * `program[Symbol.for('molotof.rank-entry')]`, or to the reason it cannot run.
 *
 * @param {{ programFile: string, tsconfig?: string, namespace: string }} what
 * @returns {Promise<{ program: object } | { error: string }>}
 */
export async function loadProgram({ programFile, tsconfig, namespace }) {
  try {
    const url = pathToFileURL(programFile).href
    const entry = frameworkEntry()
    const { register: registerTsx } = await import('tsx/esm/api')
    const { register: registerTsxCjs } = await import('tsx/cjs/api')
    // tsx loads TypeScript (the program and, from sources, molotof itself);
    // the hook registered after it runs first, so `paths` cannot redirect `molotof`.
    const tsx = registerTsx({ namespace, tsconfig: tsconfig ?? undefined })
    registerTsxCjs()
    pinFramework(entry)
    const mod = await tsx.import(url, import.meta.url)
    const program = programOf(mod)
    if (!program) return { error: `${programFile} does not export a molotof program: write \`export default defineProgram({ ... })\`` }
    return { program }
  } catch (e) {
    return { error: `cannot load ${programFile}: ${e && e.stack ? e.stack : String(e)}` }
  }
}

/** The default export (`export default defineProgram(...)`), also when the module was compiled to CommonJS. */
function programOf(mod) {
  for (const m of [mod.default, mod.program, mod.default?.default, mod.default?.program]) {
    if (m && typeof m[RANK_ENTRY] === 'function') return m
  }
  return undefined
}
