import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, extname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { OnLoadArgs, PluginBuild } from 'esbuild'
import { codeIdentityOf, shownPath, type CodeIdentity } from '../checkpoint/identity/code.js'
import { InternalError } from '../errors.js'
import { findUp } from '../util/find-up.js'

/**
 * A program compiled once, at run start, into one ES module: its local
 * modules bundled, packages left as imports, `molotof` pinned to the
 * framework copy that starts the ranks. A rank then loads it with Node alone
 * (about 30 ms) instead of registering tsx and compiling every TypeScript
 * module itself (about 250 ms on the development VM), which is most of what a
 * rank process costs to start.
 *
 * ```ts
 * const { compiled } = await compileProgram('/abs/examples/jacobi/jacobi.ts', undefined)
 * // compiled?.file: '…/node_modules/.cache/molotof/programs/3f0c….mjs'
 * ```
 */
export interface CompiledProgram {
  /** Absolute path of the compiled module (content-addressed: its name is a digest of its bytes). */
  file: string
  /** URLs of the program's local modules bundled into it: the code identity checkpoints carry. */
  modules: string[]
  /** URL of the module the program imports as `molotof` (the framework compiled too when it runs from sources). */
  framework: string
  /**
   * The code identity of what was compiled, taken when it was: a rank of this
   * run carries it, not the files as they are on disk when it starts, so a
   * program edited during a run still resumes from the run's own checkpoints
   * with the code that wrote them.
   */
  identity: CodeIdentity
  /**
   * The program's directory resolves `molotof` to another copy than the one
   * starting the ranks: a package the program imports could then load that
   * copy, so the rank pins `molotof` with a resolve hook as with tsx.
   */
  pinMolotof: boolean
}

/**
 * The compiled program, or why the ranks load the program through tsx
 * instead, and whether to say so at run start (`note`: the user can act on
 * it; not when asked for, nor for a program that does not compile, whose
 * ranks report the error).
 */
export type CompileOutcome = { compiled: CompiledProgram; why?: undefined; note?: undefined } | { compiled?: undefined; why: string; note: boolean }

/** Set to 0 to load programs through tsx in every rank (to compare, or to rule compilation out). */
export const PRECOMPILE_ENV = 'MOLOTOF_PRECOMPILE'

const PROGRAMS_DIR = join('node_modules', '.cache', 'molotof', 'programs')
const FRAMEWORK_DIR = join('node_modules', '.cache', 'molotof', 'framework')
/**
 * Compiled modules not used for this long are removed when another one is
 * written next to them (a rank that finds its module gone loads the sources
 * through tsx). The framework's, rewritten at every change of its sources
 * while it is developed, go sooner.
 */
const STALE_MS = { programs: 30 * 24 * 3600 * 1000, framework: 24 * 3600 * 1000 }
const SOURCE = /\.[mc]?[jt]sx?$/
/** What a bundle cannot reproduce: resolution relative to the module at run time, and imports of computed names. */
const UNBUNDLABLE: readonly [RegExp, string][] = [
  [/\bimport\.meta\.resolve\b/, 'uses import.meta.resolve'],
  [/\bimport\s*\(\s*(?!['"])/, 'imports a computed module name'],
]

/**
 * Compile a program for its ranks when that changes nothing of how it runs;
 * otherwise say why not (the ranks then load it through tsx, as before). A
 * program Node would load as CommonJS, or one that needs its own location at
 * run time beyond `import.meta.url` / `dirname` / `filename` (which are
 * rewritten to the original file's), is not compiled. A framework running
 * from its TypeScript sources (a checkout, the tests) is compiled too, the
 * same way, into one module the program imports as `molotof`.
 *
 * @param framework URL of the framework's ESM entry the program imports as
 *   `molotof` (default: this copy's: `dist/index.js` built, `src/index.ts`
 *   from sources)
 */
export async function compileProgram(programFile: string, tsconfig: string | undefined, framework = frameworkEntry()): Promise<CompileOutcome> {
  if (process.env[PRECOMPILE_ENV] === '0') return { why: `${PRECOMPILE_ENV}=0`, note: false }
  if (framework === undefined) return { why: 'the framework has no entry module beside it', note: true }
  if (!loadedAsEsm(programFile)) return { why: 'Node loads the program as CommonJS', note: true }
  const root = projectRoot(programFile)
  if (root === undefined) return { why: 'no node_modules folder above the program to keep the compiled module in', note: true }
  let esbuild: typeof import('esbuild')
  try {
    esbuild = await import('esbuild')
  } catch {
    // esbuild is a dependency of molotof (and of tsx): missing only from a damaged install, where tsx reports the real problem.
    return { why: 'esbuild cannot be loaded', note: true }
  }
  let molotof = framework
  if (/\.[mc]?ts$/.test(new URL(framework).pathname)) {
    const compiled = await compileFramework(esbuild, fileURLToPath(framework))
    if (typeof compiled !== 'string') return { why: compiled.why, note: true }
    molotof = pathToFileURL(compiled).href
  }
  let bundled: Bundled
  try {
    bundled = await bundle(esbuild, programFile, root, join(root, PROGRAMS_DIR), tsconfig, molotof, true)
  } catch {
    // A syntax error, a module not found: the ranks report it, located, as for any program (load-program.mjs).
    return { why: 'the program does not compile', note: false }
  }
  if (bundled.refused.length > 0) return { why: bundled.refused[0], note: true }
  const cjs = bundled.inputs.find((i) => i.format === 'cjs')
  if (cjs) return { why: `${shownPath(cjs.path)} is a CommonJS module`, note: true }
  const modules = bundled.inputs.map((i) => pathToFileURL(i.path).href)
  try {
    const file = storeOnce(join(root, PROGRAMS_DIR), bundled.bytes, STALE_MS.programs)
    const identity = codeIdentityOf(programFile, modules)
    return { compiled: { file, modules, framework: molotof, pinMolotof: !resolvesToFramework(programFile, framework), identity } }
  } catch (e) {
    return { why: `cannot store the compiled program: ${(e as Error).message}`, note: true }
  }
}

/**
 * The framework compiled from its sources: the module, and the size and time
 * of every source file it was compiled from. Kept in memory and beside the
 * module (`framework/last.json`), so a launcher reuses it while no source
 * changed, without compiling again (about 100 ms).
 */
interface FrameworkBuild {
  entry: string
  file: string
  inputs: { path: string; mtimeMs: number; size: number }[]
}
let frameworkBuild: FrameworkBuild | undefined

/** Compile the framework's TypeScript sources (`src/index.ts`) into one module: its path, or why not. */
async function compileFramework(esbuild: typeof import('esbuild'), entry: string): Promise<string | { why: string }> {
  const root = resolve(dirname(entry), '..')
  const record = join(root, FRAMEWORK_DIR, 'last.json')
  for (const last of [frameworkBuild, readRecord(record)]) {
    if (last?.entry === entry && existsSync(last.file) && last.inputs.every(unchanged)) return (frameworkBuild = last).file
  }
  let bundled: Bundled
  try {
    bundled = await bundle(esbuild, entry, root, join(root, FRAMEWORK_DIR), existsSync(join(root, 'tsconfig.json')) ? join(root, 'tsconfig.json') : undefined, undefined, false)
  } catch (e) {
    return { why: `the framework's sources do not compile: ${(e as Error).message.split('\n')[0]}` }
  }
  try {
    const file = storeOnce(join(root, FRAMEWORK_DIR), bundled.bytes, STALE_MS.framework)
    frameworkBuild = { entry, file, inputs: bundled.inputs.map(({ path }) => ({ path, ...sizeAndTime(path) })) }
    replaceFile(record, JSON.stringify(frameworkBuild))
    return file
  } catch (e) {
    return { why: `cannot store the compiled framework: ${(e as Error).message}` }
  }
}

function readRecord(path: string): FrameworkBuild | undefined {
  try {
    const r = JSON.parse(readFileSync(path, 'utf8')) as FrameworkBuild
    return typeof r.entry === 'string' && typeof r.file === 'string' && Array.isArray(r.inputs) ? r : undefined
  } catch {
    // None yet, or unreadable: compiled again.
    return undefined
  }
}

function sizeAndTime(path: string): { mtimeMs: number; size: number } {
  const st = statSync(path)
  return { mtimeMs: st.mtimeMs, size: st.size }
}

function unchanged(input: { path: string; mtimeMs: number; size: number }): boolean {
  try {
    const now = sizeAndTime(input.path)
    return now.mtimeMs === input.mtimeMs && now.size === input.size
  } catch {
    // Gone: the framework changed.
    return false
  }
}

interface Bundled {
  bytes: Uint8Array
  /** The local modules bundled (absolute paths), with the module format esbuild saw. */
  inputs: { path: string; format: string | undefined }[]
  /** Local modules a bundle cannot reproduce, with the reason. */
  refused: string[]
}

/**
 * One ES module of `entry` and the local modules it imports; packages stay
 * imports, `molotof` (when given) becomes that URL. `check`: list the
 * modules that use what a bundle cannot reproduce (a program's; the
 * framework's own code is known not to). Throws what esbuild reports when
 * the sources do not compile.
 */
async function bundle(esbuild: typeof import('esbuild'), entry: string, root: string, outDir: string, tsconfig: string | undefined, molotof: string | undefined, check: boolean): Promise<Bundled> {
  const refused: string[] = []
  const result = await esbuild.build({
    entryPoints: [entry],
    // Where the module will be stored, for the source map's relative paths: esbuild writes nothing.
    outfile: join(outDir, 'bundle.mjs'),
    write: false,
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    keepNames: true,
    sourcemap: 'inline',
    sourcesContent: false,
    metafile: true,
    logLevel: 'silent',
    absWorkingDir: root,
    ...(tsconfig !== undefined ? { tsconfig } : {}),
    plugins: [
      {
        name: 'molotof-program',
        setup(build: PluginBuild) {
          if (molotof !== undefined) build.onResolve({ filter: /^molotof$/ }, () => ({ path: molotof, external: true }))
          build.onLoad({ filter: SOURCE }, (args: OnLoadArgs) => {
            if (args.path.split(/[\\/]/).includes('node_modules')) return undefined
            const text = readFileSync(args.path, 'utf8')
            if (check) for (const [pattern, why] of UNBUNDLABLE) if (pattern.test(text)) refused.push(`${shownPath(args.path)} ${why}`)
            if (!text.includes('import.meta')) return undefined
            return { contents: withOwnLocation(text, args.path), loader: loaderOf(args.path), resolveDir: dirname(args.path) }
          })
        },
      },
    ],
  })
  const bytes = result.outputFiles.find((f) => f.path.endsWith('.mjs'))?.contents
  if (bytes === undefined) throw new InternalError(`esbuild compiled ${entry} into no module`)
  const inputs = Object.entries(result.metafile.inputs).map(([p, i]) => ({ path: resolve(root, p), format: i.format }))
  return { bytes, inputs, refused }
}

/**
 * `import.meta.url`, `.dirname` and `.filename` as literals of the module's
 * own file: bundled, the module runs from the compiled file's location, and
 * data files next to the program must still be found where they are.
 */
function withOwnLocation(text: string, path: string): string {
  return text
    .replace(/\bimport\.meta\.url\b/g, JSON.stringify(pathToFileURL(path).href))
    .replace(/\bimport\.meta\.dirname\b/g, JSON.stringify(dirname(path)))
    .replace(/\bimport\.meta\.filename\b/g, JSON.stringify(path))
}

function loaderOf(path: string): 'ts' | 'tsx' | 'js' | 'jsx' {
  const ext = extname(path)
  if (ext.endsWith('tsx')) return 'tsx'
  if (ext.endsWith('ts')) return 'ts'
  return ext.endsWith('jsx') ? 'jsx' : 'js'
}

/**
 * Stored under a digest of its bytes, written beside its final name and
 * renamed: ranks never see half a module, and the same bytes are written once.
 * Returns the file.
 */
function storeOnce(dir: string, bytes: Uint8Array, staleMs: number): string {
  const file = join(dir, `${createHash('sha256').update(bytes).digest('hex').slice(0, 16)}.mjs`)
  if (existsSync(file)) {
    // Used again: a recent time keeps it from being removed as stale while runs still start ranks from it.
    const now = new Date()
    utimesSync(file, now, now)
    return file
  }
  mkdirSync(dir, { recursive: true })
  removeStale(dir, staleMs)
  replaceFile(file, bytes)
  return file
}

/** Written beside its name and renamed over it: a reader sees the old file or the whole new one (no fsync: a cache). */
function replaceFile(path: string, data: Uint8Array | string): void {
  const tmp = `${path}.${process.pid}.tmp`
  writeFileSync(tmp, data)
  renameSync(tmp, path)
}

function removeStale(dir: string, staleMs: number): void {
  const old = Date.now() - staleMs
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    try {
      if (statSync(path).mtimeMs < old) unlinkSync(path)
    } catch {
      // Removed by another run at the same moment: nothing left to do.
    }
  }
}

/** The ESM entry of this framework copy: `dist/index.js` beside the built code, else `src/index.ts` of the sources. */
function frameworkEntry(): string | undefined {
  for (const candidate of ['./index.js', '../index.ts']) {
    const entry = new URL(candidate, import.meta.url)
    if (entry.protocol === 'file:' && existsSync(entry)) return entry.href
  }
  return undefined
}

/** Whether Node (and tsx) load this file as an ES module: by its extension, else by the nearest package.json's "type". */
export function loadedAsEsm(file: string): boolean {
  if (/\.m[jt]s$/.test(file)) return true
  if (/\.c[jt]s$/.test(file)) return false
  const esm = findUp(dirname(file), (dir) => {
    const pkg = join(dir, 'package.json')
    if (!existsSync(pkg)) return undefined
    try {
      return (JSON.parse(readFileSync(pkg, 'utf8')) as { type?: unknown }).type === 'module'
    } catch {
      // An unreadable package.json: Node would fail on it too; tsx then says so.
      return false
    }
  })
  return esm ?? false
}

/**
 * The nearest folder above the program with a `node_modules` folder: the
 * compiled module lives under it, so the packages it imports resolve from
 * there as they do from the program (no node_modules lies in between).
 */
function projectRoot(programFile: string): string | undefined {
  return findUp(dirname(programFile), (dir) => {
    try {
      return statSync(join(dir, 'node_modules')).isDirectory() ? dir : undefined
    } catch {
      // none here; keep looking upwards
      return undefined
    }
  })
}

/** Whether `molotof` from the program's folder is this framework copy (then no resolve hook is needed). */
function resolvesToFramework(programFile: string, framework: string): boolean {
  try {
    const pkg = createRequire(programFile).resolve('molotof/package.json')
    return resolve(fileURLToPath(framework), '..', '..') === dirname(pkg)
  } catch {
    // Not resolvable from there (no molotof installed beside the program): pinned, to be sure.
    return false
  }
}
