import type { DomainDesc } from '../domains/desc.js'
import { copyBox, forEachRun, type Domain } from '../domains/domain.js'
import { arrayOver, bytesOf, DTYPES, type NumericArray } from '../domains/dtype.js'
import { ConfigError, InternalError, PartitionError } from '../errors.js'
import type { Communicator } from './communicator.js'
import { samePartition, validatePartition, type Partition } from './partition.js'
import { RoutingPlan, type PeerTransfer, type RoutingMode } from './plan.js'

/**
 * When messages go out: `all` posts every send at once; `paced` keeps at most
 * `maxInFlight` sends unacknowledged (bounding the memory and the burst).
 * Both give identical results.
 */
export type Schedule = { kind: 'all' } | { kind: 'paced'; maxInFlight: number }

export function validateSchedule(s: Schedule): Schedule {
  if (s.kind === 'all') return s
  if (s.kind === 'paced' && Number.isInteger(s.maxInFlight) && s.maxInFlight >= 1) return s
  throw new ConfigError(`invalid routing schedule ${JSON.stringify(s)}: use { kind: 'all' } or { kind: 'paced', maxInFlight: n ≥ 1 }`)
}

/** How one peer's boxes are laid out in a domain: one contiguous range, or runs to pack. */
interface Layout {
  box: DomainDesc
  /** Start index when the peer's cells are one contiguous range, else -1. */
  contiguousStart: number
  /** Pairs (start, length) of runs, in pack order. */
  runs: Int32Array
}

/**
 * Executes routing plans for one skeleton: the *pack info* side of the
 * scheme/pack split. It caches the current plan (rebuilt only when a step's
 * partition differs), the per-peer layouts, and the staging buffers used for
 * boxes that are not contiguous. Contiguous boxes go as views on the domain's
 * own memory, without a copy on the sending side.
 *
 * ```ts
 * const router = new Router(comm, 'border', { kind: 'all' }, 'grid')
 * const plan = router.plan(partitionAt(w, size, s), partitionAt(w, size, s + 1))
 * await router.route(plan, w, w, tag)
 * await router.settle(w)   // before writing into w again
 * ```
 */
export class Router {
  private cached: RoutingPlan | undefined
  private readonly validated: Partition[] = []
  private readonly layouts = new WeakMap<RoutingPlan, Map<string, Layout>>()
  private readonly staging = new Map<number, { array: NumericArray; released: Promise<void> }>()
  private readonly pending = new Map<Domain, Promise<void>[]>()
  /** Number of plans built so far (to observe caching). */
  plansBuilt = 0

  constructor(
    private readonly comm: Communicator,
    readonly mode: RoutingMode,
    readonly schedule: Schedule,
    private readonly what: string,
  ) {
    validateSchedule(schedule)
  }

  /** The plan from `from` to `to`, reusing the cached one when both partitions are unchanged. */
  plan(from: Partition, to: Partition): RoutingPlan {
    const c = this.cached
    if (c && samePartition(c.from, from) && samePartition(c.to, to)) return c
    this.check(from)
    this.check(to)
    this.plansBuilt++
    this.cached = RoutingPlan.build(this.comm.rank, this.mode, from, to)
    return this.cached
  }

  /** Move the plan's cells from `src` (on their owners) into `dst` (on the ranks that need them). */
  async route(plan: RoutingPlan, src: Domain, dst: Domain, tag: number): Promise<void> {
    const receives = plan.recvs.map((t) => this.receive(plan, t, dst, tag))
    const inFlight = new Set<Promise<void>>()
    const limit = this.schedule.kind === 'paced' ? this.schedule.maxInFlight : Infinity
    const released: Promise<void>[] = []
    for (const t of plan.sends) {
      while (inFlight.size >= limit) await Promise.race(inFlight)
      const p = this.sendOne(plan, t, src, tag)
      const tracked = p.then(() => {
        inFlight.delete(tracked)
      })
      inFlight.add(tracked)
      released.push(p)
    }
    if (plan.local) copyCells(src, dst, plan.local)
    await Promise.all(receives)
    // Views of `src` stay readable by peers until they acknowledge.
    if (released.length > 0) {
      const list = this.pending.get(src) ?? []
      list.push(...released)
      this.pending.set(src, list)
    }
  }

  /** Wait until no peer still reads `domain`'s memory (call before writing into it or resizing it). */
  async settle(domain: Domain): Promise<void> {
    const list = this.pending.get(domain)
    if (!list) return
    this.pending.delete(domain)
    await Promise.all(list)
  }

  /** Wait for every outstanding send (end of a skeleton). */
  async settleAll(): Promise<void> {
    const all = [...this.pending.values()].flat()
    this.pending.clear()
    await Promise.all([...all, ...[...this.staging.values()].map((s) => s.released)])
  }

  private check(p: Partition): void {
    if (this.validated.some((v) => samePartition(v, p))) return
    validatePartition(p, this.what)
    this.validated.push(p)
    if (this.validated.length > 8) this.validated.shift()
  }

  private async sendOne(plan: RoutingPlan, t: PeerTransfer, src: Domain, tag: number): Promise<void> {
    const layout = this.layout(plan, 's', t, src)
    if (layout.contiguousStart >= 0) {
      const view = src.data.subarray(layout.contiguousStart, layout.contiguousStart + t.cells)
      return this.comm.send(t.peer, tag, bytesOf(view))
    }
    const stage = await this.stagingFor(t.peer, src, t.cells)
    const runs = layout.runs
    const data = src.data
    let pos = 0
    for (let r = 0; r < runs.length; r += 2) {
      const s = runs[r]
      const len = runs[r + 1]
      stage.set(data.subarray(s, s + len) as never, pos)
      pos += len
    }
    const p = this.comm.send(t.peer, tag, bytesOf(stage))
    this.staging.set(t.peer, { array: stage, released: p })
    return p
  }

  private async receive(plan: RoutingPlan, t: PeerTransfer, dst: Domain, tag: number): Promise<void> {
    const m = await this.comm.recv(t.peer, tag)
    const bpe = DTYPES[dst.dtype].BYTES_PER_ELEMENT
    if (m.bytes.byteLength !== t.cells * bpe) {
      m.release()
      throw new PartitionError(
        `routing: rank ${this.comm.rank} expected ${t.cells * bpe} bytes from rank ${t.peer} (tag ${tag}) but got ${m.bytes.byteLength}; ranks disagree on the partition`,
      )
    }
    const incoming = alignedView(dst, m.bytes, t.cells)
    const layout = this.layout(plan, 'r', t, dst)
    const data = dst.data
    if (layout.contiguousStart >= 0) {
      data.set(incoming as never, layout.contiguousStart)
    } else {
      const runs = layout.runs
      let pos = 0
      for (let r = 0; r < runs.length; r += 2) {
        const len = runs[r + 1]
        data.set(incoming.subarray(pos, pos + len) as never, runs[r])
        pos += len
      }
    }
    m.release()
  }

  private layout(plan: RoutingPlan, dir: 's' | 'r', t: PeerTransfer, d: Domain): Layout {
    let byPeer = this.layouts.get(plan)
    if (!byPeer) this.layouts.set(plan, (byPeer = new Map()))
    const key = `${dir}${t.peer}`
    const hit = byPeer.get(key)
    if (hit && hit.box.equals(d.box)) return hit
    for (const b of t.boxes) {
      if (!d.box.contains(b)) {
        throw new InternalError(`routing: ${b} is outside the allocated box ${d.box} of rank ${this.comm.rank}`)
      }
    }
    const single = t.boxes.length === 1 && d.isContiguous(t.boxes[0])
    const runs: number[] = []
    if (!single) for (const b of t.boxes) forEachRun(d.strides, d.offset, b, d.order, (s, len) => runs.push(s, len))
    const layout: Layout = {
      box: d.box,
      contiguousStart: single ? d.index(t.boxes[0].lower) : -1,
      runs: Int32Array.from(runs),
    }
    byPeer.set(key, layout)
    return layout
  }

  private async stagingFor(peer: number, d: Domain, cells: number): Promise<NumericArray> {
    const s = this.staging.get(peer)
    if (s) await s.released
    if (s && s.array.length === cells && s.array.constructor === d.data.constructor) return s.array
    const bpe = DTYPES[d.dtype].BYTES_PER_ELEMENT
    return arrayOver(d.dtype, this.comm.allocator(cells * bpe), 0, cells)
  }
}

/** The incoming bytes as an array of the domain's dtype (copied only if misaligned). */
function alignedView(d: Domain, bytes: Uint8Array, cells: number): NumericArray {
  const bpe = DTYPES[d.dtype].BYTES_PER_ELEMENT
  if (bytes.byteOffset % bpe === 0) return arrayOver(d.dtype, bytes.buffer, bytes.byteOffset, cells)
  const copy = new Uint8Array(bytes.byteLength)
  copy.set(bytes)
  return arrayOver(d.dtype, copy.buffer, 0, cells)
}

function copyCells(src: Domain, dst: Domain, box: DomainDesc): void {
  if (src === dst) return
  if (src.order !== dst.order) throw new ConfigError('circulation needs both domains in the same storage order')
  copyBox(src.data, src, dst.data, dst, box, src.order)
}
