import { describe, expect, it } from 'vitest'
import { CountedKernel, defineProgram, Domain, DomainDesc, option, runLocal } from '../../src/index.js'

const CELLS = 3

/** 3 cells per rank on a line, one halo cell on each side. */
class Line extends Domain<1> {
  constructor() {
    super(1)
  }
  possessed(rank: number): DomainDesc<1> {
    return DomainDesc.of([1 + CELLS * rank], [1 + CELLS * (rank + 1)])
  }
  needed(rank: number): DomainDesc<1> {
    return DomainDesc.of([CELLS * rank], [2 + CELLS * (rank + 1)])
  }
}

/**
 * Every cell of rank r holds 1000·r + (supersteps done). Only rank 0 asks
 * for routing, after even steps: the ranks agree on it (any rank asking
 * routes). Records the right halo each superstep reads.
 */
class Count extends CountedKernel<Line> {
  readonly seen: number[] = []
  constructor(
    steps: number,
    readonly rank: number,
  ) {
    super(steps)
  }
  override shouldRoute(_it: number, step: number): boolean {
    return this.rank === 0 && step % 2 === 0
  }
  override initialize(read: Line, write: Line): void {
    for (const d of [read, write]) for (const [i] of d.box.cells()) d.set([i], 1000 * Math.floor((i - 1) / CELLS))
  }
  calculate(read: Line, write: Line): void {
    const b = write.possessedBox
    this.seen.push(read.get([b.upper[0]]))
    for (let i = b.lower[0]; i < b.upper[0]; i++) write.set([i], read.get([i]) + 1)
  }
}

const program = defineProgram({
  name: 'should-route',
  options: { steps: option.int(9, 'supersteps', { min: 1 }) },
  async main(ctx): Promise<number[]> {
    const k = new Count(ctx.options.steps, ctx.rank)
    await ctx.skeleton(k, [new Line(), new Line()]).run()
    return k.seen
  },
})

describe('a kernel that decides when to route (shouldRoute)', () => {
  it('routes after the supersteps one rank asks for, on every rank, fresh halos then and only then', async () => {
    for (const P of [2, 3, 4]) {
      const seen = await runLocal(program, { ranks: P, argv: ['--steps', '9'] })
      for (let r = 0; r < P - 1; r++) {
        const right = 1000 * (r + 1)
        for (let s = 1; s < 9; s++) {
          // Routed after step s − 1 when s − 1 is even: the halo then holds the neighbour's cells after s supersteps.
          if ((s - 1) % 2 === 0) expect(seen[r][s]).toBe(right + s)
          else expect(seen[r][s]).not.toBe(right + s)
        }
      }
    }
  })
})
