import type { DomainDesc } from './desc.js'
import { Domain, type DomainOptions } from './domain.js'
import type { NumericArray } from './dtype.js'

/**
 * A three-dimensional domain with fast accessors: cell (i, j, k) is at
 * `offset + i*s0 + j*s1 + k*s2` (its component q, with `components`, at `… + q`).
 *
 * ```ts
 * class Cube extends Domain3D {
 *   constructor(readonly n: number) { super() }
 *   possessed(rank: number, size: number) {
 *     return DomainDesc.of([splitPoint(this.n, size, rank), 0, 0], [splitPoint(this.n, size, rank + 1), this.n, this.n])
 *   }
 *   needed(rank: number, size: number) { return this.possessed(rank, size).expand([1, 0, 0]).intersect(DomainDesc.of([0, 0, 0], [this.n, this.n, this.n])) }
 * }
 * ```
 */
export abstract class Domain3D<A extends NumericArray = Float64Array<ArrayBufferLike>> extends Domain<3, A> {
  constructor(options: DomainOptions = {}) {
    super(3, options)
  }
  get s0(): number {
    return this.strides[0]
  }
  get s1(): number {
    return this.strides[1]
  }
  get s2(): number {
    return this.strides[2]
  }
  /** Value at global cell (i, j, k) (its component `c`, default 0), unchecked. */
  at(i: number, j: number, k: number, c = 0): number {
    return this.data[this.offset + i * this.strides[0] + j * this.strides[1] + k * this.strides[2] + c] as number
  }
  /** Store at global cell (i, j, k) (its component `c`, default 0), unchecked. */
  put(i: number, j: number, k: number, v: number, c = 0): void {
    this.data[this.offset + i * this.strides[0] + j * this.strides[1] + k * this.strides[2] + c] = v
  }
  abstract override possessed(rank: number, size: number, step: number): DomainDesc<3>
  abstract override needed(rank: number, size: number, step: number): DomainDesc<3>
}
