import type { BufferAllocator } from '../../domains/dtype.js'

/** Allocations from this size on are worth touching ahead: a grid, a rank file's read buffer. */
export const WARM_MIN_BYTES = 2 ** 20
/** A rank tracks and reports at most this many live large buffers. */
const MAX_REPORTED = 16

/**
 * Memory whose pages are already mapped, for the rank a host runs next: a
 * warm spare touched it while it waited (spare-host.mjs fills it from the
 * sizes its launcher sends), or a kept survivor's last run left it. The first
 * write to a fresh page is a page fault, about 0.6 ms per MiB on the
 * development VM, so a recovering rank would otherwise spend tens of
 * milliseconds faulting in its grids and the buffer its checkpoint file is
 * read into.
 */
export interface WarmMemory {
  /** Touched ahead by an idle spare, or left by the last run in this process (a kept survivor). */
  readonly from: 'touched' | 'last-run'
  /** A zeroed buffer of exactly `byteLength` bytes whose pages are mapped, or undefined. */
  take(byteLength: number): SharedArrayBuffer | undefined
  /** Drop the buffers not taken (the rank has what it needed). */
  release(): void
}

/**
 * Hands the large buffers of a run that was stopped from outside (a survivor
 * of a failure) to its host, which gives them to the next run in the same
 * process as its warm memory (spare-host.mjs): a survivor's new domains
 * would otherwise fault in fresh pages as a cold spare's did.
 */
export type RecycleBuffers = (buffers: SharedArrayBuffer[]) => void

/**
 * The allocator of a rank process: large buffers come from `warm` when it
 * has one of the size, fresh otherwise. Every buffer is a SharedArrayBuffer,
 * as in rank threads, so that the checkpoint I/O thread can copy a domain
 * while the rank computes the next superstep (see Domain.lend). It keeps the sizes of
 * the large buffers still alive (a FinalizationRegistry forgets those
 * collected: a domain that grew left its old buffer behind), for the
 * launcher to pass to the next spares.
 *
 * ```ts
 * const allocations = new RankAllocations(init.warm)
 * comm.allocator = allocations.allocate          // domains and checkpoint reads
 * // … at a checkpoint, when they changed:
 * control.postMessage({ type: 'buffers', rank, sizes: allocations.report([readBufferBytes(fileBytes)]) })
 * ```
 */
export class RankAllocations {
  /** Bytes served from warm memory. */
  warmBytes = 0
  /** Where that memory came from. */
  readonly warmFrom: WarmMemory['from'] | undefined
  private readonly live = new Map<number, { bytes: number; buffer: WeakRef<SharedArrayBuffer> }>()
  private readonly collected = new FinalizationRegistry<number>((id) => this.live.delete(id))
  private nextId = 0

  constructor(private warm: WarmMemory | undefined) {
    this.warmFrom = warm?.from
  }

  readonly allocate: BufferAllocator = (byteLength) => {
    if (byteLength < WARM_MIN_BYTES) return new SharedArrayBuffer(byteLength)
    // take() hands out a buffer of exactly this size, or none.
    const warm = this.warm?.take(byteLength)
    const buffer = warm ?? new SharedArrayBuffer(byteLength)
    if (warm) this.warmBytes += byteLength
    if (this.live.size < MAX_REPORTED) {
      const id = this.nextId++
      this.live.set(id, { bytes: byteLength, buffer: new WeakRef(buffer) })
      this.collected.register(buffer, id)
    }
    return buffer
  }

  /** Sizes of the large buffers allocated here and not collected yet, oldest first (at most 16). */
  get sizes(): number[] {
    return [...this.live.values()].map((b) => b.bytes)
  }

  /**
   * The large buffers still alive, for the next run in this process (a kept
   * survivor): its domains have the same sizes, and these pages are mapped.
   * They may be handed over only once this run has ended, background writes
   * included: nothing of it may touch them afterwards.
   */
  liveBuffers(): SharedArrayBuffer[] {
    const out: SharedArrayBuffer[] = []
    for (const { buffer } of this.live.values()) {
      const b = buffer.deref()
      if (b !== undefined) out.push(b)
    }
    return out
  }

  /**
   * The rank has allocated what its recovery needed (it resumed, or wrote a
   * checkpoint): the warm buffers it did not take are freed.
   */
  release(): void {
    this.warm?.release()
    this.warm = undefined
  }

  /**
   * `sizes` plus those of `more` not among them (the read buffer of this
   * rank's file, unless one from an earlier recovery is still alive), for
   * the launcher.
   */
  report(more: readonly number[]): number[] {
    const sizes = this.sizes
    return [...sizes, ...more.filter((n) => n >= WARM_MIN_BYTES && !sizes.includes(n))].slice(0, MAX_REPORTED)
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
