import { ConfigError } from '../errors.js'
import { DomainDesc } from './desc.js'
import { splitPoint } from './split.js'

/**
 * A grid of ranks over a global box, as PETSc's `PETSC_DECIDE` chooses it:
 * `size` is factored into one rank count per axis (their product is `size`)
 * so that the faces between the boxes are as small as possible, and each
 * axis is split into nearly equal, contiguous parts (the first
 * `extent % ranks` parts one cell longer). Ranks are numbered in C order of
 * the grid: the last axis varies fastest.
 *
 * ```ts
 * class Cavity extends Domain2D {
 *   readonly global: DomainDesc<2>
 *   constructor(readonly n: number) { super({ components: 9 }); this.global = DomainDesc.of([0, 0], [n, n]) }
 *   possessed(rank: number, size: number) { return RankGrid.of(this.global, size).boxOf(rank) }
 *   needed(rank: number, size: number) { return this.possessed(rank, size).expand(1).intersect(this.global) }
 * }
 * RankGrid.of(DomainDesc.of([0, 0], [300, 200]), 6).ranks        // [3, 2]
 * RankGrid.of(DomainDesc.of([0, 0], [64, 64]), 4, [4, 1]).ranks  // strips of rows
 * ```
 */
export class RankGrid<N extends number = number> {
  /** Ranks per axis; their product is the rank count. */
  readonly ranks: readonly number[]

  private constructor(
    readonly global: DomainDesc<N>,
    ranks: readonly number[],
  ) {
    this.ranks = Object.freeze([...ranks])
  }

  /**
   * The grid for `size` ranks over `global`. `fixed` gives the rank count of
   * some axes (0 or undefined: choose it). Grids of the last few shapes asked
   * for are kept, so `possessed` may call this for every rank.
   */
  static of<N extends number>(global: DomainDesc<N>, size: number, fixed?: readonly (number | undefined)[]): RankGrid<N> {
    if (!Number.isSafeInteger(size) || size < 1) throw new ConfigError(`a rank grid needs a positive whole number of ranks (got ${size})`)
    for (const g of recent) if (g.size === size && g.grid.global.equals(global) && sameFixed(g.fixed, fixed)) return g.grid as RankGrid<N>
    const grid = new RankGrid(global, chooseRanks(global, size, fixed))
    recent[next] = { size, fixed: fixed ? [...fixed] : undefined, grid }
    next = (next + 1) % RECENT
    return grid
  }

  get size(): number {
    return this.ranks.reduce((a, b) => a * b, 1)
  }

  /** The grid coordinates of `rank` (C order: the last axis fastest). */
  coordsOf(rank: number): number[] {
    this.checkRank(rank)
    const c = new Array<number>(this.ranks.length)
    let r = rank
    for (let d = this.ranks.length - 1; d >= 0; d--) {
      c[d] = r % this.ranks[d]
      r = Math.floor(r / this.ranks[d])
    }
    return c
  }

  /** The rank at grid coordinates `coords`; -1 outside the grid (a neighbour past an edge). */
  rankAt(coords: readonly number[]): number {
    let r = 0
    for (let d = 0; d < this.ranks.length; d++) {
      const c = coords[d]
      if (!(c >= 0 && c < this.ranks[d])) return -1
      r = r * this.ranks[d] + c
    }
    return r
  }

  /** The box of `rank`: its part of every axis of the global box. */
  boxOf(rank: number): DomainDesc<N> {
    const c = this.coordsOf(rank)
    const g = this.global
    const lower = c.map((k, d) => g.lower[d] + splitPoint(g.extent(d), this.ranks[d], k))
    const upper = c.map((k, d) => g.lower[d] + splitPoint(g.extent(d), this.ranks[d], k + 1))
    return new DomainDesc<N>(lower, upper)
  }

  private checkRank(rank: number): void {
    if (!Number.isSafeInteger(rank) || rank < 0 || rank >= this.size) {
      throw new ConfigError(`rank ${rank} is not in a grid of ${this.ranks.join('×')} ranks`)
    }
  }
}

const RECENT = 8
const recent: Array<{ size: number; fixed: (number | undefined)[] | undefined; grid: RankGrid }> = []
let next = 0

function sameFixed(a: readonly (number | undefined)[] | undefined, b: readonly (number | undefined)[] | undefined): boolean {
  const n = Math.max(a?.length ?? 0, b?.length ?? 0)
  for (let d = 0; d < n; d++) if ((a?.[d] || 0) !== (b?.[d] || 0)) return false
  return true
}

/**
 * Among the ways to write `size` as a product of one factor per axis
 * (respecting `fixed`), the one with the smallest total face between boxes:
 * Σ_d (ranks_d − 1) · volume / extent_d. Grids with fewer axes split into
 * more parts than cells (which leaves ranks empty) win; ties go to more ranks on the
 * slower axes (the first), so the choice is the same on every rank.
 */
function chooseRanks(global: DomainDesc, size: number, fixed: readonly (number | undefined)[] | undefined): number[] {
  const n = global.dims
  const extents = Array.from({ length: n }, (_, d) => global.extent(d))
  for (let d = 0; d < n; d++) {
    const f = fixed?.[d]
    if (f !== undefined && f !== 0 && (!Number.isSafeInteger(f) || f < 1 || size % f !== 0)) {
      throw new ConfigError(`a rank grid of ${size} ranks cannot have ${f} ranks along axis ${d}: give a divisor of ${size}, or 0 to choose`)
    }
  }
  const divisors: number[] = []
  for (let k = 1; k <= size; k++) if (size % k === 0) divisors.push(k)
  let best: number[] | undefined
  let bestKey: [number, number] = [Infinity, Infinity]
  const current = new Array<number>(n)
  const visit = (d: number, left: number): void => {
    if (d === n - 1) {
      const f = fixed?.[d]
      if (f && f !== left) return
      current[d] = left
      const key = costOf(current, extents)
      if (key[0] < bestKey[0] || (key[0] === bestKey[0] && key[1] < bestKey[1])) {
        bestKey = key
        best = [...current]
      }
      return
    }
    for (let i = divisors.length - 1; i >= 0; i--) {
      const k = divisors[i]
      if (left % k !== 0) continue
      const f = fixed?.[d]
      if (f && f !== k) continue
      current[d] = k
      visit(d + 1, left / k)
    }
  }
  visit(0, size)
  if (!best) throw new ConfigError(`no rank grid of ${size} ranks has ${fixed?.map((f) => f || '?').join('×')} ranks per axis`)
  return best
}

/** [axes with more ranks than cells, face between boxes], compared in that order. */
function costOf(ranks: readonly number[], extents: readonly number[]): [number, number] {
  let volume = 1
  for (const e of extents) volume *= e
  let over = 0
  let face = 0
  for (let d = 0; d < ranks.length; d++) {
    if (ranks[d] > extents[d]) over++
    face += extents[d] > 0 ? ((ranks[d] - 1) * volume) / extents[d] : 0
  }
  return [over, face]
}
