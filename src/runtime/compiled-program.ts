import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, extname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { OnLoadArgs, PluginBuild } from 'esbuild'

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
  /**
   * The program's directory resolves `molotof` to another copy than the one
   * starting the ranks: a package the program imports could then load that
   * copy, so the rank pins `molotof` with a resolve hook as with tsx.
   */
  pinMolotof: boolean
}

/** The compiled program, or why the ranks load the program through tsx instead. */
export type CompileOutcome = { compiled: CompiledProgram; why?: undefined } | { compiled?: undefined; why: string }

/** Set to 0 to load programs through tsx in every rank (to compare, or to rule compilation out). */
export const PRECOMPILE_ENV = 'MOLOTOF_PRECOMPILE'

const PROGRAMS_DIR = join('node_modules', '.cache', 'molotof', 'programs')
/** Compiled programs not used for this long are removed when another one is written next to them. */
const STALE_MS = 30 * 24 * 3600 * 1000
const SOURCE = /\.[mc]?[jt]sx?$/
/** What a bundle cannot reproduce: resolution relative to the module at run time, and imports of computed names. */
const UNBUNDLABLE: readonly [RegExp, string][] = [
  [/\bimport\.meta\.resolve\b/, 'uses import.meta.resolve'],
  [/\bimport\s*\(\s*(?!['"])/, 'imports a computed module name'],
]

/**
 * Compile a program for its ranks when that changes nothing of how it runs;
 * otherwise say why not (the ranks then load it through tsx, as before).
 * Only a built framework (`dist/`) can be pinned in a plain-JS module; a
 * program Node would load as CommonJS, or one that needs its own location at
 * run time beyond `import.meta.url` / `dirname` / `filename` (which are
 * rewritten to the original file's), is not compiled.
 *
 * @param framework URL of the framework's ESM entry the compiled module
 *   imports as `molotof` (default: this copy's, when built)
 */
export async function compileProgram(programFile: string, tsconfig: string | undefined, framework = builtFrameworkEntry()): Promise<CompileOutcome> {
  if (process.env[PRECOMPILE_ENV] === '0') return { why: `${PRECOMPILE_ENV}=0` }
  if (framework === undefined) return { why: 'the framework runs from its TypeScript sources' }
  if (!loadedAsEsm(programFile)) return { why: 'Node loads the program as CommonJS' }
  const root = projectRoot(programFile)
  if (root === undefined) return { why: 'no node_modules folder above the program to keep the compiled module in' }
  let esbuild: typeof import('esbuild')
  try {
    esbuild = await import('esbuild')
  } catch {
    // esbuild is a dependency of molotof (and of tsx): missing only from a damaged install, where tsx reports the real problem.
    return { why: 'esbuild cannot be loaded' }
  }
  const outDir = join(root, PROGRAMS_DIR)
  const refused: string[] = []
  let result: import('esbuild').BuildResult<{ write: false; metafile: true }>
  try {
    result = await esbuild.build({
      entryPoints: [programFile],
      outfile: join(outDir, 'program.mjs'),
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
            build.onResolve({ filter: /^molotof$/ }, () => ({ path: framework, external: true }))
            build.onLoad({ filter: SOURCE }, (args: OnLoadArgs) => {
              if (args.path.split(/[\\/]/).includes('node_modules')) return undefined
              const text = readFileSync(args.path, 'utf8')
              for (const [pattern, why] of UNBUNDLABLE) if (pattern.test(text)) refused.push(`${args.path} ${why}`)
              if (!text.includes('import.meta')) return undefined
              return { contents: withOwnLocation(text, args.path), loader: loaderOf(args.path), resolveDir: dirname(args.path) }
            })
          },
        },
      ],
    })
  } catch {
    // A syntax error, a module not found: the ranks report it, located, as for any program (load-program.mjs).
    return { why: 'the program does not compile' }
  }
  if (refused.length > 0) return { why: refused[0] }
  const inputs = Object.entries(result.metafile.inputs)
  const cjs = inputs.find(([, i]) => i.format === 'cjs')
  if (cjs) return { why: `${cjs[0]} is a CommonJS module` }
  const modules = inputs.map(([p]) => pathToFileURL(resolve(root, p)).href)
  const bytes = result.outputFiles.find((f) => f.path.endsWith('.mjs'))?.contents
  if (bytes === undefined) return { why: 'esbuild wrote no module' }
  const file = join(outDir, `${createHash('sha256').update(bytes).digest('hex').slice(0, 16)}.mjs`)
  try {
    storeOnce(file, bytes)
  } catch (e) {
    return { why: `cannot write ${file}: ${(e as Error).message}` }
  }
  return { compiled: { file, modules, pinMolotof: !resolvesToFramework(programFile, framework) } }
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

/** Written beside its final name and renamed: ranks never see half a module; the same bytes are written once. */
function storeOnce(file: string, bytes: Uint8Array): void {
  const dir = dirname(file)
  if (existsSync(file)) {
    // Used again: a recent time keeps it from being removed as stale while runs still start ranks from it.
    const now = new Date()
    utimesSync(file, now, now)
    return
  }
  mkdirSync(dir, { recursive: true })
  removeStale(dir)
  const tmp = `${file}.${process.pid}.tmp`
  writeFileSync(tmp, bytes)
  renameSync(tmp, file)
}

function removeStale(dir: string): void {
  const old = Date.now() - STALE_MS
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    try {
      if (statSync(path).mtimeMs < old) unlinkSync(path)
    } catch {
      // Removed by another run at the same moment: nothing left to do.
    }
  }
}

/** The ESM entry of this framework copy when it is built (the file the boot files' `frameworkEntry` names). */
function builtFrameworkEntry(): string | undefined {
  const entry = new URL('./index.js', import.meta.url)
  return entry.protocol === 'file:' && existsSync(entry) && existsSync(new URL('./load-program.mjs', import.meta.url)) ? entry.href : undefined
}

/** Whether Node (and tsx) load this file as an ES module: by its extension, else by the nearest package.json's "type". */
export function loadedAsEsm(file: string): boolean {
  if (/\.m[jt]s$/.test(file)) return true
  if (/\.c[jt]s$/.test(file)) return false
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const pkg = join(dir, 'package.json')
    if (existsSync(pkg)) {
      try {
        return (JSON.parse(readFileSync(pkg, 'utf8')) as { type?: unknown }).type === 'module'
      } catch {
        // An unreadable package.json: Node would fail on it too; tsx then says so.
        return false
      }
    }
    if (dirname(dir) === dir) return false
  }
}

/**
 * The nearest folder above the program with a `node_modules` folder: the
 * compiled module lives under it, so the packages it imports resolve from
 * there as they do from the program (no node_modules lies in between).
 */
function projectRoot(programFile: string): string | undefined {
  for (let dir = dirname(programFile); ; dir = dirname(dir)) {
    try {
      if (statSync(join(dir, 'node_modules')).isDirectory()) return dir
    } catch {
      // none here; keep looking upwards
    }
    if (dirname(dir) === dir) return undefined
  }
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
