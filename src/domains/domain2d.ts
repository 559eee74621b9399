import type { DomainDesc } from './desc.js'
import { Domain, type DomainOptions } from './domain.js'
import type { NumericArray } from './dtype.js'

/**
 * A two-dimensional domain with fast accessors. Hot loops take `data`, `s0`,
 * `s1` and `offset` once and index directly: cell (i, j) is at
 * `offset + i*s0 + j*s1`.
 *
 * ```ts
 * class Plate extends Domain2D {
 *   constructor(readonly n: number) { super() }
 *   possessed(rank: number, size: number) {
 *     return DomainDesc.of([1 + splitPoint(this.n, size, rank), 1], [1 + splitPoint(this.n, size, rank + 1), this.n + 1])
 *   }
 *   needed(rank: number, size: number) { return this.possessed(rank, size).expand(1) }
 * }
 * // in a kernel's calculate(read: Plate, write: Plate):
 * const { data: u, s0, offset } = grid   // C order: s1 === 1
 * const center = u[offset + 1 * s0 + 1]   // cell (1, 1)
 * ```
 *
 * With `components` (values per cell, an innermost axis halos never grow),
 * component q of cell (i, j) is at `offset + i*s0 + j*s1 + q`:
 *
 * ```ts
 * class Lattice extends Domain2D {
 *   constructor(readonly n: number) { super({ components: 9 }) }   // D2Q9: 9 distributions a cell
 *   possessed(rank: number, size: number) { return RankGrid.of(DomainDesc.of([0, 0], [this.n, this.n]), size).boxOf(rank) }
 *   needed(rank: number, size: number) { return this.possessed(rank, size).expand(1).intersect(DomainDesc.of([0, 0], [this.n, this.n])) }
 * }
 * const f = new Lattice(64)
 * const { data, s0, s1, offset } = f     // s1 === 9 in C order
 * const f5 = data[offset + 3 * s0 + 4 * s1 + 5]   // distribution 5 of cell (3, 4)
 * ```
 */
export abstract class Domain2D<A extends NumericArray = Float64Array<ArrayBufferLike>> extends Domain<2, A> {
  constructor(options: DomainOptions = {}) {
    super(2, options)
  }
  /** Stride of the first index. */
  get s0(): number {
    return this.strides[0]
  }
  /** Stride of the second index. */
  get s1(): number {
    return this.strides[1]
  }
  /** Value at global cell (i, j) (its component `c`, default 0), unchecked. */
  at(i: number, j: number, c = 0): number {
    return this.data[this.offset + i * this.strides[0] + j * this.strides[1] + c] as number
  }
  /** Store at global cell (i, j) (its component `c`, default 0), unchecked. */
  put(i: number, j: number, v: number, c = 0): void {
    this.data[this.offset + i * this.strides[0] + j * this.strides[1] + c] = v
  }
  abstract override possessed(rank: number, size: number, step: number): DomainDesc<2>
  abstract override needed(rank: number, size: number, step: number): DomainDesc<2>
}
