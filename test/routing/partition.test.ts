import { describe, expect, it } from 'vitest'
import { Domain2D, DomainDesc, PartitionError, splitPoint } from '../../src/index.js'
import { PartitionShare, PartitionTracker, validatePartition } from '../../src/routing/partition.js'

const b = (lo: number, hi: number) => DomainDesc.of([lo, 0], [hi, 4])

describe('validatePartition', () => {
  it('accepts a tiling with halos and empty parts', () => {
    expect(() =>
      validatePartition({ step: 0, possessed: [b(0, 3), b(3, 3), b(3, 8)], needed: [b(0, 4), b(3, 3), b(2, 9)] }),
    ).not.toThrow()
  })
  it('rejects overlapping possessed boxes, naming both ranks', () => {
    expect(() => validatePartition({ step: 2, possessed: [b(0, 4), b(3, 8)], needed: [b(0, 5), b(2, 8)] }, 'grid')).toThrow(
      /grid at step 2: the possessed boxes of ranks 0 .* and 1 .* overlap/,
    )
  })
  it('rejects gaps between possessed boxes', () => {
    expect(() => validatePartition({ step: 0, possessed: [b(0, 3), b(4, 8)], needed: [b(0, 4), b(3, 8)] })).toThrow(
      /leave gaps: they cover 28 of the 32 cells/,
    )
  })
  it('rejects a needed box that does not contain the possessed box', () => {
    expect(() => validatePartition({ step: 0, possessed: [b(0, 4), b(4, 8)], needed: [b(0, 3), b(3, 8)] })).toThrowError(PartitionError)
  })
})

/** Row strips of an n × 4 grid with one halo row; `shift` moves every cut down (another layout, same class). */
class Rows extends Domain2D {
  constructor(
    readonly n: number,
    readonly shift = 0,
  ) {
    super()
  }
  possessed(rank: number, size: number): DomainDesc<2> {
    const cut = (k: number) => (k === 0 ? 0 : k === size ? this.n : Math.min(this.n, splitPoint(this.n, size, k) + this.shift))
    return DomainDesc.of([cut(rank), 0], [cut(rank + 1), 4])
  }
  needed(rank: number, size: number): DomainDesc<2> {
    const p = this.possessed(rank, size)
    return DomainDesc.of([Math.max(0, p.lower[0] - 1), 0], [Math.min(this.n, p.upper[0] + 1), 4])
  }
}
class OtherRows extends Rows {}

describe('PartitionShare (the ranks of one thread)', () => {
  it('64 ranks hold one partition between them: evaluated once, the same object on every rank', () => {
    const slot = new PartitionShare().slot(0, 'grid')
    const trackers = Array.from({ length: 64 }, (_, r) => new PartitionTracker(new Rows(256), r, 64, 'grid', slot))
    const parts = new Set(trackers.map((t) => t.at(0)))
    for (const t of trackers) for (let s = 1; s < 20; s++) parts.add(t.at(s))
    expect(parts.size).toBe(1)
    expect(slot.evaluated).toBe(1)
    expect(trackers.reduce((n, t) => n + t.evaluated, 0)).toBe(1)
    for (const t of trackers) expect(t.built).toBe(1)
    const [p] = parts
    expect(p.possessed.length).toBe(64)
    expect(p.possessed[63]).toEqual(DomainDesc.of([252, 0], [256, 4]))
  })

  it('a rank whose own boxes differ from the shared partition, or whose domain is of another class or size, evaluates its own', () => {
    const slot = new PartitionShare().slot(0, 'grid')
    const first = new PartitionTracker(new Rows(64), 1, 4, 'grid', slot).at(0)
    const moved = new PartitionTracker(new Rows(64, 2), 1, 4, 'grid', slot)
    expect(moved.at(0)).not.toBe(first)
    expect(moved.at(0).possessed[1]).toEqual(DomainDesc.of([18, 0], [34, 4]))
    expect(moved.evaluated).toBe(1)
    expect(new PartitionTracker(new OtherRows(64), 1, 4, 'grid', slot).at(0)).not.toBe(first)
    expect(new PartitionTracker(new Rows(64), 1, 8, 'grid', slot).at(0).possessed.length).toBe(8)
    expect(slot.evaluated).toBe(4)
  })

  it('slots are per skeleton: another skeleton index or name never sees the partition', () => {
    const share = new PartitionShare()
    const a = new PartitionTracker(new Rows(64), 0, 4, 'a', share.slot(0, 'a')).at(0)
    expect(new PartitionTracker(new Rows(64), 0, 4, 'a', share.slot(1, 'a')).at(0)).not.toBe(a)
    expect(new PartitionTracker(new Rows(64), 0, 4, 'b', share.slot(0, 'b')).at(0)).not.toBe(a)
    expect(new PartitionTracker(new Rows(64), 2, 4, 'a', share.slot(0, 'a')).at(0)).toBe(a)
  })
})
