import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { ConfigError, DomainDesc, RankGrid } from '../../src/index.js'

/** A global box of 1 to 3 axes, each 1..40 cells from an offset in -5..5. */
const globalBox = fc
  .array(fc.tuple(fc.integer({ min: -5, max: 5 }), fc.integer({ min: 1, max: 24 })), { minLength: 1, maxLength: 3 })
  .map((axes) => DomainDesc.of(axes.map(([lo]) => lo), axes.map(([lo, e]) => lo + e)))

describe('RankGrid', () => {
  it('tiles the global box: one box per rank, no overlap, no hole, parts differing by at most one cell per axis', () => {
    fc.assert(
      fc.property(globalBox, fc.integer({ min: 1, max: 36 }), (global, size) => {
        const grid = RankGrid.of(global, size)
        expect(grid.ranks.length).toBe(global.dims)
        expect(grid.ranks.reduce((a, b) => a * b, 1)).toBe(size)
        // Count, cell by cell (a flat index over the global box), the ranks whose box holds it.
        const owners = new Int32Array(global.volume)
        const extents: Array<Set<number>> = global.lower.map(() => new Set())
        let outside = 0
        for (let r = 0; r < size; r++) {
          const b = grid.boxOf(r)
          expect(grid.rankAt(grid.coordsOf(r))).toBe(r)
          for (let d = 0; d < global.dims; d++) extents[d].add(b.extent(d))
          for (const x of b.cells()) {
            if (!global.containsPoint(x)) outside++
            let k = 0
            for (let d = 0; d < x.length; d++) k = k * global.extent(d) + (x[d] - global.lower[d])
            owners[k]++
          }
        }
        expect(outside).toBe(0)
        expect(owners.every((n) => n === 1)).toBe(true)
        for (const s of extents) expect(Math.max(...s) - Math.min(...s)).toBeLessThanOrEqual(1)
      }),
      { numRuns: 300 },
    )
  })

  it('puts the remainder on the first ranks of an axis', () => {
    const grid = RankGrid.of(DomainDesc.of([0], [10]), 3)
    expect([0, 1, 2].map((r) => grid.boxOf(r).toString())).toEqual(['[0..4)', '[4..7)', '[7..10)'])
  })

  it('chooses the grid with the smallest face between boxes, as a brute force over all factorizations does', () => {
    fc.assert(
      fc.property(globalBox, fc.integer({ min: 1, max: 64 }), (global, size) => {
        const n = global.dims
        const extents = global.lower.map((_, d) => global.extent(d))
        // Every factorization of size into n ordered factors.
        const all: number[][] = []
        const rec = (prefix: number[], left: number): void => {
          if (prefix.length === n - 1) return void all.push([...prefix, left])
          for (let k = 1; k <= left; k++) if (left % k === 0) rec([...prefix, k], left / k)
        }
        rec([], size)
        const cells = extents.reduce((a, b) => a * b, 1)
        const face = (f: number[]) => f.reduce((s, k, d) => s + ((k - 1) * cells) / extents[d], 0)
        const empties = (f: number[]) => f.filter((k, d) => k > extents[d]).length
        const best = Math.min(...all.map((f) => empties(f) * 1e12 + face(f)))
        const chosen = [...RankGrid.of(global, size).ranks]
        expect(empties(chosen) * 1e12 + face(chosen)).toBe(best)
      }),
      { numRuns: 300 },
    )
  })

  it('matches the global shape: more ranks along the longer axis, a square for a square', () => {
    expect(RankGrid.of(DomainDesc.of([0, 0], [300, 200]), 6).ranks).toEqual([3, 2])
    expect(RankGrid.of(DomainDesc.of([0, 0], [200, 300]), 6).ranks).toEqual([2, 3])
    expect(RankGrid.of(DomainDesc.of([0, 0], [64, 64]), 4).ranks).toEqual([2, 2])
    expect(RankGrid.of(DomainDesc.of([0, 0, 0], [32, 32, 32]), 8).ranks).toEqual([2, 2, 2])
    expect(RankGrid.of(DomainDesc.of([0, 0, 0], [1000, 10, 10]), 8).ranks).toEqual([8, 1, 1])
  })

  it('keeps the rank counts it is given and refuses impossible ones', () => {
    expect(RankGrid.of(DomainDesc.of([0, 0], [64, 64]), 4, [4, 0]).ranks).toEqual([4, 1])
    expect(RankGrid.of(DomainDesc.of([0, 0], [64, 64]), 6, [undefined, 3]).ranks).toEqual([2, 3])
    expect(() => RankGrid.of(DomainDesc.of([0, 0], [64, 64]), 6, [4, 0])).toThrow(ConfigError)
    expect(() => RankGrid.of(DomainDesc.of([0], [64]), 0)).toThrow(ConfigError)
    expect(() => RankGrid.of(DomainDesc.of([0], [64]), 2).boxOf(2)).toThrow(ConfigError)
  })
})
