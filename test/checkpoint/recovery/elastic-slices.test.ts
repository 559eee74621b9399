import fc from 'fast-check'
import { crc32 } from 'node:zlib'
import { describe, expect, it } from 'vitest'
import { DomainDesc, type StorageOrder } from '../../../src/index.js'
import { crc32Combine } from '../../../src/checkpoint/recovery/elastic/crc-combine.js'
import { boxLayout, planRanges, slicePieces, subtractBox } from '../../../src/checkpoint/recovery/elastic/slices.js'

describe('crc32Combine', () => {
  it('gives the CRC of a concatenation from the CRCs of its parts (zlib computes the reference)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.uint8Array({ maxLength: 300 }), (a, b) => {
        const whole = new Uint8Array([...a, ...b])
        expect(crc32Combine(crc32(a), crc32(b), b.byteLength)).toBe(crc32(whole) >>> 0)
      }),
    )
  })
})

/** A 2-D box inside [0, 12)². */
const box2 = fc
  .tuple(fc.integer({ min: 0, max: 11 }), fc.integer({ min: 0, max: 11 }), fc.integer({ min: 0, max: 11 }), fc.integer({ min: 0, max: 11 }))
  .map(([a, b, c, d]) => DomainDesc.of([Math.min(a, b), Math.min(c, d)], [Math.max(a, b) + 1, Math.max(c, d) + 1]))

/** The old ranks' entries of a checkpoint of a 12×12 grid cut in `rows`×`cols` blocks, value of cell (i, j) = 100 i + j, packed one after the other. */
function oldFiles(rows: number, cols: number, order: StorageOrder) {
  const cut = (n: number, k: number, i: number) => Math.floor((n * i) / k)
  const olds = []
  const files: Float64Array[] = []
  let rank = 0
  for (let a = 0; a < rows; a++) {
    for (let b = 0; b < cols; b++) {
      const box = DomainDesc.of([cut(12, rows, a), cut(12, cols, b)], [cut(12, rows, a + 1), cut(12, cols, b + 1)])
      // 16 bytes of something else first: entry offsets are not 0.
      const data = new Float64Array(2 + box.volume)
      const lay = boxLayout(box, order)
      for (const [i, j] of box.cells()) data[2 + lay.offset + i * lay.strides[0] + j * lay.strides[1]] = 100 * i + j
      files.push(data)
      olds.push({ rank: rank++, record: { name: 'grid', kind: 'heavy' as const, dtype: 'float64' as const, box: box.toJSON(), offset: 16, length: box.volume * 8, checksum: 0 } })
    }
  }
  return { olds, files }
}

describe('slicePieces and planRanges', () => {
  it('copy exactly the cells of any target box from any block decomposition, reading each byte of it once and little else', () => {
    fc.assert(
      fc.property(box2, fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 4 }), fc.constantFrom<StorageOrder>('C', 'F'), (target, rows, cols, order) => {
        const { olds, files } = oldFiles(rows, cols, order)
        // The target array spans a larger box (a domain with halos), so runs are strided in it.
        const outer = target.expand(1)
        const layout = boxLayout(outer, order)
        const out = new Float64Array(outer.volume).fill(-1)
        const { pieces, uncovered } = slicePieces(target, layout, order, olds, 8)
        expect(uncovered).toEqual([])
        let read = 0
        for (const [r, file] of files.entries()) {
          const mine = pieces.filter((p) => p.rank === r)
          const plan = planRanges(mine, () => 8)
          const bytes = new Uint8Array(file.buffer)
          const bufs = plan.ranges.map((g) => bytes.slice(g.offset, g.offset + g.length))
          read += plan.ranges.reduce((n, g) => n + g.length, 0)
          mine.forEach((p, i) => {
            const { range, within } = plan.at[i]
            out.set(new Float64Array(bufs[range].buffer, within, p.elements), p.target)
          })
        }
        for (const [i, j] of outer.cells()) {
          const v = out[layout.offset + i * layout.strides[0] + j * layout.strides[1]]
          expect(v).toBe(target.containsPoint([i, j]) ? 100 * i + j : -1)
        }
        expect(read).toBeGreaterThanOrEqual(target.volume * 8)
        expect(read).toBeLessThanOrEqual(target.volume * 8 * (1 + 1 / 32))
      }),
      { numRuns: 200 },
    )
  })

  it('report the cells no old box holds', () => {
    const olds = [{ rank: 0, record: { name: 'g', kind: 'heavy' as const, dtype: 'float64' as const, box: { lower: [0], upper: [4] }, offset: 0, length: 32, checksum: 0 } }]
    const { uncovered } = slicePieces(DomainDesc.of([2], [7]), boxLayout(DomainDesc.of([2], [7]), 'C'), 'C', olds, 8)
    expect(uncovered.map(String)).toEqual([String(DomainDesc.of([4], [7]))])
  })

  it('subtractBox leaves disjoint boxes covering exactly a minus b', () => {
    fc.assert(
      fc.property(box2, box2, (a, b) => {
        const parts = subtractBox(a, b)
        for (const [i, j] of a.cells()) {
          const holders = parts.filter((p) => p.containsPoint([i, j])).length
          expect(holders).toBe(b.containsPoint([i, j]) ? 0 : 1)
        }
        for (const p of parts) expect(a.contains(p)).toBe(true)
      }),
    )
  })
})
