import { randomBytes } from 'node:crypto'
import { readFileSync, unlinkSync } from 'node:fs'
import { link, readFile, rename, unlink, writeFile } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { DirectoryLockedError, type LockHolder } from '../../errors.js'
import { errorCode } from './fs-errors.js'

/** Name of the lock file inside a checkpoint directory. */
export const LOCK_FILE = 'LOCK'

/** What the lock file says about its holder (JSON). */
export interface LockRecord extends LockHolder {
  /** Linux: the holder's start time in clock ticks after boot (/proc/<pid>/stat), to tell a reused pid apart. */
  pidStart?: string
}

/** A held lock: release it when the run ends (a process that exits without releasing leaves a stale lock, which the next run takes over). */
export interface DirectoryLock {
  readonly path: string
  readonly holder: LockRecord
  /** The stale lock this one replaced, if any (a run that was killed). */
  readonly tookOver: LockRecord | undefined
  release(): Promise<void>
}

/**
 * Takes the lock of a checkpoint directory (which must exist): one run per
 * directory at a time. A lock whose holder is gone — a run killed with
 * SIGKILL never releases it — is taken over: on the same host, a holder is
 * gone when its pid no longer exists, is a zombie (killed, not reaped yet by
 * its parent), or belongs to a process started at another time (pid reuse).
 * A live holder, or one on another host (which cannot be checked from
 * here), refuses with DirectoryLockedError naming it.
 * Filesystem errors (read-only, permissions) are thrown as they come: taking
 * the lock is the run's first write to the directory.
 *
 * ```ts
 * const lock = await acquireDirectoryLock('/scratch/ckpt')
 * try { await run() } finally { await lock.release() }
 * ```
 */
export async function acquireDirectoryLock(dir: string): Promise<DirectoryLock> {
  const path = join(dir, LOCK_FILE)
  const me: LockRecord = { pid: process.pid, host: hostname(), startedAt: new Date().toISOString(), pidStart: processStart(process.pid) }
  const text = JSON.stringify(me) + '\n'
  // Written whole under a private name, then linked in place: other runs never read a half-written lock.
  const candidate = `${path}.${process.pid}-${randomBytes(4).toString('hex')}`
  await writeFile(candidate, text, { flag: 'wx', mode: 0o644 })
  let tookOver: LockRecord | undefined
  try {
    for (let tries = 0; ; tries++) {
      if (await linkOrCreate(candidate, path, text)) break
      const raw = await readFile(path, 'utf8').catch((e: unknown) => (errorCode(e) === 'ENOENT' ? undefined : Promise.reject(e)))
      if (raw === undefined) continue // released meanwhile: try again
      const holder = parseRecord(raw)
      if (holder && alive(holder)) throw new DirectoryLockedError(dir, holder, hintFor(holder, path))
      if (tries >= 3) throw new DirectoryLockedError(dir, holder ?? unknownHolder, 'Other runs keep taking this lock; try again.')
      // Stale: move exactly that lock away. If another run replaced it meanwhile, put theirs back and look again.
      const aside = `${path}.stale-${process.pid}-${randomBytes(4).toString('hex')}`
      try {
        await rename(path, aside)
      } catch (e) {
        if (errorCode(e) === 'ENOENT') continue
        throw e
      }
      const moved = await readFile(aside, 'utf8').catch(() => '') // unreadable: not the lock we judged stale
      if (moved !== raw) {
        // Best effort to put the other run's lock back; if a third run took the name meanwhile, the loop looks again.
        await link(aside, path).catch(() => undefined)
        await unlink(aside).catch(() => undefined) // the moved-aside name only; the lock is `path`
        continue
      }
      await unlink(aside).catch(() => undefined) // a stale lock's leftover: harmless if it stays
      tookOver = holder ?? unknownHolder
    }
  } finally {
    await unlink(candidate).catch(() => undefined) // our private candidate name: harmless if it stays
  }
  return held(path, me, text, tookOver)
}

/**
 * Who holds the lock of `dir` now, if anyone (for messages and `inspect`).
 *
 * ```ts
 * const h = await lockHolder('/scratch/ckpt')   // { pid: 4242, host: 'node7', startedAt: '…' } or undefined
 * ```
 */
export async function lockHolder(dir: string): Promise<LockRecord | undefined> {
  const raw = await readFile(join(dir, LOCK_FILE), 'utf8').catch(() => undefined) // no readable lock: no holder to name
  return raw === undefined ? undefined : parseRecord(raw)
}

/**
 * Whether the process a lock names still runs. On another host nothing can be
 * checked: assume it does (the message tells how to remove a lock left behind).
 *
 * ```ts
 * if (h && !alive(h)) console.log('stale lock: the next run takes it over')
 * ```
 */
export function alive(holder: LockRecord): boolean {
  if (holder.host !== hostname()) return true
  try {
    process.kill(holder.pid, 0)
  } catch (e) {
    if (errorCode(e) === 'ESRCH') return false
  }
  // The pid exists (or is not ours to signal): is it still the same process, and still running? A killed
  // run whose parent has not reaped it yet (a shell busy with the next command) is a zombie: it is gone.
  const stat = processStat(holder.pid)
  if (stat?.state === 'Z') return false
  const start = stat?.start
  return holder.pidStart === undefined || start === undefined || start === holder.pidStart
}

const unknownHolder: LockRecord = { pid: 0, host: 'unknown host', startedAt: 'unknown time' }

function held(path: string, holder: LockRecord, text: string, tookOver: LockRecord | undefined): DirectoryLock {
  let released = false
  // A process that ends without release() (process.exit, an uncaught error) still frees its lock.
  const onExit = () => releaseSync()
  const releaseSync = () => {
    if (released) return
    released = true
    process.off('exit', onExit)
    try {
      if (readFileSync(path, 'utf8') === text) unlinkSync(path)
    } catch {
      // already gone
    }
  }
  process.on('exit', onExit)
  return {
    path,
    holder,
    tookOver,
    release: async () => releaseSync(),
  }
}

/** link() makes the lock appear atomically with its whole content; file systems without hard links get an exclusive create. */
async function linkOrCreate(candidate: string, path: string, text: string): Promise<boolean> {
  try {
    await link(candidate, path)
    return true
  } catch (e) {
    const code = errorCode(e)
    if (code === 'EEXIST') return false
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw e
  }
  try {
    await writeFile(path, text, { flag: 'wx', mode: 0o644 })
    return true
  } catch (e) {
    if (errorCode(e) === 'EEXIST') return false
    throw e
  }
}

function parseRecord(raw: string): LockRecord | undefined {
  try {
    const v = JSON.parse(raw) as Partial<LockRecord>
    if (typeof v.pid === 'number' && typeof v.host === 'string' && typeof v.startedAt === 'string') {
      return { pid: v.pid, host: v.host, startedAt: v.startedAt, ...(typeof v.pidStart === 'string' ? { pidStart: v.pidStart } : {}) }
    }
  } catch {
    // not JSON: a damaged lock, treated as stale
  }
  return undefined
}

function hintFor(holder: LockRecord, path: string): string {
  if (holder.host !== hostname()) {
    return `molotof cannot tell from ${hostname()} whether it still runs: wait for it, use another --checkpoint-dir, or, if that run is gone, delete ${path}.`
  }
  return 'Wait for it to finish (SIGTERM makes it checkpoint and stop), or use another --checkpoint-dir.'
}

/** Linux: field 22 of /proc/<pid>/stat (start time after boot, in clock ticks); undefined elsewhere. */
export function processStart(pid: number): string | undefined {
  return processStat(pid)?.start
}

/** Linux: the state (field 3: R, S, Z…) and start time (field 22) of /proc/<pid>/stat; undefined elsewhere. */
function processStat(pid: number): { state: string; start: string | undefined } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name (field 2) may hold spaces and parentheses: count fields after its closing ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return { state: fields[0], start: fields[19] }
  } catch {
    // No /proc (not Linux) or the process is gone: nothing to compare.
    return undefined
  }
}
