import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { defineProgram, Domain, DomainDesc, option, runLocal, splitPoint, type StorageOrder } from '../../src/index.js'

/** A value whose sum depends on the order of the additions (magnitudes over 10 decades). */
function valueAt(x: readonly number[]): number {
  let h = 0
  for (const v of x) h = Math.imul(h ^ (v + 0x9e37), 0x85ebca6b) >>> 0
  return ((h % 10007) / 10007 - 0.37) * 10 ** ((h >>> 7) % 10)
}

/** Ranks on a grid of `split[d]` parts per dimension (rank → coordinates in C order of the grid). */
class GridOfRanks extends Domain<number> {
  constructor(
    readonly extent: number[],
    readonly split: number[],
    order: StorageOrder,
  ) {
    super(extent.length, { order })
  }
  possessed(rank: number): DomainDesc {
    const lower: number[] = []
    const upper: number[] = []
    let r = rank
    for (let d = this.extent.length - 1; d >= 0; d--) {
      const c = r % this.split[d]
      r = Math.floor(r / this.split[d])
      lower[d] = 2 + splitPoint(this.extent[d], this.split[d], c)
      upper[d] = 2 + splitPoint(this.extent[d], this.split[d], c + 1)
    }
    return DomainDesc.of(lower, upper)
  }
  needed(rank: number): DomainDesc {
    return this.possessed(rank).expand(1) // a halo, so the possessed cells are not contiguous
  }
}

const program = defineProgram({
  name: 'ordered-fold',
  options: { shape: option.string('5x4', 'extents'), split: option.string('1x1', 'ranks per dimension'), order: option.string('C', 'C or F') },
  async main(ctx) {
    const extent = ctx.options.shape.split('x').map(Number)
    const split = ctx.options.split.split('x').map(Number)
    const d = new GridOfRanks(extent, split, ctx.options.order as StorageOrder)
    d.resize(d.needed(ctx.rank))
    const p = d.possessed(ctx.rank)
    d.setPossessedBox(p)
    d.fill(Number.NaN) // halo cells must never be folded
    for (const x of p.cells()) d.set(x, valueAt(x))
    const sum = await ctx.sumInStorageOrder(d)
    const fold = await ctx.foldInStorageOrder(d, 1, (acc, v) => acc * 0.75 + v)
    const rankOrder = await ctx.foldInRankOrder(0, (acc) => {
      for (const x of p.cells(d.order)) acc += d.get(x)
      return acc
    })
    return { sum, fold, rankOrder }
  },
})

/** The serial loops: every cell of the global box in storage order. */
function serial(extent: number[], order: StorageOrder): { sum: number; fold: number } {
  const global = DomainDesc.of(extent.map(() => 2), extent.map((e) => 2 + e))
  let sum = 0
  let fold = 1
  for (const x of global.cells(order)) {
    sum += valueAt(x)
    fold = fold * 0.75 + valueAt(x)
  }
  return { sum, fold }
}

async function check(extent: number[], split: number[], order: StorageOrder): Promise<{ sum: number; rankOrder: number }> {
  const ranks = split.reduce((a, b) => a * b, 1)
  const out = await runLocal(program, { ranks, argv: ['--shape', extent.join('x'), '--split', split.join('x'), '--order', order] })
  const want = serial(extent, order)
  for (const r of out) {
    expect(Object.is(r.sum, want.sum), `sum ${extent} on ${split} (${order}): ${r.sum} vs ${want.sum}`).toBe(true)
    expect(Object.is(r.fold, want.fold), `fold ${extent} on ${split} (${order})`).toBe(true)
  }
  return out[0]
}

describe('sumInStorageOrder / foldInStorageOrder', () => {
  it('give the bits of a serial loop on a 2-D grid of ranks, where rank order does not', async () => {
    const r = await check([37, 23], [2, 3], 'C')
    // The same cells folded rank after rank differ: the test data is order-sensitive.
    expect(Object.is(r.rankOrder, r.sum)).toBe(false)
  })

  it('hold for any decomposition, storage order and dimension (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 3 }).chain((dims) =>
          fc.tuple(fc.array(fc.integer({ min: 1, max: 9 }), { minLength: dims, maxLength: dims }), fc.array(fc.integer({ min: 1, max: 3 }), { minLength: dims, maxLength: dims })),
        ),
        fc.constantFrom<StorageOrder>('C', 'F'),
        async ([extent, split], order) => {
          if (split.reduce((a, b) => a * b, 1) > 6) return
          await check(extent, split, order)
        },
      ),
      { numRuns: 40 },
    )
  })

  it('cross several bands (more than 2^20 cells) on a 2 × 2 grid of ranks', async () => {
    await check([1100, 1001], [2, 2], 'C')
  })
})

/** GridOfRanks with `components` values a cell. */
class GridOfCells extends Domain<number> {
  constructor(
    readonly extent: number[],
    readonly split: number[],
    order: StorageOrder,
    components: number,
  ) {
    super(extent.length, { order, components })
  }
  possessed(rank: number): DomainDesc {
    return GridOfRanks.prototype.possessed.call(this, rank)
  }
  needed(rank: number): DomainDesc {
    return this.possessed(rank).expand(1)
  }
}

/** A step that depends on the order of the cells, on every component and on the coordinates it is given. */
function cellStep(acc: number, cell: Float64Array, at: readonly number[]): number {
  let h = acc * 0.75
  for (let c = 0; c < cell.length; c++) h += cell[c] * (c + 1)
  for (let d = 0; d < at.length; d++) h += at[d] * (d + 2) * 1e-3
  return h
}

const cellsProgram = defineProgram({
  name: 'ordered-fold-cells',
  options: {
    shape: option.string('5x4', 'extents'),
    split: option.string('1x1', 'ranks per dimension'),
    order: option.string('C', 'C or F'),
    components: option.int(3, 'values per cell'),
  },
  async main(ctx) {
    const extent = ctx.options.shape.split('x').map(Number)
    const split = ctx.options.split.split('x').map(Number)
    const d = new GridOfCells(extent, split, ctx.options.order as StorageOrder, ctx.options.components)
    d.resize(d.needed(ctx.rank))
    const p = d.possessed(ctx.rank)
    d.setPossessedBox(p)
    d.fill(Number.NaN) // halo cells must never be folded
    for (const x of p.cells()) for (let c = 0; c < d.components; c++) d.set(x, valueAt([...x, c]), c)
    const cells = await ctx.foldCellsInStorageOrder(d, 1, cellStep)
    const values = await ctx.foldInStorageOrder(d, 1, (acc, v) => acc * 0.75 + v)
    const sum = await ctx.sumInStorageOrder(d)
    return { cells, values, sum }
  },
})

describe('foldCellsInStorageOrder', () => {
  it('hands the step each whole cell and its global coordinates, in the serial order (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 3 }).chain((dims) =>
          fc.tuple(fc.array(fc.integer({ min: 1, max: 7 }), { minLength: dims, maxLength: dims }), fc.array(fc.integer({ min: 1, max: 3 }), { minLength: dims, maxLength: dims })),
        ),
        fc.constantFrom<StorageOrder>('C', 'F'),
        fc.integer({ min: 1, max: 9 }),
        async ([extent, split], order, components) => {
          const ranks = split.reduce((a, b) => a * b, 1)
          if (ranks > 6) return
          const out = await runLocal(cellsProgram, {
            ranks,
            argv: ['--shape', extent.join('x'), '--split', split.join('x'), '--order', order, '--components', String(components)],
          })
          // Brute force: every cell of the global box in storage order, its components built anew.
          const global = DomainDesc.of(extent.map(() => 2), extent.map((e) => 2 + e))
          let cells = 1
          let values = 1
          let sum = 0
          for (const x of global.cells(order)) {
            const cell = Float64Array.from({ length: components }, (_, c) => valueAt([...x, c]))
            cells = cellStep(cells, cell, [...x])
            for (const v of cell) {
              values = values * 0.75 + v
              sum += v
            }
          }
          for (const r of out) {
            expect(Object.is(r.cells, cells), `cells ${extent} on ${split} (${order}, ${components})`).toBe(true)
            expect(Object.is(r.values, values)).toBe(true)
            expect(Object.is(r.sum, sum)).toBe(true)
          }
        },
      ),
      { numRuns: 30 },
    )
  })
})
