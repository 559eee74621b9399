import type { DomainDesc } from '../domains/desc.js'
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
  ) {}

  static build(rank: number, mode: RoutingMode, from: Partition, to: Partition): RoutingPlan {
    // Only the peers whose boxes meet this rank's are visited (BoxIndex), not all P.
    const sends: PeerTransfer[] = []
    const recvs: PeerTransfer[] = []
    const peers: number[] = []
    const mine = from.possessed[rank]
    boxIndexOf(to.needed).overlapping(mine, peers)
    for (const peer of peers) {
      if (peer === rank) continue
      const out = mine.intersect(to.needed[peer])
      sends.push({ peer, boxes: [out], cells: out.volume })
    }
    peers.length = 0
    const need = to.needed[rank]
    boxIndexOf(from.possessed).overlapping(need, peers)
    for (const peer of peers) {
      if (peer === rank) continue
      const inn = from.possessed[peer].intersect(need)
      recvs.push({ peer, boxes: [inn], cells: inn.volume })
    }
    let local: DomainDesc | undefined
    if (mode === 'circulation') {
      const keep = mine.intersect(need)
      if (!keep.isEmpty) local = keep
    }
    return new RoutingPlan(rank, mode, from, to, sends, recvs, local)
  }

  /** Cells received per superstep (the halo volume, or the incoming block). */
  get cellsIn(): number {
    return this.recvs.reduce((s, t) => s + t.cells, 0)
  }

  get cellsOut(): number {
    return this.sends.reduce((s, t) => s + t.cells, 0)
  }
}
