import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { domainPayload, StagingBuffers } from '../../../src/checkpoint/store/staging.js'
import { Domain, DomainDesc, type StorageOrder } from '../../../src/index.js'
import { dtypeArb } from '../arbitraries.js'

class Free extends Domain {
  possessed(): DomainDesc {
    return this.box
  }
  needed(): DomainDesc {
    return this.box
  }
}

/** The cells of `box` read one by one in storage order: what the payload must hold. */
function expectedBytes(d: Domain, box: DomainDesc): Uint8Array {
  const out = new (d.data.constructor as new (n: number) => typeof d.data)(box.volume)
  let i = 0
  for (const c of box.cells(d.order)) out[i++] = d.get(c)
  return new Uint8Array(out.buffer)
}

function joined(p: Uint8Array | Uint8Array[]): Uint8Array {
  return Buffer.concat(p instanceof Uint8Array ? [p] : p)
}

const dtypes = dtypeArb.filter((t) => !t.startsWith('big'))

describe('domainPayload', () => {
  it('holds exactly the cells of the box, in storage order, for random domains, boxes, orders and dtypes', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 3 }).chain((dims) =>
          fc.record({
            dims: fc.constant(dims),
            ext: fc.array(fc.integer({ min: 1, max: 600 }), { minLength: dims, maxLength: dims }),
            cut: fc.array(fc.tuple(fc.double({ min: 0, max: 1, noNaN: true }), fc.double({ min: 0, max: 1, noNaN: true })), { minLength: dims, maxLength: dims }),
            order: fc.constantFrom<StorageOrder>('C', 'F'),
            dtype: dtypes,
          }),
        ).filter(({ ext }) => ext.reduce((a, b) => a * b, 1) <= 200_000),
        ({ dims, ext, cut, order, dtype }) => {
          const d = new Free(dims, { order, dtype: dtype as never })
          d.resize(DomainDesc.of(ext.map(() => 0), ext))
          for (let i = 0; i < d.data.length; i++) d.data[i] = (i * 7 + 3) % 120
          // A non-empty box inside the domain: lower in [0, e), upper in (lower, e].
          const lower = ext.map((e, k) => Math.min(e - 1, Math.floor(Math.min(cut[k][0], cut[k][1]) * e)))
          const upper = ext.map((e, k) => Math.min(e, Math.max(lower[k] + 1, Math.ceil(Math.max(cut[k][0], cut[k][1]) * e))))
          const box = DomainDesc.of(lower, upper)
          const p = domainPayload(d, box, new StagingBuffers(), 'read')
          expect(Buffer.from(joined(p)).equals(Buffer.from(expectedBytes(d, box)))).toBe(true)
        },
      ),
      { numRuns: 150 },
    )
  })

  it('a contiguous box is one view, long strided runs a gather list of views, short runs one packed buffer reused next time', () => {
    const d = new Free(2)
    d.resize(DomainDesc.of([0, 0], [64, 1026])) // rows of 1026 float64 = 8208 bytes
    const staging = new StagingBuffers()

    const rows = domainPayload(d, DomainDesc.of([3, 0], [9, 1026]), staging, 'read')
    expect(rows).toBeInstanceOf(Uint8Array)
    expect((rows as Uint8Array).buffer).toBe(d.data.buffer)

    // The possessed part of a domain with halo columns: one run per row, each 8 KiB.
    const inner = domainPayload(d, DomainDesc.of([1, 1], [63, 1025]), staging, 'read')
    expect(Array.isArray(inner)).toBe(true)
    expect((inner as Uint8Array[]).length).toBe(62)
    for (const piece of inner as Uint8Array[]) expect(piece.buffer).toBe(d.data.buffer)

    // A column: 64 runs of 8 bytes, packed.
    const column = domainPayload(d, DomainDesc.of([0, 5], [64, 6]), staging, 'read')
    expect(column).toBeInstanceOf(Uint8Array)
    expect((column as Uint8Array).buffer).not.toBe(d.data.buffer)
    const again = domainPayload(d, DomainDesc.of([0, 7], [64, 8]), staging, 'read')
    expect((again as Uint8Array).buffer).toBe((column as Uint8Array).buffer)
  })
})

describe('StagingBuffers', () => {
  it('copies a gather list into one buffer per name, reused while the size holds', () => {
    const s = new StagingBuffers()
    const a = s.copy('read', [new Uint8Array([1, 2]), new Uint8Array([3])])
    expect(Array.from(a)).toEqual([1, 2, 3])
    const b = s.copy('read', new Uint8Array([4, 5, 6]))
    expect(b).toBe(a)
    expect(Array.from(b)).toEqual([4, 5, 6])
    expect(s.copy('write', new Uint8Array([4, 5, 6]))).not.toBe(a)
    expect(s.copy('read', new Uint8Array([9]))).not.toBe(a)
  })
})
