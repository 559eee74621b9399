// Jacobi on an n×n interior cut in 2-D blocks (a px×py grid of ranks, px the
// largest divisor of the rank count up to its square root): a rank's block is
// strided in every old rank file of another rank count, so an elastic restore
// reads one run per row of each intersection. For bench:elastic.
import { CountedKernel, defineProgram, Domain2D, DomainDesc, option, splitPoint } from 'molotof'
import { sweep } from './strip-jacobi.js'

function grid(size: number): [number, number] {
  let px = 1
  for (let k = 1; k * k <= size; k++) if (size % k === 0) px = k
  return [px, size / px]
}

class Blocks extends Domain2D {
  constructor(readonly n: number) {
    super({ order: 'C' })
  }
  possessed(rank: number, size: number): DomainDesc<2> {
    const [px, py] = grid(size)
    const a = Math.floor(rank / py)
    const b = rank % py
    return DomainDesc.of([1 + splitPoint(this.n, px, a), 1 + splitPoint(this.n, py, b)], [1 + splitPoint(this.n, px, a + 1), 1 + splitPoint(this.n, py, b + 1)])
  }
  needed(rank: number, size: number): DomainDesc<2> {
    const p = this.possessed(rank, size)
    return p.isEmpty ? p : p.expand(1)
  }
}

class Relax extends CountedKernel<Blocks> {
  override initialize(read: Blocks, write: Blocks): void {
    for (const d of [read, write]) {
      d.fill(0)
      if (d.box.lower[0] === 0) for (let j = d.box.lower[1]; j < d.box.upper[1]; j++) d.put(0, j, 1)
    }
  }
  calculate(read: Blocks, write: Blocks): void {
    const b = write.possessedBox
    sweep(read.data, read.s0, read.offset, write.data, write.s0, write.offset, b.lower[0], b.upper[0], b.lower[1], b.upper[1])
  }
}

export default defineProgram({
  name: 'block-jacobi',
  options: {
    n: option.int(1024, 'interior size', { min: 1 }),
    iterations: option.int(6, 'sweeps', { min: 1 }),
  },
  async main(ctx) {
    const sk = ctx.skeleton(new Relax(ctx.options.iterations), [new Blocks(ctx.options.n), new Blocks(ctx.options.n)])
    sk.checkpoint.unregister('write')
    const u = await sk.run()
    return ctx.sumInStorageOrder(u)
  },
})
