import { describe, expect, it } from 'vitest'
import { ConfigError, Domain, Domain2D, Domain3D, DomainDesc, type StorageOrder } from '../../src/index.js'

class Free2D extends Domain2D {
  constructor(order: StorageOrder = 'C', preserve = true) {
    super({ order, preserveOnResize: preserve })
  }
  possessed(): DomainDesc<2> {
    return this.box
  }
  needed(): DomainDesc<2> {
    return this.box
  }
}

describe('Domain', () => {
  it('addresses cells by global and local coordinates in C and F order', () => {
    for (const order of ['C', 'F'] as const) {
      const d = new Free2D(order)
      d.resize(DomainDesc.of([10, 20], [13, 24]))
      let k = 0
      for (const c of d.box.cells(order)) d.set(c, k++)
      // Storage order means consecutive cells in that order are consecutive in memory.
      expect(Array.from(d.data)).toEqual([...Array(12).keys()])
      expect(d.getLocal([0, 0])).toBe(d.get([10, 20]))
      expect(d.at(12, 23)).toBe(d.get([12, 23]))
      expect(d.s0 * (order === 'C' ? 1 : 3)).toBe(order === 'C' ? 4 : 3)
      expect(() => d.get([13, 20])).toThrow(ConfigError)
    }
  })

  it('keeps the values of cells that stay in the box on resize', () => {
    const d = new Free2D()
    d.resize(DomainDesc.of([0, 0], [4, 4]))
    for (const c of d.box.cells()) d.set(c, c[0] * 10 + c[1])
    d.resize(DomainDesc.of([2, 1], [6, 3]))
    for (const c of DomainDesc.of([2, 1], [4, 3]).cells()) expect(d.get(c)).toBe(c[0] * 10 + c[1])
    expect(d.get([5, 2])).toBe(0)
  })

  it('reuses memory without copying when preserveOnResize is off', () => {
    const d = new Free2D('C', false)
    d.resize(DomainDesc.of([0, 0], [4, 4]))
    const buf = d.data.buffer
    d.resize(DomainDesc.of([1, 0], [4, 4]))
    expect(d.data.buffer).toBe(buf)
  })

  it('finds contiguous sub-boxes and returns them as views', () => {
    const d = new Free2D('C')
    d.resize(DomainDesc.of([0, 0], [4, 5]))
    expect(d.isContiguous(DomainDesc.of([1, 0], [3, 5]))).toBe(true) // full rows
    expect(d.isContiguous(DomainDesc.of([2, 1], [3, 4]))).toBe(true) // part of one row
    expect(d.isContiguous(DomainDesc.of([1, 1], [3, 4]))).toBe(false) // a column band
    const v = d.view(DomainDesc.of([1, 0], [2, 5]))
    v[0] = 42
    expect(d.get([1, 0])).toBe(42)
    const f = new Free2D('F')
    f.resize(DomainDesc.of([0, 0], [4, 5]))
    expect(f.isContiguous(DomainDesc.of([0, 1], [4, 3]))).toBe(true) // full columns
    expect(f.isContiguous(DomainDesc.of([1, 0], [3, 5]))).toBe(false)
  })

  it('3-D accessors match the generic index', () => {
    class Cube extends Domain3D {
      possessed(): DomainDesc<3> {
        return this.box
      }
      needed(): DomainDesc<3> {
        return this.box
      }
    }
    const c = new Cube()
    c.resize(DomainDesc.of([1, 2, 3], [3, 5, 7]))
    c.put(2, 4, 6, 7.5)
    expect(c.get([2, 4, 6])).toBe(7.5)
    expect(c.index([2, 4, 6])).toBe(c.offset + 2 * c.s0 + 4 * c.s1 + 6 * c.s2)
  })

  it('rejects impossible construction arguments', () => {
    class Bad extends Domain {
      possessed(): DomainDesc {
        return this.box
      }
      needed(): DomainDesc {
        return this.box
      }
    }
    expect(() => new Bad(0)).toThrow(/at least one dimension/)
    expect(() => new Bad(2, { order: 'X' as StorageOrder })).toThrow(/storage order/)
  })
})

describe('Domain lending (a checkpoint copy reading the memory during the next superstep)', () => {
  it('is lent until the reader settles, refuses a resize meanwhile, and tells the lender how long the owner waited', async () => {
    const d = new Free2D()
    d.resize(DomainDesc.of([0, 0], [4, 4]))
    let done!: () => void
    const reading = new Promise<void>((resolve) => (done = resolve))
    const waits: number[] = []
    d.lend(reading, (ms) => waits.push(ms))
    expect(d.lent).toBe(true)
    // The same box is no change; another would reuse or replace memory the reader still reads.
    d.resize(DomainDesc.of([0, 0], [4, 4]))
    expect(() => d.resize(DomainDesc.of([0, 0], [2, 4]))).toThrow(/resized while a checkpoint copy still read it/)
    const back = d.returned()
    await new Promise((r) => setTimeout(r, 20))
    expect(d.lent).toBe(true)
    done()
    await back
    expect(d.lent).toBe(false)
    expect(waits.length).toBe(1)
    expect(waits[0]).toBeGreaterThanOrEqual(15)
    d.resize(DomainDesc.of([0, 0], [2, 4]))
    expect(d.box.upper).toEqual([2, 4])
  })

  it('a reader that failed returns the memory too (its checkpoint fails on its own); returned() on a domain not lent waits for nothing', async () => {
    const d = new Free2D()
    d.resize(DomainDesc.of([0, 0], [4, 4]))
    const waits: number[] = []
    await d.returned()
    d.lend(Promise.reject(new Error('the I/O thread exited')), (ms) => waits.push(ms))
    await d.returned()
    expect(d.lent).toBe(false)
    expect(waits.length).toBe(1)
  })
})

describe('Domain with components per cell', () => {
  class Cells2D extends Domain2D {
    constructor(order: StorageOrder) {
      super({ components: 9, order })
    }
    possessed(): DomainDesc<2> {
      return DomainDesc.of([0, 0], [4, 5])
    }
    needed(): DomainDesc<2> {
      return this.possessed().expand(1)
    }
  }

  it('holds exactly cells × components values, halos growing the cells only, whole cells kept on resize', () => {
    for (const order of ['C', 'F'] as const) {
      const d = new Cells2D(order)
      d.resize(d.needed())
      // 6 × 7 cells of 9 values: a 3-D domain grown by expand(1) would hold 6 × 7 × 11.
      expect(d.data.length).toBe(6 * 7 * 9)
      expect(order === 'C' ? d.s1 : d.s0).toBe(9)
      for (const [i, j] of d.box.cells()) for (let q = 0; q < 9; q++) d.set([i, j], 100 * i + 10 * j + q, q)
      // Components of a cell are neighbours in memory, cells follow the storage order.
      expect(d.data[d.index([2, 3]) + 4]).toBe(234)
      expect(d.at(2, 3, 8)).toBe(238)
      d.resize(DomainDesc.of([1, 2], [3, 9]))
      expect(d.data.length).toBe(2 * 7 * 9)
      for (const [i, j] of DomainDesc.of([1, 2], [3, 6]).cells()) for (let q = 0; q < 9; q++) expect(d.get([i, j], q)).toBe(100 * i + 10 * j + q)
      d.fill(-1, DomainDesc.of([1, 2], [2, 9]))
      expect(d.get([1, 8], 8)).toBe(-1)
      expect(d.get([2, 2], 0)).toBe(220)
      expect(() => d.get([1, 2], 9)).toThrow(ConfigError)
    }
  })

  it('refuses a component count that is not a positive whole number', () => {
    class Bad extends Domain2D {
      possessed(): DomainDesc<2> {
        return this.box
      }
      needed(): DomainDesc<2> {
        return this.box
      }
    }
    expect(() => new (Bad as unknown as new (o: object) => Bad)({ components: 0 })).toThrow(ConfigError)
    expect(() => new (Bad as unknown as new (o: object) => Bad)({ components: 2.5 })).toThrow(ConfigError)
  })
})
