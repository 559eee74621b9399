import { forEachRun, type Domain } from '../../domains/domain.js'
import type { DomainDesc } from '../../domains/desc.js'
import { bytesOf } from '../../domains/dtype.js'

// Below this mean run length a gather list costs more (one iovec per run) than one copy.
const MIN_GATHER_RUN_BYTES = 4096

/**
 * Buffers a rank reuses from one checkpoint to the next: packed strided
 * subdomains and the staging copies of background checkpoints. Reusing them
 * keeps checkpoints allocation-free in steady state — a fresh 16 MiB buffer
 * costs page faults on every checkpoint, more than the copy itself. A buffer is
 * handed out again only at the next checkpoint, after the previous one's write
 * has finished (the committer commits or abandons a checkpoint before starting
 * the next).
 *
 * ```ts
 * const staging = new StagingBuffers()
 * const bytes = domainPayload(domain, possessed, staging, 'read')  // views, or one reused buffer
 * const copy = staging.copy('read', bytes)                          // detached from the domain
 * ```
 */
export class StagingBuffers {
  private readonly buffers = new Map<string, Uint8Array>()

  /** `shared`: buffers in SharedArrayBuffers, which another thread reads without a copy (see ChecksumThread). */
  constructor(private readonly shared = false) {}

  /** Payloads staged here are copies in shared memory (a background write reads them later): `domainPayload` packs. */
  get sharesBuffers(): boolean {
    return this.shared
  }

  /** A buffer of exactly `byteLength` bytes for `name`, reused when the size is unchanged. */
  get(name: string, byteLength: number): Uint8Array {
    const b = this.buffers.get(name)
    if (b && b.byteLength === byteLength) return b
    // 8-byte aligned (fresh ArrayBuffer), so any dtype can view it.
    const fresh = this.shared ? new Uint8Array(new SharedArrayBuffer(byteLength)) : new Uint8Array(byteLength)
    this.buffers.set(name, fresh)
    return fresh
  }

  /** `bytes` (one piece or a gather list) copied into the reused buffer of `name`. */
  copy(name: string, bytes: Uint8Array | readonly Uint8Array[]): Uint8Array {
    const pieces = bytes instanceof Uint8Array ? [bytes] : bytes
    const out = this.get(`copy:${name}`, pieces.reduce((n, p) => n + p.byteLength, 0))
    let pos = 0
    for (const p of pieces) {
      out.set(p, pos)
      pos += p.byteLength
    }
    return out
  }
}

/**
 * The cells of `box` in `d`, in the domain's storage order, ready to write:
 * one view when the box is contiguous in memory, a gather list of views (one
 * per run) when its runs are long, otherwise packed into `staging`'s buffer
 * for `name`. Views alias the domain: they must be written before it changes.
 * With shared staging (a background write) the cells are always packed: the
 * payload must be a copy anyway, and packing straight from the domain is the
 * one copy (views then a copy of them cost a gather list more at the stall).
 */
export function domainPayload(d: Domain, box: DomainDesc, staging: StagingBuffers, name: string): Uint8Array | Uint8Array[] {
  const copy = staging.sharesBuffers
  if (!copy && d.isContiguous(box)) return bytesOf(d.view(box))
  const bpe = d.data.BYTES_PER_ELEMENT
  const runs: number[] = []
  forEachRun(d.strides, d.offset, box, d.order, (s, len) => runs.push(s, len))
  const runCount = runs.length / 2
  if (!copy && runCount > 0 && (box.volume * bpe) / runCount >= MIN_GATHER_RUN_BYTES) {
    const pieces: Uint8Array[] = []
    for (let i = 0; i < runs.length; i += 2) pieces.push(bytesOf(d.data.subarray(runs[i], runs[i] + runs[i + 1])))
    return pieces
  }
  const packed = staging.get(`pack:${name}`, box.volume * bpe)
  const all = bytesOf(d.data)
  let pos = 0
  for (let i = 0; i < runs.length; i += 2) {
    const from = runs[i] * bpe
    const bytes = runs[i + 1] * bpe
    packed.set(all.subarray(from, from + bytes), pos)
    pos += bytes
  }
  return packed
}
