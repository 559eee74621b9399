import { Domain2D, DomainDesc, splitPoint } from 'molotof'

/**
 * The two factors of C = A·B, n×n, as formulas: light data every rank can
 * compute for any cell, so replay rebuilds them and checkpoints never hold
 * them. Entries are small integers, so every product and every partial sum
 * is exact in float64: C has the same bits whatever order the blocks of B
 * arrive in (that order differs from rank to rank).
 */
export function aAt(i: number, k: number): number {
  return ((i * 7 + k * 3) % 11) - 4
}

export function bAt(k: number, j: number): number {
  return ((k * 5 + j * 2 + 1) % 13) - 5
}

/** The rows [first, first + rows) of A, row-major: what one rank multiplies. */
export function rowsOfA(n: number, first: number, rows: number): Float64Array {
  const a = new Float64Array(rows * n)
  for (let i = 0; i < rows; i++) for (let k = 0; k < n; k++) a[i * n + k] = aAt(first + i, k)
  return a
}

/**
 * B split in row blocks that circulate around the ring of ranks: at step s,
 * rank r holds block (r + s) mod size, and passes it to rank r − 1 for step
 * s + 1. `possessed` is the block a rank multiplies at a step; `needed`, the
 * same block: a rank reads nothing else. In circulation the skeleton reads
 * `read` and receives the next block into `write` (a receive buffer).
 */
export class BBlocks extends Domain2D {
  constructor(readonly n: number) {
    super({ preserveOnResize: false })
  }

  /** Rows of B in block k of `size`. */
  block(k: number, size: number): DomainDesc<2> {
    return DomainDesc.of([splitPoint(this.n, size, k), 0], [splitPoint(this.n, size, k + 1), this.n])
  }

  possessed(rank: number, size: number, step: number): DomainDesc<2> {
    return this.block((rank + step) % size, size)
  }

  needed(rank: number, size: number, step: number): DomainDesc<2> {
    return this.possessed(rank, size, step)
  }

  /** The blocks move every superstep. */
  override partitionEpoch(step: number): number {
    return step
  }
}

/** Fill every allocated cell of a block domain with B's entries (initialize and rebuild). */
export function fillB(d: BBlocks): void {
  const b = d.box
  const { data, s0, offset } = d
  for (let k = b.lower[0]; k < b.upper[0]; k++) {
    const row = offset + k * s0
    for (let j = b.lower[1]; j < b.upper[1]; j++) data[row + j] = bAt(k, j)
  }
}
