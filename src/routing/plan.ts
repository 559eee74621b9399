import { DomainDesc } from '../domains/desc.js'
import { PartitionError } from '../errors.js'
import { boxIndexOf, type Partition } from './partition.js'

/**
 * How data moves between two supersteps.
 * - `border`: each rank keeps what it computed; halos (cells a rank needs but
 *   another possesses) are copied from their owners. Source and target are the
 *   domain just written.
 * - `circulation`: whole blocks move to another rank's buffer (a ring, as in
 *   block matrix multiplication). Source is the domain just read, target the
 *   one just written; blocks a rank keeps are copied locally.
 */
export type RoutingMode = 'border' | 'circulation'

/** Cells a rank copies within itself across a periodic boundary: `from` (possessed) into `to` (halo), cell by cell in storage order. */
export interface Wrap {
  readonly from: DomainDesc
  readonly to: DomainDesc
}

/** Boxes exchanged with one peer, in a fixed order both sides agree on. */
export interface PeerTransfer {
  readonly peer: number
  readonly boxes: readonly DomainDesc[]
  /** Total number of cells over `boxes`. */
  readonly cells: number
}

/**
 * The *scheme* of one rank's communication from superstep s to s+1: who it
 * sends which boxes to and receives which boxes from. It depends only on the
 * two partitions, never on data, so it is computed once and cached until the
 * partition changes (see `Router.plan`). Rank q receives from each peer p the
 * cells `possessed_p(s) ∩ needed_q(s+1)`; a rank never sends to itself.
 *
 * ```ts
 * const plan = RoutingPlan.build(rank, 'border', partitionAt(d, size, s), partitionAt(d, size, s + 1))
 * plan.sends   // [{ peer: 1, boxes: [...], cells: 2048 }]
 * ```
 */
export class RoutingPlan {
  private constructor(
    readonly rank: number,
    readonly mode: RoutingMode,
    readonly from: Partition,
    readonly to: Partition,
    readonly sends: readonly PeerTransfer[],
    readonly recvs: readonly PeerTransfer[],
    /** Circulation only: cells this rank moves from its source to its target domain. */
    readonly local: DomainDesc | undefined,
    /** Periodic axes: halo cells this rank fills from cells it possesses itself, one period away. */
    readonly wraps: readonly Wrap[],
  ) {}

  static build(rank: number, mode: RoutingMode, from: Partition, to: Partition): RoutingPlan {
    // Only the peers whose boxes meet this rank's are visited (BoxIndex), not all P.
    // With periodic axes, each shift by whole periods is one more pass: a
    // needed cell x takes the value of the possessed cell x + shift.
    const shifts = periodShifts(from, to)
    const sendBoxes = new Map<number, DomainDesc[]>()
    const recvBoxes = new Map<number, DomainDesc[]>()
    const wraps: Wrap[] = []
    const peers: number[] = []
    const mine = from.possessed[rank]
    const need = to.needed[rank]
    for (const shift of shifts) {
      peers.length = 0
      boxIndexOf(to.needed).overlapping(shifted(mine, shift, -1), peers)
      for (const peer of peers) {
        const out = mine.intersect(shifted(to.needed[peer], shift, 1))
        if (out.isEmpty) continue
        if (peer !== rank) push(sendBoxes, peer, out)
        else if (shift !== NO_SHIFT) wraps.push({ from: out, to: shifted(out, shift, -1) })
      }
      peers.length = 0
      const source = shifted(need, shift, 1)
      boxIndexOf(from.possessed).overlapping(source, peers)
      for (const peer of peers) {
        if (peer === rank) continue
        const inn = from.possessed[peer].intersect(source)
        if (!inn.isEmpty) push(recvBoxes, peer, shifted(inn, shift, -1))
      }
    }
    let local: DomainDesc | undefined
    if (mode === 'circulation') {
      const keep = mine.intersect(need)
      if (!keep.isEmpty) local = keep
    }
    return new RoutingPlan(rank, mode, from, to, transfers(sendBoxes), transfers(recvBoxes), local, wraps)
  }

  /** Cells received per superstep (the halo volume, or the incoming block). */
  get cellsIn(): number {
    return this.recvs.reduce((s, t) => s + t.cells, 0)
  }

  get cellsOut(): number {
    return this.sends.reduce((s, t) => s + t.cells, 0)
  }
}

const NO_SHIFT: readonly number[] = []

/**
 * The shifts (in cells, per axis) by which a needed cell finds its owner:
 * none, and with periodic axes every combination of 0, +period and −period
 * along them, in one fixed order (so sender and receiver list a peer's boxes
 * alike). The period is the extent of the global box, the hull of the
 * possessed boxes; a needed box may reach one period past it, no further.
 */
function periodShifts(from: Partition, to: Partition): Array<readonly number[]> {
  const periodic = from.periodic
  const shifts: Array<readonly number[]> = [NO_SHIFT]
  if (!periodic) return shifts
  let global: DomainDesc | undefined
  for (const b of from.possessed) if (!b.isEmpty) global = global ? global.hull(b) : b
  if (!global) return shifts
  const n = global.dims
  for (let d = 0; d < n; d++) {
    if (!periodic[d]) continue
    const period = global.extent(d)
    for (const b of to.needed) {
      if (!b.isEmpty && (b.lower[d] < global.lower[d] - period || b.upper[d] > global.upper[d] + period)) {
        throw new PartitionError(`the needed box ${b} reaches more than one period (${period} cells) past the global box ${global} along periodic axis ${d}`)
      }
    }
  }
  const axes = periodic.flatMap((p, d) => (p ? [d] : []))
  for (let code = 1; code < 3 ** axes.length; code++) {
    const shift = new Array<number>(n).fill(0)
    let c = code
    for (const d of axes) {
      const digit = c % 3
      c = Math.floor(c / 3)
      shift[d] = digit === 0 ? 0 : digit === 1 ? global.extent(d) : -global.extent(d)
    }
    shifts.push(shift)
  }
  return shifts
}

/** `box` moved by `sign` × `shift` (NO_SHIFT: the box itself). */
function shifted<N extends number>(box: DomainDesc<N>, shift: readonly number[], sign: 1 | -1): DomainDesc<N> {
  if (shift === NO_SHIFT) return box
  return new DomainDesc<N>(box.lower.map((l, d) => l + sign * shift[d]), box.upper.map((u, d) => u + sign * shift[d]))
}

function push(map: Map<number, DomainDesc[]>, peer: number, box: DomainDesc): void {
  const list = map.get(peer)
  if (list) list.push(box)
  else map.set(peer, [box])
}

/** One transfer per peer, by ascending rank. */
function transfers(map: Map<number, DomainDesc[]>): PeerTransfer[] {
  return [...map.keys()].sort((a, b) => a - b).map((peer) => {
    const boxes = map.get(peer)!
    return { peer, boxes, cells: boxes.reduce((n, b) => n + b.volume, 0) }
  })
}
