// Shared by the rank boot files (threads and processes): load the user's
// program — TypeScript through tsx, no build step — and hand `init` to the
// entry that the program's copy of molotof attached to it. Every outcome
// that is not the program running is reported as a load error.
//
// The program's `molotof` is always the framework copy these boot files
// belong to, i.e. the copy of the CLI (or `launch`) that started the rank:
// dist/ when it runs from the built package, src/ when it runs from sources.
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import Module, { register } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { withSourceLocations } from './source-locations.mjs'

const RANK_ENTRY = Symbol.for('molotof.rank-entry')
// The framework's runtime folder above boot/ (src/runtime/ of the sources,
// dist/ of the package): the loader's and the runtime's own frames are not where a program went wrong.
const BOOT_DIR = fileURLToPath(new URL('..', import.meta.url))

/** This copy's public entry: ESM and CommonJS (the same file when running from sources). */
function frameworkEntry() {
  // Built: dist/boot/ beside dist/index.js. From sources: src/runtime/boot/ below src/index.ts.
  const built = new URL('../index.js', import.meta.url)
  if (existsSync(built)) return { esm: built.href, cjs: fileURLToPath(new URL('../index.cjs', import.meta.url)) }
  // From sources, a CommonJS program gets a shim that keeps the whole framework one CommonJS copy (see the file).
  const source = new URL('../../index.ts', import.meta.url)
  return { esm: source.href, cjs: fileURLToPath(new URL('./source-entry.cjs', import.meta.url)) }
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
 * @param {{ programFile: string, tsconfig?: string, compiled?: Compiled, rank: number, control: { postMessage(m: unknown): void } }} where
 * @param {(program: object) => object} initFor the init object for the program's entry
 */
export async function runProgram({ programFile, tsconfig, compiled, rank, control }, initFor) {
  const loaded = await loadProgram({ programFile, tsconfig, compiled, namespace: `molotof-rank-${rank}` })
  if ('error' in loaded) {
    control.postMessage({ type: 'load-error', rank, message: loaded.error })
    return
  }
  try {
    await loaded.program[RANK_ENTRY]({ ...initFor(loaded.program), code: codeOf(programFile, loaded) })
  } catch (e) {
    control.postMessage({ type: 'load-error', rank, message: `cannot run ${programFile}: ${describeLoadError(withSourceLocations(e), programFile)}` })
  }
}

/**
 * @typedef {{ file: string, modules: string[], framework: string, pinMolotof: boolean, identity: object }} Compiled
 * The program compiled by the launcher (compiled-program.ts), when it was.
 */

/**
 * Load the program without running it (warm spares load ahead, then run it
 * for each rank they are given). Resolves to the program, whose entry is
 * `program[Symbol.for('molotof.rank-entry')]`, with every module loaded with
 * it (URLs: the ranks hash the local ones into the code identity checkpoints
 * carry), or to the reason it cannot run.
 *
 * @param {{ programFile: string, tsconfig?: string, compiled?: Compiled, namespace: string }} what
 * @returns {Promise<{ program: object, modules: string[], identity?: object } | { error: string }>}
 */
export async function loadProgram({ programFile, tsconfig, compiled, namespace }) {
  if (compiled) {
    const loaded = await loadCompiled(programFile, compiled)
    if (loaded) return loaded
  }
  const modules = []
  let program
  try {
    const url = pathToFileURL(programFile).href
    const entry = frameworkEntry()
    const { register: registerTsx } = await import('tsx/esm/api')
    const { register: registerTsxCjs } = await import('tsx/cjs/api')
    // tsx loads TypeScript (the program and, from sources, molotof itself);
    // the hook registered after it runs first, so `paths` cannot redirect `molotof`.
    const tsx = registerTsx({ namespace, tsconfig: tsconfig ?? undefined, onImport: (u) => modules.push(u) })
    registerTsxCjs()
    // A program loaded as CommonJS through the namespaced import carries the namespace: only a CommonJS hook of
    // that namespace resolves its `require('./plate.js')` to plate.ts (ESM-style specifiers, as in the examples).
    registerTsxCjs({ namespace })
    pinFramework(entry)
    // Modules a program loaded as CommonJS require()s are listed in the require cache, not reported by onImport.
    const cache = Module._cache
    const before = new Set(Object.keys(cache))
    const mod = await tsx.import(url, import.meta.url)
    for (const key of Object.keys(cache)) if (!before.has(key) && key.startsWith('/')) modules.push(pathToFileURL(key.replace(/\?.*$/, '')).href)
    program = programOf(mod)
  } catch (e) {
    return { error: `cannot load ${programFile}: ${describeLoadError(e, programFile, modules)}` }
  }
  if (!program) return { error: `${programFile} does not export a molotof program: write \`export default defineProgram({ ... })\`` }
  return { program, modules }
}

/**
 * The compiled program: Node alone, no tsx. Undefined when it cannot be
 * linked here (a rank on another host without the file, a package the
 * bundle's folder does not resolve): tsx then loads the sources, and says
 * what is wrong if anything is. Errors of the program's own code are its.
 */
async function loadCompiled(programFile, compiled) {
  if (!existsSync(compiled.file)) return undefined
  if (compiled.pinMolotof) pinFramework({ ...frameworkEntry(), esm: compiled.framework })
  // No process.setSourceMapsEnabled: an error reported names its source lines through its map, on demand.
  let mod
  try {
    mod = await import(pathToFileURL(compiled.file).href)
  } catch (e) {
    if (LINK_ERRORS.has(e?.code)) return undefined
    return { error: `cannot load ${programFile}: ${describeLoadError(withSourceLocations(e), programFile, compiled.modules)}` }
  }
  const program = programOf(mod)
  if (!program) return { error: `${programFile} does not export a molotof program: write \`export default defineProgram({ ... })\`` }
  return { program, modules: compiled.modules, identity: compiled.identity }
}

/**
 * What the rank tells checkpoints about its code: the modules loaded, and for
 * a compiled program the identity taken when it was compiled.
 *
 * @param {string} programFile
 * @param {{ modules: string[], identity?: object }} loaded
 */
export function codeOf(programFile, loaded) {
  return { programFile, modules: loaded.modules, ...(loaded.identity ? { identity: loaded.identity } : {}) }
}

/**
 * Errors of resolving the compiled module's imports: raised while linking,
 * before any of its code runs (its local modules are inside it; only a
 * literal import() of a package could fail later, and would then run the
 * module's top level a second time through tsx).
 */
const LINK_ERRORS = new Set(['ERR_MODULE_NOT_FOUND', 'ERR_PACKAGE_PATH_NOT_EXPORTED', 'ERR_UNSUPPORTED_DIR_IMPORT', 'ERR_PACKAGE_IMPORT_NOT_DEFINED'])

/** The default export (`export default defineProgram(...)`), also when the module was compiled to CommonJS. */
function programOf(mod) {
  for (const m of [mod?.default, mod?.program, mod?.default?.default, mod?.default?.program]) {
    if (m && typeof m[RANK_ENTRY] === 'function') return m
  }
  return undefined
}

/**
 * One line for a program that cannot be loaded: where (file:line:col) and
 * what, never a stack of the loader's internals.
 */
function describeLoadError(e, programFile, loaded = []) {
  if (!(e instanceof Error)) return String(e)
  // esbuild (through tsx): "Transform failed with 1 error:\n/path/file.ts:2:74: ERROR: Unexpected "*""
  const esbuild = /^(.+?:\d+:\d+): ERROR: (.+)$/m.exec(e.message)
  if (esbuild) return `${shortPath(esbuild[1])}: syntax error: ${esbuild[2]}`
  const where = locationOf(e, programFile) ?? (e.name === 'SyntaxError' ? syntaxErrorLocation(loaded) : undefined)
  const what = `${e.name}: ${e.message.split('\n')[0]}`
  return where ? `${where}: ${what}` : what
}

/**
 * Where the error happened: the syntax error header line, else the first
 * frame in the program file, else the first frame outside node_modules and
 * the boot files.
 */
function locationOf(e, programFile) {
  const lines = (e.stack ?? '').split('\n')
  // V8 puts a syntax error's location on the first line: "file:///path/prog.js:3".
  const head = /^(file:\/\/\S+?:\d+)$/.exec(lines[0] ?? '')
  if (head) return shortPath(head[1])
  const frames = []
  for (const line of lines) {
    const m = /^at (?:.*? \()?((?:file:\/\/)?\/[^()]+?:\d+:\d+)\)?$/.exec(line.trim())
    if (m && !m[1].includes('/node_modules/') && !m[1].includes(BOOT_DIR)) frames.push(shortPath(m[1]))
    // A module tsx loaded as CommonJS runs from a data: URL naming its file; its line numbers are of the compiled code.
    const cjs = /^at .*data:text\/javascript,.*[?&]filePath=([^?&:\s]+)/.exec(line.trim())
    if (cjs) frames.push(shortPath(decodeURIComponent(cjs[1]).replace(/\?.*$/, '')))
  }
  const ownFile = shortPath(programFile)
  return frames.find((f) => f.startsWith(ownFile + ':')) ?? frames[0]
}

/**
 * V8 gives a syntax error in an ES module no location in its stack (Node
 * prints it only for uncaught errors): ask `node --check` about the
 * JavaScript files loaded, newest first (TypeScript errors come located from esbuild).
 */
function syntaxErrorLocation(loaded) {
  const files = loaded
    .filter((u) => u.startsWith('file:') && !u.includes('/node_modules/') && /\.[mc]?jsx?$/.test(u.replace(/[?#].*$/, '')))
    .map((u) => fileURLToPath(u.replace(/[?#].*$/, '')))
  for (const file of [...new Set(files)].reverse()) {
    const r = spawnSync(process.execPath, ['--check', file], { encoding: 'utf8', timeout: 10_000 })
    const m = r.status !== 0 ? /^(\S+?:\d+)$/m.exec(r.stderr ?? '') : null
    if (m) return shortPath(m[1])
  }
  return undefined
}

/** A location relative to the current directory when inside it. */
function shortPath(location) {
  const suffix = /(:\d+)+$/.exec(location)?.[0] ?? ''
  const bare = location.slice(0, location.length - suffix.length)
  const path = bare.startsWith('file://') ? fileURLToPath(bare) : bare
  const cwd = process.cwd() + '/'
  return (path.startsWith(cwd) ? path.slice(cwd.length) : path) + suffix
}
