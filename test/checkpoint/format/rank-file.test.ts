import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join as joinPath } from 'node:path'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CheckpointCorruptError, CheckpointMismatchError, ConfigError, InternalError } from '../../../src/errors.js'
import { bytesOf, dtypeOf } from '../../../src/domains/dtype.js'
import { decodeRankFile, encodeRankFile, FORMAT_VERSION, PLACEHOLDER_CHECKSUM, readHeaderOnly, type RankFileMeta } from '../../../src/checkpoint/format/rank-file.js'
import { decodeLight, diffLight, encodeLight } from '../../../src/checkpoint/light/codec.js'
import { entryArray } from '../../../src/checkpoint/format/payload.js'
import { entriesArb, join, metaArb, wholeBytes } from '../arbitraries.js'

const meta: RankFileMeta = { fingerprint: 'prog-1', skeleton: 0, step: 41, rank: 1, size: 3, settings: { n: 8 } }

function sample(): Uint8Array {
  const a = new Float64Array([1.5, -2, NaN, 4])
  const b = new Int16Array([1, 2, 3]) // 6 bytes: followed by padding
  return join(
    encodeRankFile(meta, [
      { name: 'write', kind: 'heavy', dtype: 'float64', box: { lower: [0, 0], upper: [2, 2] }, bytes: bytesOf(a) },
      { name: 'small', kind: 'heavy', dtype: 'int16', bytes: bytesOf(b) },
      { name: 'it', kind: 'light', bytes: encodeLight({ t: 0.5, k: 7n }) },
    ]),
  )
}

describe('rank file format: round trip', () => {
  it('restores header, payload bytes, typed arrays and light values for random entries', () => {
    fc.assert(
      fc.property(metaArb, entriesArb, (m, entries) => {
        const parts = encodeRankFile(m, entries)
        // Payloads (and every piece of a gather list) are handed to writev as the caller's own views: no copy.
        for (const e of entries) for (const p of [e.bytes].flat()) if (p.byteLength > 0) expect(parts.includes(p)).toBe(true)
        const decoded = decodeRankFile(join(parts), 'f')
        const h = decoded.header
        expect(h).toMatchObject({ formatVersion: FORMAT_VERSION, fingerprint: m.fingerprint, skeleton: m.skeleton, step: m.step, rank: m.rank, size: m.size, createdAt: m.createdAt })
        expect(h.settings).toEqual(m.settings)
        expect(h.digests).toEqual(m.digests)
        expect([...decoded.entries.keys()]).toEqual(entries.map((e) => e.name))
        for (const e of entries) {
          const d = decoded.entries.get(e.name)!
          expect(d.kind).toBe(e.kind)
          expect(d.box).toEqual(e.box)
          expect(d.offset % 8).toBe(0)
          expect(Buffer.from(d.bytes).equals(Buffer.from(wholeBytes(e.bytes)))).toBe(true)
          if (e.kind === 'heavy') {
            const arr = entryArray(d, e.dtype!)
            expect(dtypeOf(arr)).toBe(e.dtype)
            expect(arr.buffer).toBe(d.bytes.buffer) // aligned: a view, not a copy
            expect(Buffer.from(bytesOf(arr)).equals(Buffer.from(wholeBytes(e.bytes)))).toBe(true)
          } else {
            const back = decodeLight(d.bytes)
            expect(diffLight(e.value, back)).toBeUndefined()
            expect(back).toEqual(e.value)
          }
        }
      }),
      { numRuns: 300 },
    )
  })

  it('a header made later, with the checksums, fits the room a header with placeholders left: the body stays where it was written', () => {
    fc.assert(
      fc.property(metaArb, entriesArb, fc.string({ unit: 'grapheme', maxLength: 8 }), (m, entries, label) => {
        // Multi-byte characters in the header: the room is counted in bytes.
        const meta = { ...m, settings: { ...m.settings, label: `${label}é☃` } }
        const early = encodeRankFile(
          meta,
          entries.map((e) => (e.kind === 'heavy' ? { ...e, checksum: PLACEHOLDER_CHECKSUM } : e)),
        )
        const late = encodeRankFile(meta, entries, { headerBytes: early[0].byteLength })
        expect(late[0].byteLength).toBe(early[0].byteLength)
        // The early body behind the late header: every payload checksum is verified on decoding.
        const decoded = decodeRankFile(join([late[0], ...early.slice(1)]), 'f')
        const direct = decodeRankFile(join(encodeRankFile(meta, entries)), 'f')
        expect(decoded.header).toEqual(direct.header)
        for (const [name, e] of direct.entries) expect(Buffer.from(decoded.entries.get(name)!.bytes).equals(Buffer.from(e.bytes))).toBe(true)
      }),
      { numRuns: 200 },
    )
  })

  it('a header larger than the room left for it is a bug, not a file', () => {
    const entries = [{ name: 'write', kind: 'heavy' as const, dtype: 'float64' as const, bytes: bytesOf(new Float64Array([1, 2])) }]
    const early = encodeRankFile(meta, entries.map((e) => ({ ...e, checksum: 7 })))
    expect(() => encodeRankFile({ ...meta, settings: { n: 8, more: 'x'.repeat(16) } }, entries, { headerBytes: early[0].byteLength })).toThrow(InternalError)
  })

  it('a payload in pieces, one of them a view of an empty SharedArrayBuffer, reads back with its checksum intact', () => {
    // Node's crc32 of such a view is 0 whatever the running value: a checksum over the pieces must skip it.
    const piece = (values: number[]) => {
      const b = new Uint8Array(new SharedArrayBuffer(values.length))
      b.set(values)
      return b
    }
    const pieces = [piece([1, 2, 3, 4]), piece([]), piece([5, 6, 7, 8])]
    const d = decodeRankFile(join(encodeRankFile(meta, [{ name: 'write', kind: 'heavy', dtype: 'uint8', bytes: pieces }])), 'f')
    expect(Array.from(d.entries.get('write')!.bytes)).toEqual([1, 2, 3, 4, 5, 6, 7, 8])
  })

  it('copies a payload into an aligned buffer only when the file buffer is misaligned', () => {
    const file = sample()
    const shifted = new Uint8Array(file.byteLength + 1)
    shifted.set(file, 1)
    const d = decodeRankFile(shifted.subarray(1), 'f')
    const arr = entryArray(d.entries.get('write')!, 'float64')
    expect(arr.buffer).not.toBe(shifted.buffer)
    expect(Array.from(arr)).toEqual([1.5, -2, NaN, 4])
    expect(Array.from(entryArray(d.entries.get('small')!, 'int16'))).toEqual([1, 2, 3])
  })

  it('refuses to read an entry as another dtype or a light entry as an array', () => {
    const d = decodeRankFile(sample(), 'f')
    expect(() => entryArray(d.entries.get('write')!, 'float32')).toThrow(/holds float64 elements, expected float32/)
    expect(() => entryArray(d.entries.get('it')!)).toThrow(CheckpointMismatchError)
  })

  it('rejects bad input with ConfigError', () => {
    const bytes = new Uint8Array(8)
    expect(() => encodeRankFile(meta, [{ name: 'a', kind: 'heavy', bytes }, { name: 'a', kind: 'heavy', bytes }])).toThrow(/given twice/)
    expect(() => encodeRankFile(meta, [{ name: 'a', kind: 'heavy', dtype: 'float64', bytes: new Uint8Array(12) }])).toThrow(/whole number of float64/)
    expect(() => encodeRankFile({ ...meta, rank: 3 }, [])).toThrow(ConfigError)
    expect(() => encodeRankFile({ ...meta, settings: { tol: NaN } }, [])).toThrow(/settings.tol: NaN is not JSON/)
  })
})

describe('rank file format: corruption is always detected', () => {
  it('flipping any byte (preamble, header, padding or payload) gives CheckpointCorruptError', () => {
    fc.assert(
      fc.property(metaArb, entriesArb, fc.nat(), fc.integer({ min: 1, max: 255 }), (m, entries, pos, xor) => {
        const file = join(encodeRankFile(m, entries))
        const i = pos % file.byteLength
        file[i] ^= xor
        expect(() => decodeRankFile(file, 'rank-0.mlf')).toThrow(CheckpointCorruptError)
      }),
      { numRuns: 1000 },
    )
  })

  it('flipping each byte of a fixed file in turn is detected, with the reason naming the region', () => {
    const file = sample()
    const reasons = new Set<string>()
    for (let i = 0; i < file.byteLength; i++) {
      const copy = file.slice()
      copy[i] ^= 0x40
      try {
        decodeRankFile(copy, 'x.mlf')
        expect.unreachable(`flip at ${i} was accepted`)
      } catch (e) {
        expect(e).toBeInstanceOf(CheckpointCorruptError)
        expect((e as CheckpointCorruptError).file).toBe('x.mlf')
        reasons.add((e as CheckpointCorruptError).reason.replace(/[\d].*$/, ''))
      }
    }
    const all = [...reasons].join('\n')
    expect(all).toMatch(/bad magic/)
    expect(all).toMatch(/format version/)
    expect(all).toMatch(/header checksum mismatch/)
    expect(all).toMatch(/checksum mismatch in entry "write"/)
    expect(all).toMatch(/non-zero byte/)
  })

  it('truncating at any length gives CheckpointCorruptError', () => {
    fc.assert(
      fc.property(metaArb, entriesArb, fc.nat(), (m, entries, cut) => {
        const file = join(encodeRankFile(m, entries))
        const short = file.subarray(0, cut % file.byteLength)
        expect(() => decodeRankFile(short, 'f')).toThrow(CheckpointCorruptError)
      }),
      { numRuns: 500 },
    )
  })

  it('explains truncation, trailing data, wrong magic and wrong version precisely', () => {
    const file = sample()
    expect(() => decodeRankFile(file.subarray(0, 10), 'f')).toThrow(/shorter than the 20-byte preamble \(truncated\)/)
    expect(() => decodeRankFile(file.subarray(0, file.byteLength - 8), 'f')).toThrow(/its header describes \d+ \(truncated\)/)
    const longer = new Uint8Array(file.byteLength + 8)
    longer.set(file)
    expect(() => decodeRankFile(longer, 'f')).toThrow(/unexpected trailing data/)
    const magic = file.slice()
    magic.set(new TextEncoder().encode('NOTMINE!'))
    expect(() => decodeRankFile(magic, 'f')).toThrow(/bad magic bytes: not a molotof checkpoint file/)
    const version = file.slice()
    new DataView(version.buffer).setUint32(8, 4, true)
    expect(() => decodeRankFile(version, 'f')).toThrow(/format version 4 is not supported \(this molotof reads versions 1, 2 and 3\)/)
  })
})

describe('readHeaderOnly', () => {
  let dir: string
  beforeAll(async () => {
    dir = await mkdtemp(joinPath(tmpdir(), 'molotof-format-'))
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it('reads the header without the payloads and checks the file size', async () => {
    const file = sample()
    const path = joinPath(dir, 'rank-1.mlf')
    await writeFile(path, file)
    const info = await readHeaderOnly(path)
    expect(info.fileBytes).toBe(file.byteLength)
    expect(info.header.entries.map((e) => e.name)).toEqual(['write', 'small', 'it'])
    expect(info.headerChecksum).toBe(decodeRankFile(file, path).headerChecksum)

    await writeFile(path, file.subarray(0, file.byteLength - 1))
    await expect(readHeaderOnly(path)).rejects.toThrow(/truncated/)
    await writeFile(path, file.subarray(0, 30))
    await expect(readHeaderOnly(path)).rejects.toThrow(CheckpointCorruptError)
  })
})
