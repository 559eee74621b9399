import type { DomainDesc } from '../domains/desc.js'
import { forEachRunPair, type Domain } from '../domains/domain.js'
import { arrayOver, DTYPES, type NumericArray } from '../domains/dtype.js'
import { ConfigError, InternalError, PartitionError } from '../errors.js'
import { SENT, type Communicator, type Message } from './communicator.js'
import { samePartition, validatePartition, type Partition } from './partition.js'
import { RoutingPlan, type RoutingMode } from './plan.js'

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

/**
 * Where one transfer's cells sit in one domain's current array: one
 * contiguous range (`bytes`, a view on the domain's memory) or runs to pack.
 * Valid while the domain keeps the same `data` array (a resize replaces it).
 */
interface Placement {
  domain: Domain | undefined
  data: NumericArray | undefined
  /** A view on the cells when they are one contiguous range, else undefined. */
  bytes: Uint8Array | undefined
  /** (start, length) pairs of flat indices, in pack order, when not contiguous. */
  runs: Int32Array
}

const NO_RUNS = new Int32Array(0)
const plainBuffer = (n: number): ArrayBuffer => new ArrayBuffer(n)

/**
 * One peer's share of a plan, with everything a superstep needs prepared
 * once: where the cells sit in the two domains a skeleton alternates between,
 * and a staging array for strided cells.
 */
class Transfer {
  private readonly a: Placement = { domain: undefined, data: undefined, bytes: undefined, runs: NO_RUNS }
  private readonly b: Placement = { domain: undefined, data: undefined, bytes: undefined, runs: NO_RUNS }
  private useA = true
  /** Packed cells of a strided transfer (allocated on first use). */
  staging: NumericArray | undefined
  stagingBytes: Uint8Array | undefined
  /** Resolves when the peer no longer reads `staging` (SENT: free now). */
  released: Promise<void> = SENT

  constructor(
    readonly peer: number,
    readonly boxes: readonly DomainDesc[],
    readonly cells: number,
  ) {}

  /** The placement of the cells in `d`, recomputed only when `d`'s array changed. */
  placement(d: Domain, rank: number): Placement {
    const a = this.a
    if (a.domain === d && a.data === d.data) return a
    const b = this.b
    if (b.domain === d && b.data === d.data) return b
    // Replace the slot not used last: the two domains of a skeleton keep theirs.
    const slot = a.domain === d ? a : b.domain === d ? b : this.useA ? a : b
    this.useA = slot === b
    fillPlacement(slot, d, this.boxes, rank)
    return slot
  }

  /** The staging array, allocated with the communicator's allocator on first use. */
  stage(d: Domain, allocate: (bytes: number) => ArrayBufferLike): NumericArray {
    const s = this.staging
    if (s && s.constructor === d.data.constructor && s.length === this.cells * d.components) return s
    const bpe = DTYPES[d.dtype].BYTES_PER_ELEMENT
    const values = this.cells * d.components
    const fresh = arrayOver(d.dtype, allocate(values * bpe), 0, values)
    this.staging = fresh
    this.stagingBytes = new Uint8Array(fresh.buffer, fresh.byteOffset, fresh.byteLength)
    return fresh
  }
}

function fillPlacement(p: Placement, d: Domain, boxes: readonly DomainDesc[], rank: number): void {
  for (const b of boxes) {
    if (!d.box.contains(b)) throw new InternalError(`routing: ${b} is outside the allocated box ${d.box} of rank ${rank}`)
  }
  p.domain = d
  p.data = d.data
  if (boxes.length === 1 && d.isContiguous(boxes[0])) {
    const data = d.data
    const start = boxes[0].isEmpty ? 0 : d.index(boxes[0].lower)
    p.bytes = new Uint8Array(data.buffer, data.byteOffset + start * data.BYTES_PER_ELEMENT, boxes[0].volume * d.components * data.BYTES_PER_ELEMENT)
    p.runs = NO_RUNS
    return
  }
  const runs: number[] = []
  for (const b of boxes) forEachRunPair(d, d, b, d.order, (s, _t, len) => runs.push(s, len))
  p.bytes = undefined
  p.runs = Int32Array.from(runs)
}

/** Copy strided cells into a packed array, run by run, with an indexed loop (no views). */
function pack(data: NumericArray, runs: Int32Array, out: NumericArray): void {
  let pos = 0
  for (let r = 0; r < runs.length; r += 2) {
    const end = runs[r] + runs[r + 1]
    for (let k = runs[r]; k < end; k++) out[pos++] = data[k]
  }
}

function unpack(packed: NumericArray, runs: Int32Array, data: NumericArray): void {
  let pos = 0
  for (let r = 0; r < runs.length; r += 2) {
    const end = runs[r] + runs[r + 1]
    for (let k = runs[r]; k < end; k++) data[k] = packed[pos++]
  }
}

/** Circulation: (source start, target start, length) triples of the cells a rank keeps, for one pair of arrays. */
interface LocalCopy {
  src: NumericArray | undefined
  dst: NumericArray | undefined
  runs: Int32Array
}

/** The prepared transfers of one plan. */
class PlanRun {
  readonly sends: Transfer[]
  readonly recvs: Transfer[]
  /** Two slots: the domains swap roles every superstep. */
  readonly local: [LocalCopy, LocalCopy] = [
    { src: undefined, dst: undefined, runs: NO_RUNS },
    { src: undefined, dst: undefined, runs: NO_RUNS },
  ]
  private nextLocal = 0
  /** Periodic wraps within this rank: the same two slots, (source, target, length) triples of every wrap. */
  readonly wraps: [LocalCopy, LocalCopy] = [
    { src: undefined, dst: undefined, runs: NO_RUNS },
    { src: undefined, dst: undefined, runs: NO_RUNS },
  ]
  private nextWrap = 0

  constructor(readonly plan: RoutingPlan) {
    this.sends = plan.sends.map((t) => new Transfer(t.peer, t.boxes, t.cells))
    this.recvs = plan.recvs.map((t) => new Transfer(t.peer, t.boxes, t.cells))
  }

  localCopy(box: DomainDesc, src: Domain, dst: Domain): Int32Array {
    for (let k = 0; k < 2; k++) if (this.local[k].src === src.data && this.local[k].dst === dst.data) return this.local[k].runs
    const c = this.local[this.nextLocal]
    this.nextLocal ^= 1
    c.src = src.data
    c.dst = dst.data
    c.runs = pairRuns(box, src, dst)
    return c.runs
  }

  wrapCopy(src: Domain, dst: Domain, rank: number): Int32Array {
    for (let k = 0; k < 2; k++) if (this.wraps[k].src === src.data && this.wraps[k].dst === dst.data) return this.wraps[k].runs
    const c = this.wraps[this.nextWrap]
    this.nextWrap ^= 1
    c.src = src.data
    c.dst = dst.data
    c.runs = wrapRuns(this.plan, src, dst, rank)
    return c.runs
  }
}

/** (source, target, length) triples of `box` between two domains; apart from `PlanRun.localCopy` for the reason `wrapRuns` says. */
function pairRuns(box: DomainDesc, src: Domain, dst: Domain): Int32Array {
  const triples: number[] = []
  forEachRunPair(src, dst, box, src.order, (s, t, len) => triples.push(s, t, len))
  return Int32Array.from(triples)
}

/**
 * (source, target, length) triples of a plan's periodic wraps between two
 * domains. Apart from `PlanRun.wrapCopy`, whose every call would otherwise
 * allocate the context this closure needs.
 */
function wrapRuns(plan: RoutingPlan, src: Domain, dst: Domain, rank: number): Int32Array {
  const triples: number[] = []
  for (const w of plan.wraps) {
    if (!src.box.contains(w.from) || !dst.box.contains(w.to)) throw new InternalError(`routing: the periodic wrap ${w.from} → ${w.to} is outside the allocated boxes of rank ${rank}`)
    // The target's layout moved so that cell x of `from` lands on its image in `to`.
    let offset = dst.offset
    for (let d = 0; d < w.to.dims; d++) offset += (w.to.lower[d] - w.from.lower[d]) * dst.strides[d]
    forEachRunPair(src, { strides: dst.strides, offset }, w.from, src.order, (s, t, len) => triples.push(s, t, len))
  }
  return Int32Array.from(triples)
}

/**
 * Executes routing plans for one skeleton: the *pack info* side of the
 * scheme/pack split. It caches the current plan (rebuilt only when the
 * partitions change: compared by identity, as a `PartitionTracker` hands
 * out one object per epoch, else box by box), where each peer's cells sit in
 * both domains, and staging arrays for strided cells. A superstep in steady
 * state allocates nothing: contiguous boxes go as views on the domain's own
 * memory, strided ones are packed by indexed loops into reused arrays, and
 * messages that have already arrived are taken without a promise.
 *
 * ```ts
 * const router = new Router(comm, 'border', { kind: 'all' }, 'grid')
 * const plan = router.plan(partitionAt(w, size, s), partitionAt(w, size, s + 1))
 * const routed = router.route(plan, w, w, tag)
 * if (routed) await routed          // undefined when everything was done at once
 * const settled = router.settle(w)  // before writing into w again
 * if (settled) await settled
 * ```
 */
export class Router {
  private cached: RoutingPlan | undefined
  private run: PlanRun | undefined
  private readonly pending = new Map<Domain, Promise<void>[]>()
  private readonly inFlight = new Set<Promise<void>>()
  private readonly limit: number
  /** Where a route that waits for a message resumes. */
  private readonly cursor: { run: PlanRun | undefined; next: number; dst: Domain | undefined; tag: number } = {
    run: undefined,
    next: 0,
    dst: undefined,
    tag: 0,
  }
  /** Number of plans built so far (to observe caching). */
  plansBuilt = 0

  constructor(
    private readonly comm: Communicator,
    readonly mode: RoutingMode,
    readonly schedule: Schedule,
    private readonly what: string,
  ) {
    validateSchedule(schedule)
    this.limit = schedule.kind === 'paced' ? schedule.maxInFlight : Infinity
  }

  /** The plan from `from` to `to`, reusing the cached one when both partitions are unchanged. */
  plan(from: Partition, to: Partition): RoutingPlan {
    const c = this.cached
    if (c && c.from === from && c.to === to) return c
    if (c && samePartition(c.from, from) && samePartition(c.to, to)) return c
    validatePartition(from, this.what)
    validatePartition(to, this.what)
    this.plansBuilt++
    this.cached = RoutingPlan.build(this.comm.rank, this.mode, from, to)
    this.run = new PlanRun(this.cached)
    return this.cached
  }

  /**
   * Move the plan's cells from `src` (on their owners) into `dst` (on the
   * ranks that need them). Returns undefined when done (every message had
   * arrived), else a promise of the rest.
   */
  route(plan: RoutingPlan, src: Domain, dst: Domain, tag: number): Promise<void> | undefined {
    const begun = this.begin(plan, src, dst, tag)
    if (begun === true) return undefined
    return begun === false ? this.receiveRest() : begun
  }

  /**
   * `route` in steps the caller drives, so that a superstep whose messages
   * are all here allocates nothing, one that waits costs one await per late
   * message, and a caller that runs several ranks in one thread can go to
   * another rank instead of waiting (see StepScheduler):
   *
   * ```ts
   * const begun = router.begin(plan, src, dst, tag)   // sends, and takes what is here
   * if (begun instanceof Promise) await begun          // sends had to wait: the whole route
   * else if (!begun) while (!router.takeArrived()) router.accept(await router.nextMessage())
   * ```
   *
   * True when routing is done, false when messages are still to come.
   */
  begin(plan: RoutingPlan, src: Domain, dst: Domain, tag: number): boolean | Promise<void> {
    const run = this.runOf(plan)
    const sends = run.sends
    for (let i = 0; i < sends.length; i++) {
      if (this.inFlight.size >= this.limit || sends[i].released !== SENT) return this.routeLater(run, i, src, dst, tag)
      this.sendOne(sends[i], src, tag)
    }
    if (plan.local) this.copyLocal(run, plan.local, src, dst)
    if (plan.wraps.length > 0) this.copyWraps(run, src, dst)
    this.cursor.run = run
    this.cursor.next = 0
    this.cursor.dst = dst
    this.cursor.tag = tag
    return this.takeArrived()
  }

  /** Take every message of the route that is here (no promise); true once all have arrived. */
  takeArrived(): boolean {
    const c = this.cursor
    const recvs = c.run!.recvs
    const comm = this.comm
    while (c.next < recvs.length) {
      const t = recvs[c.next]
      const m = comm.recvNow ? comm.recvNow(t.peer, c.tag) : undefined
      if (m === undefined) return false
      this.unpackOne(t, m, c.dst!, c.tag)
      c.next++
    }
    c.run = undefined
    c.dst = undefined
    return true
  }

  /** The promise of the first message `takeArrived` found missing; give it to `accept`. */
  nextMessage(): Promise<Message> {
    return this.comm.recv(this.awaitedPeer(), this.cursor.tag)
  }

  /** The rank whose message `takeArrived` found missing. */
  awaitedPeer(): number {
    const c = this.cursor
    return c.run!.recvs[c.next].peer
  }

  /** The tag of that message. */
  awaitedTag(): number {
    return this.cursor.tag
  }

  /** Unpack the message `nextMessage` promised. */
  accept(m: Message): void {
    const c = this.cursor
    this.unpackOne(c.run!.recvs[c.next++], m, c.dst!, c.tag)
  }

  private async receiveRest(): Promise<void> {
    while (!this.takeArrived()) this.accept(await this.nextMessage())
  }

  /** Wait until no peer still reads `domain`'s memory (call before writing into it or resizing it); undefined when none does. */
  settle(domain: Domain): Promise<void> | undefined {
    const list = this.pending.get(domain)
    if (!list || list.length === 0) return undefined
    this.pending.delete(domain)
    return Promise.all(list).then(() => undefined)
  }

  /** Wait for every outstanding send (end of a skeleton). */
  async settleAll(): Promise<void> {
    const all = [...this.pending.values()].flat()
    this.pending.clear()
    const staging = this.run ? this.run.sends.map((t) => t.released) : []
    await Promise.all([...all, ...staging])
  }

  private runOf(plan: RoutingPlan): PlanRun {
    let run = this.run
    if (!run || run.plan !== plan) this.run = run = new PlanRun(plan)
    return run
  }

  /** Sends that must wait (pacing, or a staging array still read by a peer): the whole route, asynchronously. */
  private async routeLater(run: PlanRun, from: number, src: Domain, dst: Domain, tag: number): Promise<void> {
    const sends = run.sends
    for (let i = from; i < sends.length; i++) {
      while (this.inFlight.size >= this.limit) await Promise.race(this.inFlight)
      const t = sends[i]
      if (t.released !== SENT) {
        await t.released
        t.released = SENT
      }
      this.sendOne(t, src, tag)
    }
    if (run.plan.local) this.copyLocal(run, run.plan.local, src, dst)
    if (run.plan.wraps.length > 0) this.copyWraps(run, src, dst)
    const c = this.cursor
    c.run = run
    c.next = 0
    c.dst = dst
    c.tag = tag
    await this.receiveRest()
  }

  private sendOne(t: Transfer, src: Domain, tag: number): void {
    const place = t.placement(src, this.comm.rank)
    let p: Promise<void>
    if (place.bytes) {
      p = this.comm.send(t.peer, tag, place.bytes)
    } else {
      pack(src.data, place.runs, t.stage(src, this.comm.allocator))
      p = this.comm.send(t.peer, tag, t.stagingBytes!)
      t.released = p
    }
    if (p !== SENT) this.track(t, src, p)
  }

  /**
   * The peer reads `src`'s memory until it acknowledges: track `p` for
   * settle() and pacing. Apart from sendOne, whose calls would otherwise each
   * allocate the context these closures share.
   */
  private track(t: Transfer, src: Domain, p: Promise<void>): void {
    let list = this.pending.get(src)
    if (!list) this.pending.set(src, (list = []))
    list.push(p)
    const tracked: Promise<void> = p.then(
      () => {
        this.inFlight.delete(tracked)
        if (t.released === p) t.released = SENT
      },
      // A failed send is reported by whoever settles `src` or sends `t` again (both still hold `p`). A run
      // stopped in the meantime holds neither: rejecting here would then be unhandled and end the process,
      // a kept survivor's in the middle of its next run (the transport fails it a grace period later).
      () => {
        this.inFlight.delete(tracked)
      },
    )
    this.inFlight.add(tracked)
  }

  private unpackOne(t: Transfer, m: Message, dst: Domain, tag: number): void {
    const bytes = m.bytes
    const expected = t.cells * dst.components * dst.data.BYTES_PER_ELEMENT
    if (bytes.byteLength !== expected) {
      m.release()
      throw new PartitionError(
        `routing: rank ${this.comm.rank} expected ${expected} bytes from rank ${t.peer} (tag ${tag}) but got ${bytes.byteLength}; ranks disagree on the partition`,
      )
    }
    const place = t.placement(dst, this.comm.rank)
    if (place.bytes) {
      place.bytes.set(bytes)
    } else {
      // Through an aligned staging array: the message bytes may sit at any offset.
      const stage = t.stage(dst, plainBuffer)
      t.stagingBytes!.set(bytes)
      unpack(stage, place.runs, dst.data)
    }
    m.release()
  }

  /** Periodic axes: the halo cells this rank fills from its own possessed cells, one period away. */
  private copyWraps(run: PlanRun, src: Domain, dst: Domain): void {
    const runs = run.wrapCopy(src, dst, this.comm.rank)
    copyRuns(runs, src.data, dst.data)
  }

  /** Circulation: the cells this rank keeps go from its source to its target domain. */
  private copyLocal(run: PlanRun, box: DomainDesc, src: Domain, dst: Domain): void {
    if (src === dst) return
    if (src.order !== dst.order) throw new ConfigError('circulation needs both domains in the same storage order')
    if (src.components !== dst.components) throw new ConfigError(`circulation needs both domains with the same components per cell (${src.components} and ${dst.components})`)
    const runs = run.localCopy(box, src, dst)
    copyRuns(runs, src.data, dst.data)
  }
}

/** Copies runs given as (source offset, target offset, length) triples from one typed array into another. */
function copyRuns(runs: ArrayLike<number>, from: Domain['data'], to: Domain['data']): void {
  for (let r = 0; r < runs.length; r += 3) {
    const s = runs[r]
    const t = runs[r + 1]
    const len = runs[r + 2]
    for (let k = 0; k < len; k++) to[t + k] = from[s + k]
  }
}
