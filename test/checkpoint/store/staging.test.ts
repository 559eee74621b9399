import fc from 'fast-check'
import { crc32 } from 'node:zlib'
import { describe, expect, it } from 'vitest'
import { CheckpointIoThread } from '../../../src/checkpoint/store/io-thread.js'
import { compactRuns, copyRuns, domainPayload, StagingBuffers } from '../../../src/checkpoint/store/staging.js'
import { sharedAllocator } from '../../../src/domains/dtype.js'
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

/** A domain over `[0, ext)` whose cells hold `from + (i · 7 + 3) mod 120` by storage index `i` (all non-zero with `from` ≥ 1). */
function numbered(ext: number[], order: StorageOrder, dtype: string, o: { shared?: boolean; from?: number } = {}): Free {
  const d = new Free(ext.length, { order, dtype: dtype as never })
  if (o.shared) d.allocator = sharedAllocator
  d.resize(DomainDesc.of(ext.map(() => 0), ext))
  for (let i = 0; i < d.data.length; i++) d.data[i] = ((i * 7 + 3) % 120) + (o.from ?? 0)
  return d
}

function joined(p: Uint8Array | Uint8Array[]): Uint8Array {
  return Buffer.concat(p instanceof Uint8Array ? [p] : p)
}

const dtypes = dtypeArb.filter((t) => !t.startsWith('big'))

/** Domains of 1–3 dimensions up to 60 cells wide, with the cuts of a box inside them (see boxInside). */
const smallDomains = fc.integer({ min: 1, max: 3 }).chain((dims) =>
  fc.record({
    ext: fc.array(fc.integer({ min: 1, max: 60 }), { minLength: dims, maxLength: dims }),
    cut: fc.array(fc.tuple(fc.double({ min: 0, max: 1, noNaN: true }), fc.double({ min: 0, max: 1, noNaN: true })), { minLength: dims, maxLength: dims }),
    order: fc.constantFrom<StorageOrder>('C', 'F'),
    dtype: dtypes,
  }),
)

/** A non-empty box inside a domain of extents `ext`: lower in [0, e), upper in (lower, e], from the fractions `cut`. */
function boxInside(ext: readonly number[], cut: readonly (readonly [number, number])[]): DomainDesc {
  const lower = ext.map((e, k) => Math.min(e - 1, Math.floor(Math.min(cut[k][0], cut[k][1]) * e)))
  const upper = ext.map((e, k) => Math.min(e, Math.max(lower[k] + 1, Math.ceil(Math.max(cut[k][0], cut[k][1]) * e))))
  return DomainDesc.of(lower, upper)
}

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
        ({ ext, cut, order, dtype }) => {
          const d = numbered(ext, order, dtype)
          const box = boxInside(ext, cut)
          const p = domainPayload(d, box, new StagingBuffers(), 'read')
          expect(Buffer.from(joined(p)).equals(Buffer.from(expectedBytes(d, box)))).toBe(true)
        },
      ),
      { numRuns: 150 },
    )
  })

  it('with shared staging, holds a copy of exactly the cells of the box once its runs are compacted, for random domains and boxes', () => {
    fc.assert(
      fc.property(
        smallDomains,
        ({ ext, cut, order, dtype }) => {
          const d = numbered(ext, order, dtype)
          const box = boxInside(ext, cut)
          const staging = new StagingBuffers(true)
          const p = domainPayload(d, box, staging, 'read') as Uint8Array
          expect(p.buffer).toBeInstanceOf(SharedArrayBuffer)
          for (const u of staging.takeUncompacted()) compactRuns(u)
          // A copy: changing the domain afterwards leaves the payload as it was.
          const want = Buffer.from(expectedBytes(d, box))
          d.data.fill(0 as never)
          expect(Buffer.from(p).equals(want)).toBe(true)
          expect(staging.takeUncompacted()).toEqual([])
        },
      ),
      { numRuns: 200 },
    )
  })

  it('deferred: a domain in shared memory is not copied at the point; copyRuns later gives exactly the cells of the box, for random domains and boxes', () => {
    fc.assert(
      fc.property(
        smallDomains,
        ({ ext, cut, order, dtype }) => {
          const d = numbered(ext, order, dtype, { shared: true, from: 1 })
          const box = boxInside(ext, cut)
          const staging = new StagingBuffers(true)
          const p = domainPayload(d, box, staging, 'read', true) as Uint8Array
          expect(p.buffer).toBeInstanceOf(SharedArrayBuffer)
          expect(staging.takeUncompacted()).toEqual([])
          // Nothing copied yet: the cells (all non-zero) are still only in the domain.
          expect(p.every((b) => b === 0)).toBe(true)
          const copies = staging.takeDeferred()
          expect(copies.length).toBe(1)
          expect(staging.takeDeferred()).toEqual([])
          copyRuns(copies[0])
          const want = Buffer.from(expectedBytes(d, box))
          d.data.fill(0 as never)
          expect(Buffer.from(p).equals(want)).toBe(true)
        },
      ),
      { numRuns: 200 },
    )
  })

  it('deferred: a domain in a plain ArrayBuffer (no thread can read it) is copied at the point, as without defer', () => {
    const d = new Free(2)
    d.resize(DomainDesc.of([0, 0], [10, 12]))
    for (let i = 0; i < d.data.length; i++) d.data[i] = i + 1
    const box = DomainDesc.of([1, 1], [9, 11])
    const staging = new StagingBuffers(true)
    const p = domainPayload(d, box, staging, 'read', true) as Uint8Array
    for (const u of staging.takeUncompacted()) compactRuns(u)
    expect(staging.takeDeferred()).toEqual([])
    expect(Buffer.from(p).equals(Buffer.from(expectedBytes(d, box)))).toBe(true)
  })

  it('deferred: the I/O thread copies a subdomain with halo columns out of the shared domain', async () => {
    const d = new Free(2)
    d.allocator = sharedAllocator
    d.resize(DomainDesc.of([0, 0], [66, 1026]))
    for (let i = 0; i < d.data.length; i++) d.data[i] = i
    const box = DomainDesc.of([1, 1], [65, 1025])
    const staging = new StagingBuffers(true)
    const p = domainPayload(d, box, staging, 'read', true) as Uint8Array
    const io = new CheckpointIoThread()
    let sums: number[]
    try {
      const { copied, done } = io.stage({ copies: staging.takeDeferred(), uncompacted: [], sums: [] })
      io.release()
      await copied
      sums = (await done).copied
    } finally {
      await io.close()
    }
    const want = Buffer.from(expectedBytes(d, box))
    expect(Buffer.from(p).equals(want)).toBe(true)
    expect(sums).toEqual([crc32(want)])
  })

  it('with shared staging, a subdomain with halo columns is copied as one hull that the I/O thread compacts', async () => {
    const d = new Free(2)
    d.resize(DomainDesc.of([0, 0], [66, 1026]))
    for (let i = 0; i < d.data.length; i++) d.data[i] = i
    const box = DomainDesc.of([1, 1], [65, 1025])
    const staging = new StagingBuffers(true)
    const p = domainPayload(d, box, staging, 'read') as Uint8Array
    const pending = staging.takeUncompacted()
    expect(pending.length).toBe(1)
    expect(pending[0].runs.length).toBe(2 * 64)
    // Before compaction the hull's first run is in place, the second still behind a halo gap.
    const staged = new Float64Array(p.buffer, 0, 1025)
    expect(staged[0]).toBe(d.index([1, 1]))
    expect(staged[1024]).toBe(d.index([1, 1025]))
    const io = new CheckpointIoThread()
    try {
      io.release()
      await io.stage({ copies: [], uncompacted: pending, sums: [] }).done
    } finally {
      await io.close()
    }
    expect(Buffer.from(p).equals(Buffer.from(expectedBytes(d, box)))).toBe(true)
    // A wide column gap (more than a quarter of the payload) is packed run by run instead, at once.
    const column = domainPayload(d, DomainDesc.of([0, 5], [66, 6]), staging, 'col')
    expect(staging.takeUncompacted()).toEqual([])
    expect(Buffer.from(column as Uint8Array).equals(Buffer.from(expectedBytes(d, DomainDesc.of([0, 5], [66, 6]))))).toBe(true)
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
