import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { DomainDesc } from '../../src/index.js'

const box = (dims: number) =>
  fc
    .tuple(
      fc.array(fc.integer({ min: -5, max: 5 }), { minLength: dims, maxLength: dims }),
      fc.array(fc.integer({ min: 0, max: 4 }), { minLength: dims, maxLength: dims }),
    )
    .map(([lo, ext]) => DomainDesc.of(lo, lo.map((l, d) => l + ext[d])))

describe('DomainDesc', () => {
  it('intersect, contains and volume agree with a cell-by-cell count', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3 }).chain((d) => fc.tuple(box(d), box(d))), ([a, b]) => {
        const i = a.intersect(b)
        const inBoth = [...a.cells()].filter((c) => b.containsPoint(c)).length
        expect(i.volume).toBe(inBoth)
        expect(i.equals(b.intersect(a))).toBe(true)
        expect(a.contains(i) && b.contains(i)).toBe(true)
        expect(a.hull(b).contains(a) && a.hull(b).contains(b)).toBe(true)
        expect([...a.cells()].length).toBe(a.volume)
      }),
    )
  })

  it('iterates in storage order: C makes the last index fastest, F the first', () => {
    const b = DomainDesc.of([0, 10], [2, 13])
    expect([...b.cells('C')].slice(0, 4)).toEqual([[0, 10], [0, 11], [0, 12], [1, 10]])
    expect([...b.cells('F')].slice(0, 3)).toEqual([[0, 10], [1, 10], [0, 11]])
  })

  it('treats all empty boxes as equal and contained anywhere', () => {
    const e1 = DomainDesc.of([3, 3], [3, 9])
    const e2 = DomainDesc.of([0, 5], [-1, 5])
    expect(e1.isEmpty && e2.isEmpty).toBe(true)
    expect(e1.equals(e2)).toBe(true)
    expect(DomainDesc.of([0, 0], [1, 1]).contains(e1)).toBe(true)
  })

  it('rejects bounds that are not integers or of different lengths', () => {
    expect(() => DomainDesc.of([0.5], [2])).toThrow(/integers/)
    expect(() => DomainDesc.of([0, 0], [2])).toThrow(/same positive length/)
  })
})
