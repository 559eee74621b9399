/**
 * 2-D Jacobi relaxation of the Laplace equation on an n×n interior, split in
 * row strips over the ranks.
 *
 *   molotof run examples/jacobi/jacobi.ts --ranks 4 --n 2048 --iterations 200
 */
import { defineProgram, notSetting, option } from 'molotof'
import { Plate } from './plate.js'
import { Relaxation } from './relaxation.js'

export interface JacobiResult {
  n: number
  iterations: number
  /** Max-norm of the discrete Laplace residual on the final grid. */
  residual: number
  /** Sum of the interior in row-major order (bit-identical to a serial loop). */
  checksum: number
  /** With --return-rows: this rank's interior rows [first, first + rows.length / n). */
  rows?: { first: number; values: Float64Array }
  /** Time this rank spent in the sweeps of this run: since the restart when it resumed from a checkpoint (`resumed`). */
  seconds: number
  /** The run resumed from a checkpoint (a recovery, --resume): `seconds` counts from there, not from step 0. */
  resumed: boolean
}

export default defineProgram({
  name: 'jacobi',
  description: 'Jacobi relaxation of the Laplace equation (top boundary 1, others 0), row strips over the ranks.',
  options: {
    n: option.int(2048, 'interior size (n×n cells)', { min: 1 }),
    iterations: option.int(200, 'number of Jacobi sweeps', { min: 0 }),
    returnRows: notSetting(option.boolean(false, "return each rank's interior rows in the result (tests)")),
    minimal: notSetting(option.boolean(true, 'minimal checkpoints: only the grid just computed (--no-minimal saves both grids)')),
    policy: notSetting(option.string(undefined, "this skeleton's checkpoint policy, e.g. every:50, 30s, mtbf:6h (default: the run's --checkpoint)")),
  },
  async main(ctx): Promise<JacobiResult> {
    const { n, iterations } = ctx.options
    const t0 = performance.now()
    const kernel = new Relaxation(iterations)
    const sk = ctx.skeleton(kernel, [new Plate(n), new Plate(n)], ctx.options.policy ? { checkpoint: ctx.options.policy } : {})
    // The other grid is overwritten by the next sweep, and the boundary is
    // light (set again by replay): the grid just computed is all a restart needs.
    if (ctx.options.minimal) sk.checkpoint.unregister('write')
    const grid = await sk.run()
    const seconds = (performance.now() - t0) / 1000

    const box = grid.possessed(ctx.rank, ctx.size)
    const { data: u, s0, offset } = grid
    let localMax = 0
    for (let i = box.lower[0]; i < box.upper[0]; i++) {
      const r = offset + i * s0
      for (let j = 1; j <= n; j++) {
        const res = Math.abs(0.25 * (u[r + j - 1] + u[r + j + 1] + u[r - s0 + j] + u[r + s0 + j]) - u[r + j])
        if (res > localMax) localMax = res
      }
    }
    const residual = await ctx.allreduce(localMax, 'max')
    const checksum = await ctx.foldInRankOrder(0, (acc) => {
      for (let i = box.lower[0]; i < box.upper[0]; i++) {
        const r = offset + i * s0
        for (let j = 1; j <= n; j++) acc += u[r + j]
      }
      return acc
    })
    const result: JacobiResult = { n, iterations, residual, checksum, seconds, resumed: ctx.recovering }
    if (ctx.options.returnRows) {
      const values = new Float64Array(box.volume)
      let k = 0
      for (let i = box.lower[0]; i < box.upper[0]; i++) for (let j = 1; j <= n; j++) values[k++] = u[offset + i * s0 + j]
      result.rows = { first: box.lower[0], values }
    }
    return result
  },
  format: (r) =>
    [
      `jacobi n=${r.n} iterations=${r.iterations}`,
      `residual ${r.residual.toExponential(6)}`,
      `checksum ${r.checksum}`,
      `compute  ${r.seconds.toFixed(3)} s${r.resumed ? ' (from the checkpoint it resumed from: the steps before it are not counted)' : ''}`,
    ].join('\n'),
})
