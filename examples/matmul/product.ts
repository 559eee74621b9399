import { CountedKernel, type RebuildContext, type StepContext } from 'molotof'
import { type BBlocks, fillB } from './matrices.js'

/**
 * One rank's share of C = A·B: its rows of C accumulate A(rows, block k)·B(block k, :)
 * for the block k of B it holds at each step. `rounds` times around the ring
 * adds A·B that many times (a longer run for benchmarks and failure tests).
 *
 * The kernel owns `c`, the only state replay cannot rebuild: the program
 * registers it, and leaves both domains out of checkpoints (B is a formula).
 */
export class BlockProduct extends CountedKernel<BBlocks> {
  constructor(
    readonly n: number,
    /** This rank's rows of A, row-major (rows × n). */
    readonly a: Float64Array,
    /** This rank's rows of C, row-major (rows × n). */
    readonly c: Float64Array,
    steps: number,
  ) {
    super(steps)
  }

  /** Step 0's block of B, in the domain step 0 reads (its box is needed(rank, size, 0)). */
  override initialize(read: BBlocks, _write: BBlocks, _ctx: StepContext): void {
    fillB(read)
  }

  /** After a restart: the block the next step reads was left out of the checkpoint; B is a formula. */
  override rebuild(read: BBlocks, _write: BBlocks, ctx: RebuildContext<number>): void {
    if (!ctx.restored.read) fillB(read)
  }

  calculate(read: BBlocks): void {
    const { n, a, c } = this
    const rows = c.length / n
    const blk = read.possessedBox
    const k0 = blk.lower[0]
    const k1 = blk.upper[0]
    const { data: b, s0, offset } = read
    for (let i = 0; i < rows; i++) {
      const ci = i * n
      for (let k = k0; k < k1; k++) {
        const aik = a[ci + k]
        if (aik === 0) continue
        const bk = offset + k * s0
        for (let j = 0; j < n; j++) c[ci + j] += aik * b[bk + j]
      }
    }
  }
}
