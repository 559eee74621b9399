import { ConfigError } from '../errors.js'

/** Storage order of a domain: `C` (last index fastest) or `F` (first index fastest). */
export type StorageOrder = 'C' | 'F'

/**
 * A box of cells in global coordinates: `lower[d] <= x[d] < upper[d]` in every
 * dimension d (half-open, so adjacent boxes share no cell and `upper - lower` is
 * the extent). A box with any extent ≤ 0 is empty.
 *
 * ```ts
 * const rows = DomainDesc.of([0, 0], [4, 8])   // 4 rows × 8 columns
 * rows.intersect(DomainDesc.of([2, 0], [10, 8])).volume  // 16
 * for (const [i, j] of rows.cells()) console.log(i, j)  // C order: j fastest
 * ```
 */
export class DomainDesc<N extends number = number> {
  readonly lower: readonly number[]
  readonly upper: readonly number[]

  constructor(lower: readonly number[], upper: readonly number[]) {
    if (lower.length !== upper.length || lower.length === 0) {
      throw new ConfigError(`a box needs lower and upper bounds of the same positive length (got ${lower.length} and ${upper.length})`)
    }
    for (let d = 0; d < lower.length; d++) {
      if (!Number.isSafeInteger(lower[d]) || !Number.isSafeInteger(upper[d])) {
        throw new ConfigError(`box bounds must be integers (dimension ${d}: ${lower[d]}..${upper[d]})`)
      }
    }
    this.lower = Object.freeze([...lower])
    this.upper = Object.freeze([...upper])
  }

  /** The box [lower, upper); its dimension count is the length of `lower` (`DomainDesc.of([0, 0], [4, 4])` is a `DomainDesc<2>`). */
  static of<const L extends readonly number[]>(lower: L, upper: readonly number[]): DomainDesc<L['length']> {
    return new DomainDesc<L['length']>(lower, upper)
  }

  /** An empty box of `dims` dimensions. */
  static empty<N extends number>(dims: N): DomainDesc<N> {
    return new DomainDesc<N>(new Array<number>(dims).fill(0), new Array<number>(dims).fill(0))
  }

  get dims(): N {
    return this.lower.length as N
  }

  /** Number of cells along dimension `d` (0 when empty). */
  extent(d: number): number {
    return Math.max(0, this.upper[d] - this.lower[d])
  }

  get isEmpty(): boolean {
    for (let d = 0; d < this.lower.length; d++) if (this.upper[d] <= this.lower[d]) return true
    return false
  }

  get volume(): number {
    let v = 1
    for (let d = 0; d < this.lower.length; d++) v *= this.extent(d)
    return v
  }

  /** The cells in both boxes (possibly empty). */
  intersect(o: DomainDesc<N>): DomainDesc<N> {
    this.checkDims(o)
    const lo = this.lower.map((l, d) => Math.max(l, o.lower[d]))
    const up = this.upper.map((u, d) => Math.min(u, o.upper[d]))
    return new DomainDesc<N>(lo, up)
  }

  /** The smallest box containing both (an empty box contributes nothing). */
  hull(o: DomainDesc<N>): DomainDesc<N> {
    this.checkDims(o)
    if (this.isEmpty) return o
    if (o.isEmpty) return this
    return new DomainDesc<N>(
      this.lower.map((l, d) => Math.min(l, o.lower[d])),
      this.upper.map((u, d) => Math.max(u, o.upper[d])),
    )
  }

  /** True when every cell of `o` is in this box (an empty `o` is contained anywhere). */
  contains(o: DomainDesc<N>): boolean {
    this.checkDims(o)
    if (o.isEmpty) return true
    for (let d = 0; d < this.lower.length; d++) {
      if (o.lower[d] < this.lower[d] || o.upper[d] > this.upper[d]) return false
    }
    return true
  }

  /** Whether the cell `p` (global coordinates) lies in the box (upper bounds exclusive). */
  containsPoint(p: readonly number[]): boolean {
    for (let d = 0; d < this.lower.length; d++) if (p[d] < this.lower[d] || p[d] >= this.upper[d]) return false
    return true
  }

  /** Whether the two boxes share at least one cell. */
  overlaps(o: DomainDesc<N>): boolean {
    return !this.intersect(o).isEmpty
  }

  /** Same set of cells (all empty boxes are equal). */
  equals(o: DomainDesc<N>): boolean {
    if (o === this) return true // the per-superstep case: a resize to the box the domain already has
    if (o.dims !== this.dims) return false
    if (this.isEmpty || o.isEmpty) return this.isEmpty && o.isEmpty
    for (let d = 0; d < this.lower.length; d++) {
      if (this.lower[d] !== o.lower[d] || this.upper[d] !== o.upper[d]) return false
    }
    return true
  }

  /** Grow (or shrink, with negative values) by `by[d]` cells on both sides of dimension d. */
  expand(by: readonly number[] | number): DomainDesc<N> {
    const b = (d: number) => (typeof by === 'number' ? by : by[d] ?? 0)
    return new DomainDesc<N>(this.lower.map((l, d) => l - b(d)), this.upper.map((u, d) => u + b(d)))
  }

  /** Cells in storage order: `C` makes the last coordinate vary fastest, `F` the first. */
  *cells(order: StorageOrder = 'C'): IterableIterator<number[]> {
    if (this.isEmpty) return
    const n = this.dims
    const p = [...this.lower]
    const dimsInOrder = order === 'C' ? [...Array(n).keys()].reverse() : [...Array(n).keys()]
    for (;;) {
      yield [...p]
      let k = 0
      for (; k < n; k++) {
        const d = dimsInOrder[k]
        if (++p[d] < this.upper[d]) break
        p[d] = this.lower[d]
      }
      if (k === n) return
    }
  }

  /** Plain bounds, as checkpoint headers and JSON output store them. */
  toJSON(): { lower: number[]; upper: number[] } {
    return { lower: [...this.lower], upper: [...this.upper] }
  }

  /** `[lo..hi, …)` per dimension, as messages print boxes. */
  toString(): string {
    return `[${this.lower.map((l, d) => `${l}..${this.upper[d]}`).join(', ')})`
  }

  private checkDims(o: DomainDesc<number>): void {
    if (o.dims !== this.dims) throw new ConfigError(`box dimensions differ: ${this.dims} vs ${o.dims}`)
  }
}
