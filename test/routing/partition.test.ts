import { describe, expect, it } from 'vitest'
import { DomainDesc, PartitionError } from '../../src/index.js'
import { validatePartition } from '../../src/routing/partition.js'

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
