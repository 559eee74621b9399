import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmdirSync, statSync, unlinkSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { ConfigError } from '../../errors.js'
import { alive, processStart } from './dir-lock.js'
import { errorCode } from './fs-errors.js'

/**
 * The file that marks a directory as molotof's own: only a directory holding
 * it is ever cleaned, and cleaning removes only the files molotof writes
 * there (see cleanOwnedDirectory). A directory the user named and filled is
 * never removed with its contents.
 */
export const OWNED_MARKER = '.molotof-owned'

/** What the marker says: who made the directory its own, and whether molotof created it. */
export interface DirectoryOwner {
  /** What the directory is for ('memory level', 'sockets'): a sweep cleans only its own kind. */
  purpose: string
  pid: number
  /** Linux: the owner's start time (see dir-lock.ts), so that a reused pid does not keep a leftover alive. */
  pidStart?: string
  host: string
  createdAt: string
  /** molotof created the directory (it removes it once empty); false: an empty directory of the user's adopted as it was. */
  created: boolean
}

/**
 * Which entries of an owned directory molotof wrote: `dir` true for a
 * sub-directory (cleaned the same way, then removed if empty); `path` lets a
 * predicate look inside (a checkpoint folder is molotof's by its content, not
 * its name).
 */
export type OwnEntry = (name: string, dir: boolean, path: string) => boolean

/** The owner record in `dir`'s marker, or undefined when there is none (or it is not molotof's). */
export function ownerOf(dir: string): DirectoryOwner | undefined {
  try {
    const v = JSON.parse(readFileSync(join(dir, OWNED_MARKER), 'utf8')) as Partial<DirectoryOwner>
    if (typeof v.purpose === 'string' && typeof v.pid === 'number' && typeof v.host === 'string') {
      const pidStart = typeof v.pidStart === 'string' ? { pidStart: v.pidStart } : {}
      return { purpose: v.purpose, pid: v.pid, ...pidStart, host: v.host, createdAt: String(v.createdAt), created: v.created === true }
    }
  } catch {
    // absent or unreadable: not provably molotof's
  }
  return undefined
}

function ownerRecord(purpose: string, created: boolean): string {
  const pidStart = processStart(process.pid)
  const owner: DirectoryOwner = { purpose, pid: process.pid, ...(pidStart === undefined ? {} : { pidStart }), host: hostname(), createdAt: new Date().toISOString(), created }
  return JSON.stringify(owner) + '\n'
}

/** Options of claimDirectory. */
export interface ClaimOptions {
  /** Written in the marker; a sweep of abandoned directories compares it. */
  purpose: string
  /**
   * The sub-directory molotof uses when `dir` exists and holds anything of
   * the user's (files without a marker): `dir` itself is then never written.
   * Without it such a directory is refused.
   */
  subdirectory?: string
  /** The directory's name is molotof's own choice (the default memory level): an unmarked one is adopted whatever it holds. */
  ownName?: boolean
  /** How to name the directory in a refusal (the option that gave it). */
  noun?: string
}

/**
 * The directory molotof may write to and later clean, for `dir`:
 * - `dir` absent: created with its marker (atomically: made under a
 *   temporary name, marked, then renamed, so a concurrent rank sees it
 *   marked or not at all), and removed by cleaning once empty;
 * - `dir` already marked (an earlier attempt or run): `dir`;
 * - `dir` an empty directory of the user's: marked and used; cleaning
 *   leaves the directory itself;
 * - `dir` holding anything else: `dir/<subdirectory>`, claimed the same way
 *   (refused when that one also holds files of the user's).
 * Safe when several ranks claim the same directory at once: they all get the
 * same answer. Throws ConfigError when `dir` is a file.
 *
 * ```ts
 * claimDirectory('/dev/shm/mine', { purpose: 'memory level', subdirectory: 'molotof-memory' })
 * // '/dev/shm/mine' when absent or empty; '/dev/shm/mine/molotof-memory' when it holds the user's files
 * ```
 */
export function claimDirectory(dir: string, o: ClaimOptions): string {
  const noun = o.noun ?? 'the directory'
  for (let attempt = 0; attempt < 5; attempt++) {
    let isDir: boolean | undefined
    try {
      isDir = statSync(dir).isDirectory() // a symlink to a directory is that directory
    } catch (e) {
      if (errorCode(e) !== 'ENOENT') throw e
    }
    if (isDir === undefined) {
      if (createMarked(dir, o.purpose)) return dir
      continue // created meanwhile by another rank: look again
    }
    if (!isDir) throw new ConfigError(`${noun} ${dir} is a file, not a directory`)
    if (ownerOf(dir) !== undefined) return dir
    const names = readdirSync(dir)
    if (names.length === 0 || o.ownName) {
      try {
        writeFileSync(join(dir, OWNED_MARKER), ownerRecord(o.purpose, o.ownName === true), { flag: 'wx' })
      } catch (e) {
        if (errorCode(e) !== 'EEXIST') throw e // another rank marked it first
      }
      return dir
    }
    if (names.includes(OWNED_MARKER)) continue // being marked by another rank right now
    if (o.subdirectory === undefined) throw new ConfigError(`${noun} ${dir} holds files that are not molotof's: name an empty or new directory`)
    return claimDirectory(join(dir, o.subdirectory), { purpose: o.purpose, noun: `${noun}'s sub-directory` })
  }
  throw new ConfigError(`${noun} ${dir} keeps changing while molotof claims it: is another program using it?`)
}

/** Creates `dir` already marked; false when something else created it first. */
function createMarked(dir: string, purpose: string): boolean {
  const parent = dirname(dir)
  mkdirSync(parent, { recursive: true })
  const tmp = mkdtempSync(join(parent, `.${basename(dir)}.claim-`))
  chmodSync(tmp, 0o755) // as mkdir would make it, not mkdtemp's private 0700
  writeFileSync(join(tmp, OWNED_MARKER), ownerRecord(purpose, true))
  try {
    renameSync(tmp, dir)
    return true
  } catch (e) {
    unlinkSync(join(tmp, OWNED_MARKER))
    rmdirSync(tmp)
    const code = errorCode(e)
    if (code === 'EEXIST' || code === 'ENOTEMPTY' || code === 'ENOTDIR' || code === 'EISDIR') return false
    throw e
  }
}

/**
 * A fresh private directory under `base` named `<prefix>XXXXXX` (mkdtemp),
 * marked as molotof's with `purpose`.
 */
export function createOwnedTempDirectory(base: string, prefix: string, purpose: string): string {
  const dir = mkdtempSync(join(base, prefix))
  writeFileSync(join(dir, OWNED_MARKER), ownerRecord(purpose, true))
  return dir
}

/**
 * Removes from a marked directory the entries `own` says molotof wrote
 * (regular files and sockets; never a symlink's target), recursing into its
 * own sub-directories and removing them once empty; then its marker and the
 * directory itself when molotof created it and nothing else is left. An
 * unmarked directory is not touched. Returns the paths left behind (not
 * molotof's); never throws for an entry that vanished meanwhile.
 *
 * ```ts
 * cleanOwnedDirectory('/dev/shm/molotof-3f1c0a9e12b4', isStoreEntry)   // [] when only checkpoints were there
 * ```
 */
export function cleanOwnedDirectory(dir: string, own: OwnEntry): string[] {
  const owner = ownerOf(dir)
  if (owner === undefined) return []
  const left = cleanEntries(dir, own)
  if (left.length > 0) return left
  try {
    unlinkSync(join(dir, OWNED_MARKER))
    if (owner.created) rmdirSync(dir)
  } catch (e) {
    const code = errorCode(e)
    // A file appeared meanwhile: the directory stays, with it.
    if (code !== 'ENOENT' && code !== 'ENOTEMPTY' && code !== 'EEXIST') throw e
  }
  return left
}

/**
 * Removes a directory molotof created that nothing was written to (it holds
 * its marker alone): a run refused before its first write leaves no trace.
 * Anything else in it, or a directory of the user's, keeps it as it is.
 */
export function removeIfUnused(dir: string): void {
  const owner = ownerOf(dir)
  if (owner === undefined || !owner.created) return
  try {
    if (readdirSync(dir).some((n) => n !== OWNED_MARKER)) return
    unlinkSync(join(dir, OWNED_MARKER))
    rmdirSync(dir)
  } catch (e) {
    const code = errorCode(e)
    // Removed by another rank at the same moment, or a file appeared meanwhile: the directory stays, with it.
    if (code !== 'ENOENT' && code !== 'ENOTEMPTY' && code !== 'EEXIST') throw e
  }
}

/**
 * Removes the entries of `dir` that `own` says molotof wrote, recursing into
 * its own sub-directories (each removed once empty); the directory itself
 * stays. Returns the paths left behind.
 */
export function cleanEntries(dir: string, own: OwnEntry): string[] {
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch (e) {
    if (errorCode(e) === 'ENOENT') return []
    throw e
  }
  const left: string[] = []
  for (const name of names) {
    if (name === OWNED_MARKER) continue
    const path = join(dir, name)
    let st: import('node:fs').Stats
    try {
      st = lstatSync(path)
    } catch (e) {
      if (errorCode(e) === 'ENOENT') continue
      throw e
    }
    if (st.isDirectory() && own(name, true, path)) {
      const inner = cleanEntries(path, own)
      if (inner.length > 0) left.push(...inner)
      else if (!removeEmptyDirectory(path)) left.push(path)
    } else if ((st.isFile() || st.isSocket()) && own(name, false, path)) {
      try {
        unlinkSync(path)
      } catch (e) {
        if (errorCode(e) !== 'ENOENT') throw e
      }
    } else {
      left.push(path)
    }
  }
  return left
}

/** rmdir: true when the directory is gone, false when something is still in it. */
export function removeEmptyDirectory(dir: string): boolean {
  try {
    rmdirSync(dir)
    return true
  } catch (e) {
    const code = errorCode(e)
    if (code === 'ENOENT') return true
    if (code === 'ENOTEMPTY' || code === 'EEXIST') return false
    throw e
  }
}

/**
 * Cleans the directories `<base>/<prefix>*` that a molotof process of this
 * host left behind when it was killed: only those marked with `purpose`
 * whose owner is no longer alive (its pid gone, or reused by another
 * process), and in them only what `own` accepts.
 * Returns the directories removed.
 *
 * ```ts
 * sweepAbandonedDirectories('/tmp', 'molotof-', 'sockets', isSocketEntry)   // ['/tmp/molotof-a1B2c3'] after a SIGKILLed supervisor
 * ```
 */
export function sweepAbandonedDirectories(base: string, prefix: string, purpose: string, own: OwnEntry): string[] {
  let names: string[]
  try {
    names = readdirSync(base)
  } catch {
    // No such base: nothing was left there.
    return []
  }
  const host = hostname()
  const removed: string[] = []
  for (const name of names) {
    if (!name.startsWith(prefix)) continue
    const dir = join(base, name)
    const owner = ownerOf(dir)
    if (owner === undefined || owner.purpose !== purpose || owner.host !== host || owner.pid === process.pid) continue
    if (alive({ pid: owner.pid, host: owner.host, startedAt: owner.createdAt, ...(owner.pidStart === undefined ? {} : { pidStart: owner.pidStart }) })) continue
    try {
      if (cleanOwnedDirectory(dir, own).length === 0) removed.push(dir)
    } catch {
      // Another user's, or being swept by another run at the same moment: left as it is.
    }
  }
  return removed
}
