import type { DomainDesc } from '../domains/desc.js'
import type { Domain } from '../domains/domain.js'
import { PartitionError } from '../errors.js'

/**
 * Every rank's possessed and needed boxes for one partition epoch, evaluated
 * from a domain's partition methods. Because those methods are pure, each
 * rank builds the same `Partition` without exchanging a message.
 *
 * ```ts
 * const p = partitionAt(grid, size, step)
 * p.possessed[q]   // what rank q computes at `step` (and at every step of p.epoch)
 * ```
 */
export interface Partition<N extends number = number> {
  /** The step it was evaluated at (any step of its epoch gives the same boxes). */
  readonly step: number
  /** `domain.partitionEpoch(step)`. */
  readonly epoch: number
  readonly possessed: readonly DomainDesc<N>[]
  readonly needed: readonly DomainDesc<N>[]
  /** Per axis, whether halos wrap around (`domain.periodic`); none when absent. */
  readonly periodic?: readonly boolean[]
}

/** The boxes of a partition, as `validatePartition` checks them. */
export type PartitionBoxes<N extends number = number> = Pick<Partition<N>, 'step' | 'possessed' | 'needed'>

/** Evaluate every rank's boxes at `step` (O(P): once per epoch, see `PartitionTracker`). */
export function partitionAt<N extends number>(domain: Domain<N>, size: number, step: number): Partition<N> {
  const possessed: DomainDesc<N>[] = new Array(size)
  const needed: DomainDesc<N>[] = new Array(size)
  for (let q = 0; q < size; q++) {
    possessed[q] = domain.possessed(q, size, step)
    needed[q] = domain.needed(q, size, step)
  }
  return { step, epoch: domain.partitionEpoch(step), possessed, needed, periodic: domain.periodic.includes(true) ? domain.periodic : undefined }
}

/** Same boxes for every rank (the step may differ). */
export function samePartition<N extends number>(a: PartitionBoxes<N>, b: PartitionBoxes<N>): boolean {
  if (a === b) return true
  if (a.possessed.length !== b.possessed.length) return false
  for (let q = 0; q < a.possessed.length; q++) {
    if (!a.possessed[q].equals(b.possessed[q]) || !a.needed[q].equals(b.needed[q])) return false
  }
  return true
}

/** Partitions that passed `validatePartition` (so a partition is checked once, however often it is used). */
const valid = new WeakSet<PartitionBoxes>()

/**
 * Reject impossible layouts before any rank computes: overlapping possessed
 * boxes, possessed boxes whose union leaves holes in their hull, and needed
 * boxes that do not contain the possessed box. O(P log P) for strips and
 * slabs (overlaps are looked up in a `BoxIndex`, not tested pair by pair).
 */
export function validatePartition<N extends number>(p: PartitionBoxes<N>, what = 'domain'): void {
  if (valid.has(p)) return
  const size = p.possessed.length
  const where = `${what} at step ${p.step}`
  let hull: DomainDesc<N> | undefined
  let sum = 0
  for (let q = 0; q < size; q++) {
    const pq = p.possessed[q]
    const nq = p.needed[q]
    if (pq.dims !== nq.dims) {
      throw new PartitionError(`${where}: rank ${q} has a ${pq.dims}-D possessed box but a ${nq.dims}-D needed box`)
    }
    if (!nq.contains(pq)) {
      throw new PartitionError(`${where}: the needed box of rank ${q} ${nq} does not contain its possessed box ${pq}`)
    }
    if (!pq.isEmpty) {
      hull = hull ? hull.hull(pq) : pq
      sum += pq.volume
    }
  }
  const index = boxIndexOf(p.possessed)
  const found: number[] = []
  for (let q = 0; q < size; q++) {
    const pq = p.possessed[q]
    if (pq.isEmpty) continue
    found.length = 0
    index.overlapping(pq, found)
    let first = -1
    for (const r of found) if (r < q && (first < 0 || r < first)) first = r
    if (first >= 0) {
      const pr = p.possessed[first]
      throw new PartitionError(`${where}: the possessed boxes of ranks ${first} ${pr} and ${q} ${pq} overlap in ${pr.intersect(pq)}`)
    }
  }
  if (hull && sum !== hull.volume) {
    throw new PartitionError(
      `${where}: the possessed boxes leave gaps: they cover ${sum} of the ${hull.volume} cells of their hull ${hull}`,
    )
  }
  valid.add(p)
}

/** True when two boxes of the same dimension share a cell (no allocation). */
export function boxesOverlap(a: DomainDesc, b: DomainDesc): boolean {
  const n = a.lower.length
  for (let d = 0; d < n; d++) {
    if (Math.max(a.lower[d], b.lower[d]) >= Math.min(a.upper[d], b.upper[d])) return false
  }
  return true
}

/**
 * The non-empty boxes of all ranks sorted along one axis (the one whose
 * lower bounds differ most), to find the boxes that meet a query box without
 * testing all P of them: a binary search bounds the candidates from above
 * and a running maximum of upper bounds stops the scan below.
 *
 * ```ts
 * const found: number[] = []
 * boxIndexOf(partition.possessed).overlapping(myNeededBox, found)   // ranks, ascending
 * ```
 */
export class BoxIndex {
  private readonly axis: number
  /** Ranks of the non-empty boxes, by lower bound along `axis`. */
  private readonly ranks: Int32Array
  private readonly lows: Float64Array
  /** Largest upper bound along `axis` among ranks[0..i]. */
  private readonly maxUp: Float64Array

  constructor(private readonly boxes: readonly DomainDesc[]) {
    const live: number[] = []
    for (let q = 0; q < boxes.length; q++) if (!boxes[q].isEmpty) live.push(q)
    const dims = live.length > 0 ? boxes[live[0]].dims : 1
    let axis = 0
    let best = -1
    for (let d = 0; d < dims; d++) {
      const distinct = new Set<number>()
      for (const q of live) distinct.add(boxes[q].lower[d])
      if (distinct.size > best) {
        best = distinct.size
        axis = d
      }
    }
    live.sort((a, b) => boxes[a].lower[axis] - boxes[b].lower[axis] || a - b)
    this.axis = axis
    this.ranks = Int32Array.from(live)
    this.lows = Float64Array.from(live, (q) => boxes[q].lower[axis])
    this.maxUp = new Float64Array(live.length)
    let m = -Infinity
    for (let i = 0; i < live.length; i++) {
      m = Math.max(m, boxes[live[i]].upper[axis])
      this.maxUp[i] = m
    }
  }

  /** Push the ranks whose box shares a cell with `query` onto `out`, in ascending rank order. */
  overlapping(query: DomainDesc, out: number[]): void {
    if (query.isEmpty) return
    const ax = this.axis
    const top = query.upper[ax]
    const bottom = query.lower[ax]
    // First index whose lower bound is at or past the query's upper bound.
    let lo = 0
    let hi = this.lows.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (this.lows[mid] < top) lo = mid + 1
      else hi = mid
    }
    const start = out.length
    for (let i = lo - 1; i >= 0 && this.maxUp[i] > bottom; i--) {
      const q = this.ranks[i]
      if (boxesOverlap(this.boxes[q], query)) out.push(q)
    }
    if (out.length - start > 1) {
      const mine = out.splice(start).sort((a, b) => a - b)
      for (const q of mine) out.push(q)
    }
  }
}

const indexes = new WeakMap<readonly DomainDesc[], BoxIndex>()

/** The (cached) index of a partition's possessed or needed boxes. */
export function boxIndexOf(boxes: readonly DomainDesc[]): BoxIndex {
  let ix = indexes.get(boxes)
  if (!ix) indexes.set(boxes, (ix = new BoxIndex(boxes)))
  return ix
}

/**
 * Partitions shared by the ranks of one heap (`runLocal`: every rank in one
 * thread). Each rank would otherwise hold all P ranks' boxes, P² boxes in
 * one heap; with a share the ranks of a group hand each other the partition
 * of an epoch, so the group holds O(P) boxes and evaluates each epoch once.
 * Ranks of other transports each have their own heap and need none.
 *
 * ```ts
 * const share = new PartitionShare()                       // one per group of ranks in this thread
 * const slot = share.slot(0, 'grid')                       // skeleton 0, on every rank of the group
 * const parts = new PartitionTracker(grid, rank, size, 'grid', slot)
 * ```
 */
export class PartitionShare {
  private readonly slots = new Map<string, SharedPartitions>()

  /** The partitions of skeleton `index` named `name`: the same slot for that skeleton on every rank. */
  slot(index: number, name: string): SharedPartitions {
    const key = `${index}\u0000${name}`
    let s = this.slots.get(key)
    if (!s) this.slots.set(key, (s = new SharedPartitions()))
    return s
  }
}

/** How many recent epochs a shared slot keeps: ranks of one group drift a few supersteps apart at most, or evaluate their own. */
const SHARED_EPOCHS = 8

/**
 * The recent partitions of one skeleton in a `PartitionShare`, by epoch.
 * A partition is offered with the class and rank count of the domain that
 * produced it; a rank takes it only for the same class and count, and only
 * after checking its own boxes against it (see `PartitionTracker`).
 */
export class SharedPartitions {
  /** Partitions evaluated by the ranks of the group, all together (each epoch once when they agree). */
  evaluated = 0
  private readonly epochs = new Float64Array(SHARED_EPOCHS).fill(NaN)
  private readonly parts: Array<Partition | undefined> = new Array(SHARED_EPOCHS).fill(undefined)
  private readonly kinds: Array<unknown> = new Array(SHARED_EPOCHS).fill(undefined)
  private readonly sizes = new Int32Array(SHARED_EPOCHS)
  private next = 0

  /** The partition of `epoch` for a domain of class `kind` over `size` ranks, if a rank offered it. */
  find(epoch: number, kind: unknown, size: number): Partition | undefined {
    for (let k = 0; k < SHARED_EPOCHS; k++) {
      if (this.epochs[k] === epoch && this.kinds[k] === kind && this.sizes[k] === size) return this.parts[k]
    }
    return undefined
  }

  /** Offer a partition this rank evaluated (replacing the oldest one offered). */
  offer(p: Partition, kind: unknown, size: number): void {
    const k = this.next
    this.next = (k + 1) % SHARED_EPOCHS
    this.epochs[k] = p.epoch
    this.parts[k] = p
    this.kinds[k] = kind
    this.sizes[k] = size
  }
}

/**
 * The partition of each step, evaluated once per partition epoch
 * (`Domain.partitionEpoch`) and validated once: asking for a step of a known
 * epoch costs a call to `partitionEpoch` and a comparison, so a static
 * partition is evaluated once for the whole run however many ranks there are.
 * It remembers the last three epochs (a skeleton looks at the step before,
 * the step and the step after). Given a `SharedPartitions` slot, it first
 * takes the epoch's partition another rank of the same heap evaluated, when
 * that partition gives this rank the boxes its own domain gives it.
 *
 * ```ts
 * const parts = new PartitionTracker(grid, rank, size, 'grid')
 * const p = parts.at(step)      // the same object for every step of an epoch
 * parts.built                   // partitions taken in so far (one per epoch met)
 * parts.evaluated               // of which this rank evaluated itself
 * ```
 */
export class PartitionTracker<N extends number = number> {
  /** Number of partitions taken in so far: one per epoch met, evaluated here or shared. */
  built = 0
  /** Number of partitions this rank evaluated itself (the others came from the shared slot). */
  evaluated = 0
  private readonly epochs = [NaN, NaN, NaN]
  private readonly parts: Array<Partition<N> | undefined> = [undefined, undefined, undefined]
  private readonly used = [0, 0, 0]
  private clock = 0

  constructor(
    private readonly domain: Domain<N>,
    private readonly rank: number,
    private readonly size: number,
    private readonly what: string,
    private readonly shared?: SharedPartitions,
  ) {}

  /** The partition at `step`; evaluated and validated only when `step` opens a new epoch. */
  at(step: number): Partition<N> {
    const epoch = this.domain.partitionEpoch(step)
    const tick = ++this.clock
    let oldest = 0
    for (let k = 0; k < 3; k++) {
      const p = this.parts[k]
      if (p !== undefined && this.epochs[k] === epoch) {
        this.used[k] = tick
        if (step > p.step && (step & (step - 1)) === 0) this.spotCheck(p, step)
        return p
      }
      if (this.used[k] < this.used[oldest]) oldest = k
    }
    const p = this.sharedAt(epoch, step) ?? this.evaluate(step)
    this.built++
    this.epochs[oldest] = epoch
    this.parts[oldest] = p
    this.used[oldest] = tick
    return p
  }

  private evaluate(step: number): Partition<N> {
    const p = partitionAt(this.domain, this.size, step)
    validatePartition(p, this.what)
    this.evaluated++
    if (this.shared) {
      this.shared.evaluated++
      this.shared.offer(p, this.domain.constructor, this.size)
    }
    return p
  }

  /** Another rank's partition of `epoch`, if it gives this rank the boxes its own domain gives at `step`. */
  private sharedAt(epoch: number, step: number): Partition<N> | undefined {
    const p = this.shared?.find(epoch, this.domain.constructor, this.size) as Partition<N> | undefined
    if (p === undefined) return undefined
    return this.ownBoxes(step, p) === undefined ? p : undefined
  }

  /** This rank's boxes at `step` from its own domain, when they differ from those `p` gives it; undefined when they match. */
  private ownBoxes(step: number, p: Partition<N>): { possessed: DomainDesc<N>; needed: DomainDesc<N> } | undefined {
    const possessed = this.domain.possessed(this.rank, this.size, step)
    const needed = this.domain.needed(this.rank, this.size, step)
    return possessed.equals(p.possessed[this.rank]) && needed.equals(p.needed[this.rank]) ? undefined : { possessed, needed }
  }
  /** This rank's boxes at `step` must be those of the epoch's partition (checked at powers of two). */
  private spotCheck(p: Partition<N>, step: number): void {
    const own = this.ownBoxes(step, p)
    if (own !== undefined) {
      const { possessed, needed } = own
      throw new PartitionError(
        `${this.what}: the boxes of rank ${this.rank} changed between steps ${p.step} and ${step} (possessed ${p.possessed[this.rank]} → ${possessed}, ` +
          `needed ${p.needed[this.rank]} → ${needed}) but partitionEpoch gives both epoch ${p.epoch}; override partitionEpoch(step) to say when the partition changes`,
      )
    }
  }
}
