/**
 * Block matrix multiplication C = A·B by data circulation, the second family
 * of GReLoSSS programs: each rank owns row blocks of A and C; the row blocks
 * of B travel around the ring of ranks, one step per block, so every rank
 * multiplies its rows by all of B while holding only two blocks of it (the
 * one it reads and the one it receives).
 *
 *   molotof run examples/matmul/matmul.ts --ranks 4 --n 1024
 *
 * Checkpoints hold C and the iterator only: B is rebuilt by light code
 * (`rebuild`), A is replayed.
 */
import { defineProgram, notSetting, option, splitPoint } from 'molotof'
import { BBlocks, rowsOfA } from './matrices.js'
import { BlockProduct } from './product.js'

export interface MatmulResult {
  n: number
  rounds: number
  /** Sum of C in row-major order. */
  checksum: number
  /** With --return-rows: this rank's rows of C [first, first + values.length / n). */
  rows?: { first: number; values: Float64Array }
  seconds: number
}

export default defineProgram({
  name: 'matmul',
  description: 'C = A·B with row blocks of B circulating around the ring of ranks; checkpoints hold C only.',
  options: {
    n: option.int(1024, 'matrix size (n×n)', { min: 1 }),
    rounds: option.int(1, 'times B goes around the ring; C accumulates A·B each time', { min: 1 }),
    returnRows: notSetting(option.boolean(false, "return each rank's rows of C in the result (tests)")),
    minimal: notSetting(option.boolean(true, 'minimal checkpoints: C only (--no-minimal also saves both blocks of B)')),
    policy: notSetting(option.string('', "this skeleton's checkpoint policy, e.g. every:4 (default: the run's --checkpoint)")),
  },
  async main(ctx): Promise<MatmulResult> {
    const { n, rounds } = ctx.options
    const t0 = performance.now()
    const first = splitPoint(n, ctx.size, ctx.rank)
    const rows = splitPoint(n, ctx.size, ctx.rank + 1) - first
    const kernel = new BlockProduct(n, rowsOfA(n, first, rows), new Float64Array(rows * n), rounds * ctx.size)
    const sk = ctx.skeleton(kernel, [new BBlocks(n), new BBlocks(n)], {
      routing: 'circulation',
      ...(ctx.options.policy ? { checkpoint: ctx.options.policy } : {}),
    })
    // C is the only state replay cannot rebuild: register it. The blocks of B
    // are a formula, rebuilt by the kernel's `rebuild` after a restart.
    sk.checkpoint.register('C', kernel.c)
    if (ctx.options.minimal) {
      sk.checkpoint.unregister('read')
      sk.checkpoint.unregister('write')
    }
    await sk.run()
    const seconds = (performance.now() - t0) / 1000

    const c = kernel.c
    // Rows of C are in rank order: folding rank by rank is the serial row-major sum.
    const checksum = await ctx.foldInRankOrder(0, (acc) => {
      for (let k = 0; k < c.length; k++) acc += c[k]
      return acc
    })
    const result: MatmulResult = { n, rounds, checksum, seconds }
    if (ctx.options.returnRows) result.rows = { first, values: c }
    return result
  },
  format: (r) => [`matmul n=${r.n} rounds=${r.rounds}`, `checksum ${r.checksum}`, `compute  ${r.seconds.toFixed(3)} s`].join('\n'),
})
