// A grid of n×n float64 cells on a px × py grid of ranks, summed three ways:
// ctx.sumInStorageOrder (serial bits), ctx.allreduce of local sums (not serial
// bits), and one rank's local loop over its own cells (the floor).
import { defineProgram, Domain2D, DomainDesc, option, splitPoint } from 'molotof'

class Grid extends Domain2D {
  constructor(
    readonly n: number,
    readonly px: number,
  ) {
    super()
  }
  possessed(rank: number, size: number): DomainDesc<2> {
    const py = size / this.px
    const r = Math.floor(rank / py)
    const c = rank % py
    return DomainDesc.of([splitPoint(this.n, this.px, r), splitPoint(this.n, py, c)], [splitPoint(this.n, this.px, r + 1), splitPoint(this.n, py, c + 1)])
  }
  needed(rank: number, size: number): DomainDesc<2> {
    return this.possessed(rank, size)
  }
}

export default defineProgram({
  name: 'ordered-sum',
  options: { n: option.int(2048, 'grid size'), px: option.int(2, 'rank rows'), repeats: option.int(5, 'repeats') },
  async main(ctx) {
    const { n, px, repeats } = ctx.options
    const g = new Grid(n, px)
    const box = g.possessed(ctx.rank, ctx.size)
    g.resize(box)
    g.setPossessedBox(box)
    for (let k = 0; k < g.data.length; k++) g.data[k] = Math.sin(k * 0.001 + ctx.rank)
    const ordered: number[] = []
    const reduce: number[] = []
    const local: number[] = []
    for (let r = 0; r < repeats; r++) {
      await ctx.barrier()
      let t = performance.now()
      await ctx.sumInStorageOrder(g)
      ordered.push(performance.now() - t)
      await ctx.barrier()
      t = performance.now()
      let s = 0
      for (let k = 0; k < g.data.length; k++) s += g.data[k]
      local.push(performance.now() - t)
      await ctx.allreduce(s, 'sum')
      reduce.push(performance.now() - t)
    }
    return { ordered, reduce, local }
  },
})
