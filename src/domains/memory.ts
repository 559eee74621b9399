import { ConfigError } from '../errors.js'
import { totalmem } from 'node:os'
import { formatSize } from '../util/bytes.js'

/**
 * What one machine can hold: every rank of a molotof run lives on this
 * machine (threads of one process, or local processes), so requests beyond
 * this are impossible before they are attempted. The physical memory, or a
 * smaller cgroup limit (containers, batch jobs).
 *
 * ```ts
 * if (bytes > memoryLimit()) throw new ConfigError(`needs ${formatSize(bytes)}, more than this machine's ${formatSize(memoryLimit())}`)
 * ```
 */
export function memoryLimit(): number {
  // Node ≥ 19.6; a huge value (2^64) when there is no limit.
  const cgroup = (process as { constrainedMemory?: () => number | undefined }).constrainedMemory?.()
  const total = totalmem()
  return cgroup !== undefined && cgroup > 0 && cgroup < total ? cgroup : total
}

// The one byte formatter (src/util/bytes.ts), also for the runtime's messages that take it from here.
export { formatSize }

/**
 * Refuses a rank's two domains (read and write, `cells` each at most) when
 * they cannot fit in this machine's memory, before they are allocated: an
 * impossible size is bad input, said at once, not a crash of the process or
 * a failure that restarts would repeat.
 *
 * ```ts
 * assertDomainsFit(part.needed[rank].hull(part.possessed[rank]).volume, 8, 'skeleton0', rank)
 * ```
 */
export function assertDomainsFit(cells: number, bytesPerCell: number, what: string, rank: number, limit: number = memoryLimit()): void {
  const bytes = 2 * cells * bytesPerCell
  if (bytes <= limit) return
  throw new ConfigError(
    `${what}: rank ${rank}'s two domains need ${formatSize(bytes)} (${cells} cells of ${bytesPerCell} bytes, twice), ` +
      `more than this machine's memory (${formatSize(limit)}): choose a smaller problem size or more ranks`,
  )
}
