import type { BufferAllocator } from '../domains/dtype.js'

/** Allocations from this size on are worth touching ahead: a grid, a rank file's read buffer. */
export const WARM_MIN_BYTES = 2 ** 20
/** A rank reports at most this many sizes (a program that reallocates every step is not warmed). */
const MAX_REPORTED = 16

/**
 * Memory a warm spare touched while it waited (spare-host.mjs fills it from
 * the sizes its launcher sends): the first write to a fresh page is a page
 * fault, about 0.6 ms per MiB on the development VM, so a spare that becomes
 * a rank would otherwise spend tens of milliseconds of its recovery faulting
 * in its grids and the buffer its checkpoint file is read into.
 */
export interface WarmMemory {
  /** A zeroed buffer of exactly `byteLength` bytes whose pages are mapped, or undefined. */
  take(byteLength: number): ArrayBuffer | undefined
  /** Drop the buffers not taken (the rank has what it needed). */
  release(): void
}

/**
 * The allocator of a rank process: large buffers come from `warm` when it
 * has one of the size (a warm spare), fresh otherwise; the sizes asked for
 * are recorded, for the launcher to pass to the next spares.
 *
 * ```ts
 * const allocations = new RankAllocations(init.warm)
 * comm.allocator = allocations.allocate          // domains and checkpoint reads
 * // … after the rank's first checkpoint:
 * control.postMessage({ type: 'buffers', rank, sizes: allocations.sizes })
 * ```
 */
export class RankAllocations {
  /** Sizes of the buffers of WARM_MIN_BYTES and more asked for, in order (at most 16). */
  readonly sizes: number[] = []
  /** Bytes served from warm memory. */
  warmBytes = 0

  constructor(private warm: WarmMemory | undefined) {}

  readonly allocate: BufferAllocator = (byteLength) => {
    if (byteLength < WARM_MIN_BYTES) return new ArrayBuffer(byteLength)
    if (this.sizes.length < MAX_REPORTED) this.sizes.push(byteLength)
    const warm = this.warm?.take(byteLength)
    if (warm === undefined || warm.byteLength !== byteLength) return new ArrayBuffer(byteLength)
    this.warmBytes += byteLength
    return warm
  }

  /**
   * The rank has allocated what its recovery needed (it resumed, or wrote a
   * checkpoint): the warm buffers it did not take are freed.
   */
  release(): void {
    this.warm?.release()
    this.warm = undefined
  }

  /** `sizes` plus `more` (e.g. the read buffer of this rank's file), for the launcher. */
  report(more: readonly number[]): number[] {
    return [...this.sizes, ...more.filter((n) => n >= WARM_MIN_BYTES)].slice(0, MAX_REPORTED)
  }
}

/**
 * What a spare should touch ahead, from what the running ranks reported
 * (rank → sizes): the list of the rank that asked for the most bytes, since
 * a spare may become any rank.
 *
 * ```ts
 * warmSizes(new Map([[0, [16 << 20]], [1, [16 << 20, 17 << 20]]]))   // [16 MiB, 17 MiB]
 * ```
 */
export function warmSizes(reports: ReadonlyMap<number, readonly number[]>): number[] {
  let best: readonly number[] = []
  let bestTotal = 0
  for (const sizes of reports.values()) {
    const total = sizes.reduce((a, b) => a + b, 0)
    if (total > bestTotal) {
      best = sizes
      bestTotal = total
    }
  }
  return [...best]
}
