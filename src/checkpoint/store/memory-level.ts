import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, statfsSync, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'
import { ConfigError } from '../../errors.js'
import { claimDirectory, ownerOf } from './owned-dir.js'

/** The RAM file system the memory level lives in by default (Linux). */
export const RAM_ROOT = '/dev/shm'

/**
 * The memory level's directory for a run whose disk level is `diskDir`:
 * `/dev/shm/molotof-<hash of diskDir>`, so a run resumed with the same
 * checkpoint directory finds its memory copies again (if the node kept them).
 * Throws ConfigError where there is no /dev/shm (name a directory in RAM).
 *
 * ```ts
 * memoryDirFor('/scratch/ckpt')   // '/dev/shm/molotof-3f1c0a9e12b4'
 * ```
 */
export function memoryDirFor(diskDir: string): string {
  if (!existsSync(RAM_ROOT)) {
    throw new ConfigError(`the memory level needs a directory in RAM and ${RAM_ROOT} does not exist; name a tmpfs directory with --memory-dir`)
  }
  const hash = createHash('sha256').update(resolve(diskDir)).digest('hex').slice(0, 12)
  return join(RAM_ROOT, `molotof-${hash}`)
}

/**
 * The sub-directory the memory level uses inside a `--memory-dir` that
 * already holds files of the user's: the given directory itself is then
 * never written to, nor cleaned.
 */
export const MEMORY_SUBDIRECTORY = 'molotof-memory'

/** A directory name memoryDirFor chose (with `{node}`/`{rank}` filled in): molotof's own whatever it holds. */
const DEFAULT_NAME = new RegExp(`^${RAM_ROOT}/molotof-[0-9a-f]{12}(-\\d+)*$`)

/**
 * The directory the memory level writes to for a given or default `dir`
 * (see claimDirectory): `dir` when it is new, empty or already molotof's,
 * else `dir/molotof-memory`. Marks it as molotof's; every rank sharing it
 * may call this at once. ConfigError when `dir` is a file.
 *
 * ```ts
 * claimMemoryDirectory('/dev/shm/mine')   // '/dev/shm/mine/molotof-memory' when /dev/shm/mine holds a file of the user's
 * ```
 */
export function claimMemoryDirectory(dir: string): string {
  return claimDirectory(dir, { purpose: 'memory level', subdirectory: MEMORY_SUBDIRECTORY, ownName: DEFAULT_NAME.test(dir), noun: '--memory-dir' })
}

/**
 * Where an earlier run's memory level is for `dir`, without creating
 * anything (for readers: inspect, a resume): `dir/molotof-memory` when `dir`
 * is not molotof's and that one is, else `dir`.
 */
export function memoryLevelDirectoryIn(dir: string): string {
  if (ownerOf(dir) !== undefined || DEFAULT_NAME.test(dir)) return dir
  const sub = join(dir, MEMORY_SUBDIRECTORY)
  return ownerOf(sub) !== undefined ? sub : dir
}

/**
 * Refuses, before any rank starts, a `--memory-dir` that cannot be the
 * memory level's: empty, the root, the current or home directory, the
 * checkpoint directory itself, a file, or on a file system with no room
 * left. (A directory holding the user's files is fine: the level then uses a
 * sub-directory of its own.) A path with `{node}`/`{rank}` is checked on the
 * ranks, once filled in.
 *
 * ```ts
 * checkMemoryDirectory('/dev/shm/run1', '/scratch/ckpt')   // nothing: fine
 * checkMemoryDirectory('.', '/scratch/ckpt')              // ConfigError: the current directory
 * ```
 */
export function checkMemoryDirectory(given: string, checkpointDir: string, flag = '--memory-dir'): void {
  if (given.trim() === '') throw new ConfigError(`${flag} needs a directory path (got an empty value)`)
  if (given.includes('{node}') || given.includes('{rank}')) return
  const dir = resolve(given)
  const refuse = (what: string) => new ConfigError(`${flag} ${given} is ${what}: the memory level needs a directory of its own (e.g. ${join(RAM_ROOT, 'my-run')})`)
  if (dir === '/') throw refuse('the root directory')
  if (dir === process.cwd()) throw refuse('the current directory')
  if (dir === resolve(homedir())) throw refuse('the home directory')
  if (!checkpointDir.includes('{') && dir === resolve(checkpointDir)) throw refuse('the checkpoint directory (the disk level)')
  let st: import('node:fs').Stats | undefined
  try {
    st = statSync(dir)
  } catch {
    // absent: created by the ranks
  }
  if (st !== undefined && !st.isDirectory()) throw new ConfigError(`${flag} ${given} is a file, not a directory`)
  // Where the ranks will write: refused now rather than on every rank when that too holds the user's files.
  const used = memoryLevelDirectoryIn(dir)
  if (used === dir && st !== undefined && ownerOf(dir) === undefined && !DEFAULT_NAME.test(dir)) {
    const sub = join(dir, MEMORY_SUBDIRECTORY)
    if (nonEmpty(dir) && existsSync(sub) && (!statSync(sub).isDirectory() || nonEmpty(sub))) {
      throw new ConfigError(`${flag} ${given} holds files of yours, and so does its sub-directory ${MEMORY_SUBDIRECTORY} that the memory level would use: name an empty or new directory`)
    }
  }
  const room = freeBytes(dir)
  if (room !== undefined && room < MIN_FREE_BYTES) {
    throw new ConfigError(`${flag} ${given}: its file system has no room left (${room} bytes free); free some, or name a directory on another one`)
  }
}

function nonEmpty(dir: string): boolean {
  try {
    return readdirSync(dir).length > 0
  } catch {
    // Absent or unreadable: nothing of the user's to keep apart from.
    return false
  }
}

/** Below this, a memory level cannot hold even a small checkpoint: refused at start (the sizes are known only at the first checkpoint). */
const MIN_FREE_BYTES = 64 * 1024

/** Free bytes of the file system `dir` is (or will be) on: its nearest existing ancestor's. */
function freeBytes(dir: string): number | undefined {
  let at = dir
  while (!existsSync(at) && at !== resolve(at, '..')) at = resolve(at, '..')
  try {
    const st = statfsSync(at)
    return st.bavail * st.bsize
  } catch {
    // No statfs here: the room is unknown, not refused.
    return undefined
  }
}

/**
 * Bytes the memory level can still take on this node: the smaller of the
 * free space of its file system (a tmpfs is capped) and the kernel's
 * MemAvailable. Undefined when neither can be read (not Linux).
 */
export function availableMemoryBytes(dir: string): number | undefined {
  let free: number | undefined
  try {
    // The directory may not exist yet: its file system is its parent's.
    const st = statfsSync(existsSync(dir) ? dir : resolve(dir, '..'))
    free = st.bavail * st.bsize
  } catch {
    // No statfs here (another platform): MemAvailable alone decides.
  }
  let available: number | undefined
  try {
    const m = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))
    if (m) available = Number(m[1]) * 1024
  } catch {
    // No /proc (not Linux): the file system's free space alone decides.
  }
  if (free === undefined) return available
  if (available === undefined) return free
  return Math.min(free, available)
}
