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
