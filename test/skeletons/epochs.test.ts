import { describe, expect, it } from 'vitest'
import { CountedKernel, defineProgram, Domain2D, DomainDesc, option, runLocal, splitPoint } from '../../src/index.js'

/**
 * Row strips of an n × 3 grid whose split moves with the partition epoch:
 * even epochs give the extra rows to the first ranks, odd epochs to the last
 * ones (so for n = 10 on 3 ranks the boundaries go 0,4,7,10 ↔ 0,3,6,10).
 * `lie` keeps the epoch at 0 while the boxes still move.
 */
class Shifting extends Domain2D {
  constructor(
    readonly n: number,
    readonly period: number,
    readonly lie = false,
  ) {
    super()
  }
  private cut(k: number, size: number, step: number): number {
    const odd = Math.floor(step / this.period) % 2 === 1
    return odd ? this.n - splitPoint(this.n, size, size - k) : splitPoint(this.n, size, k)
  }
  possessed(rank: number, size: number, step: number): DomainDesc<2> {
    return DomainDesc.of([this.cut(rank, size, step), 0], [this.cut(rank + 1, size, step), 3])
  }
  needed(rank: number, size: number, step: number): DomainDesc<2> {
    const p = this.possessed(rank, size, step)
    return DomainDesc.of([Math.max(0, p.lower[0] - 1), 0], [Math.min(this.n, p.upper[0] + 1), 3])
  }
  override partitionEpoch(step: number): number {
    return this.lie ? 0 : Math.floor(step / this.period)
  }
}

/** u[i] ← u[i] + (u[i-1] + u[i+1]) / 4 inside, the two edge rows fixed: every row depends on its halo. */
class Smooth extends CountedKernel<Shifting> {
  override initialize(read: Shifting): void {
    for (const [i, j] of read.box.cells()) read.put(i, j, (i * 7 + j * 3) % 5)
  }
  calculate(read: Shifting, write: Shifting): void {
    const n = read.n
    for (const [i, j] of write.possessedBox.cells()) {
      write.put(i, j, i === 0 || i === n - 1 ? read.at(i, j) : read.at(i, j) + (read.at(i - 1, j) + read.at(i + 1, j)) / 4)
    }
  }
}

interface Counts {
  partitions: number
  /** Partitions this rank evaluated itself (runLocal ranks share the others). */
  evaluated: number
  plans: number
  rows: number[]
}

const program = defineProgram({
  name: 'shifting-strips',
  options: {
    n: option.int(10, 'rows', { min: 2 }),
    steps: option.int(20, 'supersteps', { min: 1 }),
    period: option.int(5, 'supersteps per epoch', { min: 1 }),
    lie: option.boolean(false, 'keep the epoch fixed while the boxes move'),
  },
  async main(ctx): Promise<Counts> {
    const o = ctx.options
    const sk = ctx.skeleton(new Smooth(o.steps), [new Shifting(o.n, o.period, o.lie), new Shifting(o.n, o.period, o.lie)])
    const grid = await sk.run()
    const b = grid.possessed(ctx.rank, ctx.size, o.steps - 1) // the last superstep's cells
    const all = await ctx.allgather(Array.from(b.cells(), ([i, j]) => [i, j, grid.at(i, j)]))
    const rows = new Array<number>(o.n * 3)
    for (const part of all) for (const [i, j, v] of part) rows[i * 3 + j] = v
    return { partitions: sk.partitionsBuilt, evaluated: sk.partitionsEvaluated, plans: sk.plansBuilt, rows }
  },
})

/** The same smoothing on one array, written independently of the framework. */
function serial(n: number, steps: number): number[] {
  let u = Array.from({ length: n * 3 }, (_, k) => (Math.floor(k / 3) * 7 + (k % 3) * 3) % 5)
  for (let s = 0; s < steps; s++) {
    const v = u.slice()
    for (let i = 1; i < n - 1; i++) for (let j = 0; j < 3; j++) v[i * 3 + j] = u[i * 3 + j] + (u[(i - 1) * 3 + j] + u[(i + 1) * 3 + j]) / 4
    u = v
  }
  return u
}

describe('partition epochs', () => {
  it('a static partition is evaluated once and its routing plan built once, however many supersteps', async () => {
    const out = await runLocal(program, { ranks: 3, argv: ['--steps', '40', '--period', '1000000'] })
    for (const r of out) {
      expect(r.partitions).toBe(1)
      expect(r.plans).toBe(1)
    }
    expect(out[0].rows).toEqual(serial(10, 40))
  })

  it('partitions and plans are rebuilt on a new epoch only, and the moving strips compute the serial values', async () => {
    // Steps 0..19 in epochs of 5: epochs 0, 1, 2, 3 → 4 partitions; plans for (0,0) (0,1) (1,1) (1,2) (2,2) (2,3) (3,3).
    const out = await runLocal(program, { ranks: 3, argv: ['--steps', '20', '--period', '5'] })
    for (const r of out) {
      expect(r.partitions).toBe(4)
      expect(r.plans).toBe(7)
    }
    expect(out[0].rows).toEqual(serial(10, 20))
  })

  it('a partition that changes every superstep is evaluated at every superstep', async () => {
    const out = await runLocal(program, { ranks: 3, argv: ['--steps', '12', '--period', '1'] })
    for (const r of out) expect(r.partitions).toBe(12)
    expect(out[0].rows).toEqual(serial(10, 12))
  })

  it('the 64 ranks of a runLocal group evaluate each epoch once between them (O(P) boxes in the heap, not O(P²))', async () => {
    const still = await runLocal(program, { ranks: 64, argv: ['--n', '128', '--steps', '10', '--period', '1000000'] })
    expect(still.reduce((n, r) => n + r.evaluated, 0)).toBe(1)
    for (const r of still) expect(r.partitions).toBe(1)
    expect(still[0].rows).toEqual(serial(128, 10))
    const moving = await runLocal(program, { ranks: 64, argv: ['--n', '128', '--steps', '20', '--period', '5'] })
    expect(moving.reduce((n, r) => n + r.evaluated, 0)).toBe(4)
    for (const r of moving) expect(r.partitions).toBe(4)
    expect(moving[0].rows).toEqual(serial(128, 20))
  })

  it('boxes that move inside one epoch are caught (spot check) with a PartitionError naming partitionEpoch', async () => {
    await expect(runLocal(program, { ranks: 3, argv: ['--steps', '20', '--period', '3', '--lie'] })).rejects.toThrow(/partitionEpoch/)
  })
})
