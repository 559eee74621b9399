import { describe, expect, it } from 'vitest'
import { CountedKernel, defineProgram, Domain2D, DomainDesc, option, runLocal, splitPoint } from '../../src/index.js'

// A kernel's `initialize` fills the cells its rank possesses, nothing else:
// step 0 must still read its neighbours' initial values (halos in border
// mode, the cells beyond its own block in circulation), as every later step
// reads what they computed.

/** The initial field: non-zero everywhere, different in every cell. */
const initial = (i: number, j: number): number => Math.sin(0.7 * i + 1.3 * j) + 0.01 * i * j + 2

/** An N × M grid in blocks over a px × py grid of ranks (uneven splits); a rank needs its block and one cell around it, within the grid. */
class Blocks extends Domain2D {
  constructor(
    readonly n: number,
    readonly m: number,
    readonly px: number,
  ) {
    super()
  }
  possessed(rank: number, size: number): DomainDesc<2> {
    const py = size / this.px
    const a = rank % this.px
    const b = Math.floor(rank / this.px)
    return DomainDesc.of([splitPoint(this.n, this.px, a), splitPoint(this.m, py, b)], [splitPoint(this.n, this.px, a + 1), splitPoint(this.m, py, b + 1)])
  }
  needed(rank: number, size: number): DomainDesc<2> {
    const p = this.possessed(rank, size)
    return DomainDesc.of([Math.max(0, p.lower[0] - 1), Math.max(0, p.lower[1] - 1)], [Math.min(this.n, p.upper[0] + 1), Math.min(this.m, p.upper[1] + 1)])
  }
}

/** A 5-point smoothing of the interior; the edge cells keep their initial values. Initializes possessed cells only. */
class Smooth extends CountedKernel<Blocks> {
  override initialize(read: Blocks): void {
    for (const [i, j] of read.possessedBox.cells()) read.put(i, j, initial(i, j))
  }
  calculate(read: Blocks, write: Blocks): void {
    const { n, m } = read
    for (const [i, j] of write.possessedBox.cells()) {
      const edge = i === 0 || j === 0 || i === n - 1 || j === m - 1
      write.put(i, j, edge ? read.at(i, j) : 0.2 * (read.at(i, j) + read.at(i - 1, j) + read.at(i + 1, j) + read.at(i, j - 1) + read.at(i, j + 1)))
    }
  }
}

const stencil = defineProgram({
  name: 'stencil-possessed-init',
  options: {
    n: option.int(13, 'rows'),
    m: option.int(11, 'columns'),
    px: option.int(1, 'ranks along the rows'),
    steps: option.int(6, 'supersteps'),
  },
  async main(ctx) {
    const { n, m, px, steps } = ctx.options
    const sk = ctx.skeleton(new Smooth(steps), [new Blocks(n, m, px), new Blocks(n, m, px)])
    const grid = await sk.run()
    const mine = Array.from(grid.possessed(ctx.rank, ctx.size).cells(), ([i, j]) => [i, j, grid.at(i, j)])
    const all = await ctx.allgather(mine)
    const out = new Array<number>(n * m).fill(Number.NaN)
    for (const part of all) for (const [i, j, v] of part) out[i * m + j] = v
    return out
  },
})

/** The same smoothing on one array with plain loops, outside the framework. */
function serialSmooth(n: number, m: number, steps: number): number[] {
  let u: number[] = []
  for (let i = 0; i < n; i++) for (let j = 0; j < m; j++) u.push(initial(i, j))
  for (let s = 0; s < steps; s++) {
    const v = u.slice()
    for (let i = 1; i < n - 1; i++) {
      for (let j = 1; j < m - 1; j++) {
        v[i * m + j] = 0.2 * (u[i * m + j] + u[(i - 1) * m + j] + u[(i + 1) * m + j] + u[i * m + j - 1] + u[i * m + j + 1])
      }
    }
    u = v
  }
  return u
}

/** Rows of a vector (n × 1) in P blocks; at step s rank r holds block (r + s) mod P and also needs the first row of the block after it. */
class Ring extends Domain2D {
  constructor(readonly n: number) {
    super()
  }
  possessed(rank: number, size: number, step: number): DomainDesc<2> {
    const k = (rank + step) % size
    return DomainDesc.of([splitPoint(this.n, size, k), 0], [splitPoint(this.n, size, k + 1), 1])
  }
  needed(rank: number, size: number, step: number): DomainDesc<2> {
    const p = this.possessed(rank, size, step)
    return DomainDesc.of([p.lower[0], 0], [Math.min(this.n, p.upper[0] + 1), 1])
  }
  override partitionEpoch(step: number): number {
    return step
  }
}

/** x(i) = small integers, so every sum below is exact whatever the order. */
const x = (i: number): number => ((i * 7 + 3) % 11) - 5

/** Each rank adds x(i)·x(i+1) over the rows of the block it holds (reading one row past it); initializes its own block only. */
class Pairs extends CountedKernel<Ring> {
  total = 0
  override initialize(read: Ring): void {
    for (const [i] of read.possessedBox.cells()) read.put(i, 0, x(i))
  }
  calculate(read: Ring): void {
    const b = read.possessedBox
    for (let i = b.lower[0]; i < b.upper[0]; i++) if (i + 1 < read.n) this.total += read.at(i, 0) * read.at(i + 1, 0)
  }
}

const ring = defineProgram({
  name: 'ring-possessed-init',
  options: { n: option.int(23, 'rows'), rounds: option.int(2, 'times around the ring') },
  async main(ctx) {
    const k = new Pairs(ctx.options.rounds * ctx.size)
    await ctx.skeleton(k, [new Ring(ctx.options.n), new Ring(ctx.options.n)], { routing: 'circulation' }).run()
    return k.total
  },
})

describe('step 0 reads what the other ranks initialized', () => {
  it('border: a 2-D stencil whose initialize fills possessed cells only gives the serial grid on 1, 2 and 2 × 2 ranks', async () => {
    const reference = serialSmooth(13, 11, 6)
    const one = await runLocal(stencil, { ranks: 1 })
    expect(one[0]).toEqual(reference)
    const two = await runLocal(stencil, { ranks: 2, argv: ['--px', '2'] })
    expect(two[0]).toEqual(reference)
    const four = await runLocal(stencil, { ranks: 4, argv: ['--px', '2'] })
    expect(four[0]).toEqual(reference)
  })

  it('circulation: a block that also needs a row of the next one reads it at step 0 too (1 and 4 ranks)', async () => {
    let pairs = 0
    for (let i = 0; i + 1 < 23; i++) pairs += x(i) * x(i + 1)
    expect(await runLocal(ring, { ranks: 1 })).toEqual([2 * pairs])
    expect(await runLocal(ring, { ranks: 4 })).toEqual([2 * pairs, 2 * pairs, 2 * pairs, 2 * pairs])
  })
})
