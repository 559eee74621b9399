// Jacobi on a strip of fixed width whose height grows with the rank count
// (a fixed number of rows per rank): the weak-scaling program of bench:scale.
import { CountedKernel, defineProgram, Domain2D, DomainDesc, notSetting, option, splitPoint } from 'molotof'
import { allocatedBytes, startAllocationCount } from '../../src/bench/alloc.js'

/** rows × cols interior (1..rows, 1..cols) with a one-cell boundary; row strips over the ranks. */
export class Strip extends Domain2D {
  constructor(
    readonly rows: number,
    readonly cols: number,
  ) {
    super({ order: 'C' })
  }
  possessed(rank: number, size: number): DomainDesc<2> {
    return DomainDesc.of([1 + splitPoint(this.rows, size, rank), 1], [1 + splitPoint(this.rows, size, rank + 1), this.cols + 1])
  }
  needed(rank: number, size: number): DomainDesc<2> {
    const p = this.possessed(rank, size)
    return p.isEmpty ? p : DomainDesc.of([p.lower[0] - 1, 0], [p.upper[0] + 1, this.cols + 2])
  }
}

/** The 4-point stencil of examples/jacobi, on the possessed rows. */
export function sweep(u: Float64Array, su: number, ou: number, v: Float64Array, sv: number, ov: number, i0: number, i1: number, j0: number, j1: number): void {
  for (let i = i0; i < i1; i++) {
    const r = ou + i * su
    const w = ov + i * sv
    for (let j = j0; j < j1; j++) v[w + j] = 0.25 * (u[r + j - 1] + u[r + j + 1] + u[r - su + j] + u[r + su + j])
  }
}

class StripSweep extends CountedKernel<Strip> {
  override initialize(read: Strip, write: Strip): void {
    for (const d of [read, write]) if (d.box.lower[0] === 0) for (let j = 0; j <= d.cols + 1; j++) d.put(0, j, 1)
  }
  calculate(read: Strip, write: Strip): void {
    const b = write.possessedBox
    sweep(read.data, read.s0, read.offset, write.data, write.s0, write.offset, b.lower[0], b.upper[0], b.lower[1], b.upper[1])
  }
}

export interface StripResult {
  /** Seconds of the skeleton loop on this rank. */
  seconds: number
  /** Bytes this rank's V8 heap allocated during the skeleton loop (with --count-alloc). */
  allocated: number
  /** Sum of the possessed cells (to check that runs agree). */
  sum: number
}

export default defineProgram({
  name: 'strip-jacobi',
  options: {
    rowsPerRank: option.int(8, 'interior rows per rank', { min: 1 }),
    cols: option.int(64, 'interior columns', { min: 1 }),
    iterations: option.int(50, 'sweeps', { min: 0 }),
    policy: notSetting(option.string('', 'checkpoint policy of the skeleton')),
    countAlloc: notSetting(option.boolean(false, "count this rank's heap allocation during the loop (one rank per heap)")),
  },
  async main(ctx): Promise<StripResult> {
    const o = ctx.options
    const rows = o.rowsPerRank * ctx.size
    const sk = ctx.skeleton(new StripSweep(o.iterations), [new Strip(rows, o.cols), new Strip(rows, o.cols)], o.policy ? { checkpoint: o.policy } : {})
    const count = o.countAlloc ? startAllocationCount() : undefined
    const t0 = performance.now()
    const grid = await sk.run()
    const seconds = (performance.now() - t0) / 1000
    const allocated = count ? allocatedBytes(count) : 0
    let sum = 0
    const b = grid.possessed(ctx.rank, ctx.size)
    for (let i = b.lower[0]; i < b.upper[0]; i++) for (let j = b.lower[1]; j < b.upper[1]; j++) sum += grid.at(i, j)
    return { seconds, allocated, sum }
  },
})
