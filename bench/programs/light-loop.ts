// 100,000 supersteps of almost nothing: measures the framework's per-step cost
// and how fast recovery replays light iterations.
import { CalcKernel, defineProgram, Domain, DomainDesc, option } from 'molotof'

class Cell1 extends Domain<1> {
  constructor() {
    super(1)
  }
  possessed(rank: number): DomainDesc<1> {
    return DomainDesc.of([rank], [rank + 1])
  }
  needed(rank: number): DomainDesc<1> {
    return this.possessed(rank)
  }
}

class Count extends CalcKernel<{ k: number; phase: number }, Cell1> {
  constructor(readonly steps: number) {
    super()
  }
  begin() {
    return { k: 0, phase: 0 }
  }
  end(it: { k: number }) {
    return it.k >= this.steps
  }
  next(it: { k: number; phase: number }) {
    return { k: it.k + 1, phase: (it.phase * 31 + 7) % 1009 }
  }
  calculate(read: Cell1, write: Cell1, it: { k: number }): void {
    const k = write.possessedBox.lower[0]
    write.set([k], read.get([k]) + it.k)
  }
}

export default defineProgram({
  name: 'light-loop',
  options: { steps: option.int(100_000, 'supersteps') },
  async main(ctx) {
    const grid = await ctx.skeleton(new Count(ctx.options.steps), [new Cell1(), new Cell1()]).run()
    return grid.get([ctx.rank])
  },
})
