import { forEachRun, type Domain } from '../../domains/domain.js'
import type { DomainDesc } from '../../domains/desc.js'
import { bytesOf } from '../../domains/dtype.js'
import type { DeferredCopy, UncompactedPayload } from './io-worker/runs.mjs'

// Below this mean run length a gather list costs more (one iovec per run) than one copy.
const MIN_GATHER_RUN_BYTES = 4096
// Shared staging copies the hull of the runs in one piece when the gaps (halos) add at most this
// share: one memcpy of 16 MiB costs about half of 1024 row copies of 16 KiB (call overhead per row).
const MAX_HULL_SLACK = 0.25

// The copies the checkpoint I/O thread makes (plain JavaScript, so the thread runs the same code).
export { compactRuns, copyRuns, type DeferredCopy, type UncompactedPayload } from './io-worker/runs.mjs'

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
  private uncompacted: UncompactedPayload[] = []
  private deferred: DeferredCopy[] = []

  /** `shared`: buffers in SharedArrayBuffers, which another thread reads without a copy (see CheckpointIoThread). */
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

  /**
   * The payloads staged since the last call whose runs still have to be
   * compacted (shared staging only): until compactRuns has run over each, the
   * payloads domainPayload returned for them do not hold their cells yet.
   */
  takeUncompacted(): UncompactedPayload[] {
    const out = this.uncompacted
    this.uncompacted = []
    return out
  }

  /**
   * The payloads staged since the last call whose cells are still in their
   * domain (shared staging of a shared domain, `defer` on): until copyRuns has
   * run over each, the payloads domainPayload returned for them are empty.
   */
  takeDeferred(): DeferredCopy[] {
    const out = this.deferred
    this.deferred = []
    return out
  }

  /** Records a hull copy for takeUncompacted. */
  deferCompaction(p: UncompactedPayload): void {
    this.uncompacted.push(p)
  }

  /** Records a copy left to another thread, for takeDeferred. */
  deferCopy(c: DeferredCopy): void {
    this.deferred.push(c)
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
 * With shared staging (a background write) the cells are always copied: the
 * payload must be a copy anyway. When the gaps between the runs are small (a
 * subdomain with halo columns) the copy is one memcpy of the runs' hull, and
 * the runs are moved together later, off the checkpoint point (see
 * `StagingBuffers.takeUncompacted`); otherwise they are packed run by run.
 * With `defer` and a domain in shared memory nothing is copied here: the
 * copy is left to another thread (`StagingBuffers.takeDeferred`), and the
 * domain must not change until it is done.
 */
export function domainPayload(d: Domain, box: DomainDesc, staging: StagingBuffers, name: string, defer = false): Uint8Array | Uint8Array[] {
  const copy = staging.sharesBuffers
  if (!copy && d.isContiguous(box)) return bytesOf(d.view(box))
  const bpe = d.data.BYTES_PER_ELEMENT
  const runs: number[] = []
  forEachRun(d.strides, d.offset, box, d.order, (s, len) => runs.push(s, len))
  const runCount = runs.length / 2
  if (!copy && runCount > 0 && (box.volume * d.components * bpe) / runCount >= MIN_GATHER_RUN_BYTES) {
    const pieces: Uint8Array[] = []
    for (let i = 0; i < runs.length; i += 2) pieces.push(bytesOf(d.data.subarray(runs[i], runs[i] + runs[i + 1])))
    return pieces
  }
  const all = bytesOf(d.data)
  const payloadBytes = box.volume * d.components * bpe
  if (copy && defer && all.buffer instanceof SharedArrayBuffer) {
    const to = staging.get(`pack:${name}`, payloadBytes)
    const at = new Float64Array(runs.length)
    for (let i = 0; i < runs.length; i++) at[i] = runs[i] * bpe
    staging.deferCopy({ from: all, to, runs: at })
    return to
  }
  if (copy && runCount > 1) {
    const hullFrom = runs[0]
    const hullBytes = (runs[runs.length - 2] + runs[runs.length - 1] - hullFrom) * bpe
    if (hullBytes <= payloadBytes * (1 + MAX_HULL_SLACK)) {
      const hull = staging.get(`pack:${name}`, hullBytes)
      hull.set(all.subarray(hullFrom * bpe, hullFrom * bpe + hullBytes))
      const at = new Float64Array(runs.length)
      for (let i = 0; i < runs.length; i += 2) {
        at[i] = (runs[i] - hullFrom) * bpe
        at[i + 1] = runs[i + 1] * bpe
      }
      staging.deferCompaction({ bytes: hull, runs: at })
      return hull.subarray(0, payloadBytes)
    }
  }
  const packed = staging.get(`pack:${name}`, payloadBytes)
  let pos = 0
  for (let i = 0; i < runs.length; i += 2) {
    const from = runs[i] * bpe
    const bytes = runs[i + 1] * bpe
    packed.set(all.subarray(from, from + bytes), pos)
    pos += bytes
  }
  return packed
}
