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
  /** Value at global cell (i, j), unchecked. */
  at(i: number, j: number): number {
    return this.data[this.offset + i * this.strides[0] + j * this.strides[1]] as number
  }
  /** Store at global cell (i, j), unchecked. */
  put(i: number, j: number, v: number): void {
    this.data[this.offset + i * this.strides[0] + j * this.strides[1]] = v
  }
  abstract override possessed(rank: number, size: number, step: number): DomainDesc<2>
  abstract override needed(rank: number, size: number, step: number): DomainDesc<2>
}
