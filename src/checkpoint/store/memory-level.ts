import { createHash } from 'node:crypto'
import { existsSync, readFileSync, statfsSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { ConfigError } from '../../errors.js'

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
