import { Domain2D, DomainDesc, splitPoint } from 'molotof'
import { haloAt, reachableWindows } from './model/bellman.js'
import type { PriceLattice } from './model/lattice.js'
import type { SwingParams } from './model/params.js'

/**
 * The value function V at one date: volume level × price node. Only the volume
 * dimension is split among ranks. The superstep `step` computes date
 * k = N − 1 − step from date k + 1, so:
 *
 * - possessed(step): this rank's share of the levels computed at date k
 *   (the whole grid, or only the levels reachable from v0), × the nodes of date k;
 * - needed(step): those levels widened by the date's halo (withdrawal below,
 *   injection above: it changes with the season) × the nodes of date k + 1.
 *
 * Both boxes change from date to date (the tree widens, the window grows), so
 * the partition epoch is the step: the framework evaluates the partition,
 * resizes domains and rebuilds routing plans at every date.
 */
export class SwingDomain extends Domain2D {
  private readonly lo: Int32Array
  private readonly hi: Int32Array

  constructor(
    readonly params: SwingParams,
    readonly lattice: PriceLattice,
    readonly window: boolean,
  ) {
    // Every needed cell is recomputed or routed each date: a resize never needs to copy.
    super({ preserveOnResize: false })
    const n = params.N
    if (window) {
      const w = reachableWindows(params)
      this.lo = w.lo
      this.hi = w.hi
    } else {
      this.lo = new Int32Array(n + 1)
      this.hi = new Int32Array(n + 1).fill(params.nGrid + 1)
    }
  }

  /** The boxes change with the date (the tree widens, the window and halos move): a new partition every superstep. */
  override partitionEpoch(step: number): number {
    return step
  }

  /** The decision date computed at superstep `step`. */
  dateOf(step: number): number {
    return this.params.N - 1 - step
  }

  possessed(rank: number, size: number, step: number): DomainDesc<2> {
    const k = this.dateOf(step)
    const lo = this.lo[k]
    const count = this.hi[k] - lo
    return DomainDesc.of([lo + splitPoint(count, size, rank), 0], [lo + splitPoint(count, size, rank + 1), this.lattice.nodes(k)])
  }

  needed(rank: number, size: number, step: number): DomainDesc<2> {
    const k = this.dateOf(step)
    const p = this.possessed(rank, size, step)
    if (p.isEmpty) return p
    const { below, above } = haloAt(this.params, k)
    const g0 = Math.max(this.lo[k + 1], p.lower[0] - below)
    const g1 = Math.min(this.hi[k + 1], p.upper[0] + above)
    return DomainDesc.of([g0, 0], [g1, this.lattice.nodes(k + 1)])
  }
}
