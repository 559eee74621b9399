import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { CodeIdentity } from '../format/code-record.js'
import { findUp } from '../../util/find-up.js'

export type { CodeIdentity }

/** How one file differs between a checkpoint's code and the current code. */
export interface CodeChange {
  /** Path relative to the program file's directory, as stored. */
  file: string
  change: 'changed' | 'added' | 'removed'
}

const DIGEST_HEX = 16

/**
 * The code identity of a program from the URLs of the modules loaded with it
 * (the program file itself included): the program and its local modules, each
 * by a digest of its bytes. Modules under `node_modules` and the framework
 * itself are left out: a checkpoint belongs to a version of the *program*.
 * Unreadable files count as empty.
 *
 * ```ts
 * codeIdentityOf('examples/jacobi/jacobi.ts', loadedUrls)
 * // { hash: '3f0c…', files: { 'jacobi.ts': '9a1e…', 'plate.ts': '…', 'relaxation.ts': '…' } }
 * ```
 */
export function codeIdentityOf(programFile: string, loaded: readonly string[]): CodeIdentity {
  const base = dirname(resolve(programFile))
  const framework = frameworkDir()
  const paths = new Set<string>([resolve(programFile)])
  for (const url of loaded) {
    const path = localPath(url)
    if (path !== undefined && !(framework !== undefined && inside(path, framework))) paths.add(path)
  }
  const files: Record<string, string> = {}
  for (const p of [...paths].sort()) files[relativeName(base, p)] = digestOfFile(p)
  return { hash: hashOf(files), files }
}

/**
 * What differs between the code that wrote a checkpoint and the current code,
 * sorted by file. Empty when the code is the same.
 *
 * ```ts
 * codeChanges(marker.code, current)  // [{ file: 'relaxation.ts', change: 'changed' }]
 * ```
 */
export function codeChanges(stored: CodeIdentity, current: CodeIdentity): CodeChange[] {
  if (stored.hash === current.hash) return []
  const out: CodeChange[] = []
  for (const [file, digest] of Object.entries(stored.files)) {
    const now = current.files[file]
    if (now === undefined) out.push({ file, change: 'removed' })
    else if (now !== digest) out.push({ file, change: 'changed' })
  }
  for (const file of Object.keys(current.files)) if (!(file in stored.files)) out.push({ file, change: 'added' })
  return out.sort((a, b) => a.file.localeCompare(b.file))
}

/**
 * Whether a checkpoint's code includes the current program file (by its name
 * in the program's directory). When it does not, the checkpoint was written
 * by another program file: comparing files on disk would list the other
 * program's modules as removed from this one's directory, files that never
 * were there. The ranks, which know the program's name, tell another program
 * (its fingerprint) from a renamed file of the same one.
 *
 * ```ts
 * includesProgramFile(marker.code, 'examples/swing/swing.ts')   // false for a checkpoint of jacobi.ts
 * ```
 */
export function includesProgramFile(stored: CodeIdentity, programFile: string): boolean {
  const name = relativeName(dirname(resolve(programFile)), resolve(programFile))
  return Object.prototype.hasOwnProperty.call(stored.files, name)
}

/**
 * The files of a checkpoint's code that differ on disk now (re-read from the
 * program's directory): a check the launcher can make before any rank starts.
 * Modules the program imports now but did not then are found by the ranks,
 * which know what they loaded.
 *
 * ```ts
 * codeChangesOnDisk(marker.code, 'examples/jacobi/jacobi.ts')  // [{ file: 'relaxation.ts', change: 'changed' }]
 * ```
 */
export function codeChangesOnDisk(stored: CodeIdentity, programFile: string): CodeChange[] {
  const base = dirname(resolve(programFile))
  const out: CodeChange[] = []
  for (const [file, digest] of Object.entries(stored.files)) {
    const path = join(base, file)
    if (!existsSync(path)) out.push({ file, change: 'removed' })
    else if (digestOfFile(path) !== digest) out.push({ file, change: 'changed' })
  }
  return out.sort((a, b) => a.file.localeCompare(b.file))
}

/**
 * The changes as one line for a message, with paths as the user sees them
 * (relative to the current directory).
 *
 * ```ts
 * describeCodeChanges(changes, programFile)  // 'examples/jacobi/relaxation.ts changed'
 * ```
 */
export function describeCodeChanges(changes: readonly CodeChange[], programFile: string): string {
  return shownFiles(changes, programFile)
    .map((f, i) => `${f} ${changes[i].change}`)
    .join(', ')
}

/**
 * The changed files as the user sees them (relative to the current directory when inside it, else absolute).
 *
 * ```ts
 * shownFiles([{ file: 'relaxation.ts', change: 'changed' }], 'examples/jacobi/jacobi.ts')  // ['examples/jacobi/relaxation.ts']
 * ```
 */
export function shownFiles(changes: readonly CodeChange[], programFile: string): string[] {
  const base = dirname(resolve(programFile))
  return changes.map((c) => shownPath(join(base, c.file)))
}

/**
 * An absolute path as the user sees it: relative to the current directory when inside it.
 *
 * ```ts
 * shownPath(resolve('examples/jacobi/plate.ts'))  // 'examples/jacobi/plate.ts'
 * ```
 */
export function shownPath(path: string): string {
  const r = relative(process.cwd(), path)
  return r === '' || r.startsWith('..') || isAbsolute(r) ? path : r
}

function hashOf(files: Record<string, string>): string {
  const h = createHash('sha256')
  for (const [f, d] of Object.entries(files)) h.update(`${f}\0${d}\n`)
  return h.digest('hex').slice(0, DIGEST_HEX)
}

function digestOfFile(path: string): string {
  let bytes: Uint8Array
  try {
    bytes = readFileSync(path)
  } catch {
    // A module gone or unreadable since it was loaded hashes as empty: its entry then differs, which is the truth.
    bytes = new Uint8Array(0)
  }
  return createHash('sha256').update(bytes).digest('hex').slice(0, DIGEST_HEX)
}

/** The file path of a loaded module's URL when it is a local file outside node_modules. */
function localPath(url: string): string | undefined {
  if (!url.startsWith('file:')) return undefined
  let path: string
  try {
    path = fileURLToPath(url.replace(/[?#].*$/, ''))
  } catch {
    // Not a local file path (a remote or malformed file: URL): nothing of the program to hash.
    return undefined
  }
  return path.split(sep).includes('node_modules') ? undefined : path
}

function relativeName(base: string, path: string): string {
  const r = relative(base, path)
  return (isAbsolute(r) ? path : r).split(sep).join('/')
}

function inside(path: string, dir: string): boolean {
  const r = relative(dir, path)
  return r !== '' && !r.startsWith('..') && !isAbsolute(r)
}

let framework: string | undefined | null = null

/**
 * The folder of this framework copy's code (`src/` of a checkout, `dist/` of
 * the package): the folder under the molotof package root that holds this module.
 */
function frameworkDir(): string | undefined {
  if (framework !== null) return framework
  framework = undefined
  let here: string
  try {
    here = fileURLToPath(import.meta.url)
  } catch {
    // Bundled without a file location: no framework folder to leave out (its files are not local modules then).
    return framework
  }
  framework = findUp(dirname(here), (dir) => {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: unknown }
      return pkg.name === 'molotof' ? join(dir, relative(dir, here).split(sep)[0]) : undefined
    } catch {
      // no package.json here; keep looking upwards
      return undefined
    }
  })
  return framework
}
