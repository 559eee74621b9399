// Payloads stored compressed (store/io-worker/payload-codec.mjs) in a rank
// file: encode → decode gives the bytes back for any typed array, damage to
// the stored bytes or a stream that decompresses to other bytes is found and
// named, and an older reader's version refuses such a file.
import fc from 'fast-check'
import { crc32 } from 'node:zlib'
import { describe, expect, it } from 'vitest'
import { CheckpointCorruptError } from '../../../src/errors.js'
import { DTYPES, type DType } from '../../../src/domains/dtype.js'
import {
  decodeRankFile,
  decodeRankFileHeader,
  encodeRankFile,
  ENCODED_FORMAT_VERSION,
  FORMAT_VERSION,
  type EntryInput,
  type RankFileMeta,
} from '../../../src/checkpoint/format/rank-file.js'
import { compressPayload, PAYLOAD_CODEC, shuffleBytes, unshuffleBytes } from '../../../src/checkpoint/store/io-worker/payload-codec.mjs'
import { dtypeArb, join } from '../arbitraries.js'

const meta: RankFileMeta = { fingerprint: 'prog-1', skeleton: 0, step: 9, rank: 0, size: 1, settings: {} }

/** An entry of `raw` stored compressed when that is smaller, raw otherwise (as a compressing flush does). */
function entryOf(name: string, dtype: DType, raw: Uint8Array): EntryInput {
  const width = DTYPES[dtype].BYTES_PER_ELEMENT
  const stored = compressPayload(raw, width)
  if (!stored) return { name, kind: 'heavy', dtype, bytes: raw }
  return { name, kind: 'heavy', dtype, bytes: stored, encoded: { codec: PAYLOAD_CODEC, shuffle: width, length: raw.byteLength, checksum: crc32(raw) >>> 0 } }
}

/** Bytes of a typed array: random, or drawn from a few values (which compress). */
const arrayBytesArb = fc.tuple(dtypeArb, fc.integer({ min: 0, max: 3000 }), fc.boolean()).chain(([dtype, n, few]) => {
  const bpe = DTYPES[dtype].BYTES_PER_ELEMENT
  const bytes = few
    ? fc.array(fc.uint8Array({ minLength: bpe, maxLength: bpe }), { minLength: 1, maxLength: 3 }).chain((values) =>
        fc.array(fc.nat(values.length - 1), { minLength: n, maxLength: n }).map((pick) => join(pick.map((i) => values[i]))),
      )
    : fc.uint8Array({ minLength: n * bpe, maxLength: n * bpe })
  return bytes.map((b) => ({ dtype, bytes: b }))
})

/** A 64 KiB float64 payload that compresses well (a smooth ramp). */
function ramp(): Uint8Array {
  const a = new Float64Array(8192).map((_, i) => Math.floor(i / 64) * 0.25)
  return new Uint8Array(a.buffer)
}

describe('compressed payloads in a rank file', () => {
  it('encode → decode gives every typed array its bytes back, stored compressed or raw', () => {
    let compressed = 0
    fc.assert(
      fc.property(fc.array(arrayBytesArb, { minLength: 1, maxLength: 4 }), (arrays) => {
        const entries = arrays.map((a, i) => entryOf(`e${i}`, a.dtype, a.bytes))
        compressed += entries.filter((e) => e.encoded).length
        const file = decodeRankFile(join(encodeRankFile(meta, entries)), 'f')
        arrays.forEach((a, i) => {
          const got = file.entries.get(`e${i}`)!
          expect(got.length).toBe(a.bytes.byteLength)
          expect(Buffer.from(got.bytes).equals(Buffer.from(a.bytes))).toBe(true)
        })
      }),
      { numRuns: 150 },
    )
    // The property is about compressed entries: most runs must have had some.
    expect(compressed).toBeGreaterThan(50)
  })

  it('shuffles by element and back', () => {
    expect([...shuffleBytes(new Uint8Array([1, 2, 3, 4, 5, 6, 7]), 2)]).toEqual([1, 3, 5, 2, 4, 6, 7])
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.integer({ min: 1, max: 8 }), (b, w) => {
        expect([...unshuffleBytes(shuffleBytes(b, w), w, new Uint8Array(b.length))]).toEqual([...b])
      }),
    )
  })

  it('records the raw length and checksum, and the stored ones; the file says version 2 only when it holds a compressed payload', () => {
    const raw = ramp()
    const e = entryOf('grid', 'float64', raw)
    const bytes = join(encodeRankFile(meta, [e, { name: 'plain', kind: 'heavy', dtype: 'int32', bytes: new Uint8Array(12) }]))
    const { header } = decodeRankFileHeader(bytes, 'f')
    expect(header.formatVersion).toBe(ENCODED_FORMAT_VERSION)
    const [grid, plain] = header.entries
    expect(grid).toMatchObject({ length: raw.byteLength, checksum: crc32(raw) >>> 0, stored: { codec: 'brotli', shuffle: 8 } })
    expect(grid.stored!.length).toBeLessThan(raw.byteLength / 10)
    expect(grid.stored!.checksum).toBe(crc32(e.bytes as Uint8Array) >>> 0)
    expect(plain.stored).toBeUndefined()
    expect(plain.offset).toBe(Math.ceil(grid.stored!.length / 8) * 8)
    const rawOnly = decodeRankFileHeader(join(encodeRankFile(meta, [{ name: 'plain', kind: 'heavy', bytes: new Uint8Array(4) }])), 'f')
    expect(rawOnly.header.formatVersion).toBe(FORMAT_VERSION)
  })

  it('a byte flipped in the stored bytes: CheckpointCorruptError naming the compressed entry', () => {
    const bytes = join(encodeRankFile(meta, [entryOf('grid', 'float64', ramp())]))
    const { header, dataStart } = decodeRankFileHeader(bytes, 'f')
    const at = dataStart + Math.floor(header.entries[0].stored!.length / 2)
    bytes[at] ^= 0x10
    expect(() => decodeRankFile(bytes, 'ckpt/rank-0.mlf')).toThrow(CheckpointCorruptError)
    expect(() => decodeRankFile(bytes, 'ckpt/rank-0.mlf')).toThrow(/ckpt\/rank-0\.mlf.*checksum mismatch in compressed entry "grid"/)
  })

  it('stored bytes intact but decompressing to other bytes than were checkpointed: named after decompression', () => {
    const raw = ramp()
    const e = entryOf('grid', 'float64', raw)
    // The raw checksum of other bytes: what a payload damaged in memory before its compression leaves.
    const other = raw.slice()
    other[100] ^= 1
    const bytes = join(encodeRankFile(meta, [{ ...e, encoded: { ...e.encoded!, checksum: crc32(other) >>> 0 } }]))
    expect(() => decodeRankFile(bytes, 'f')).toThrow(/checksum mismatch in entry "grid" after decompression/)
  })

  it('a stream of fewer bytes than the header says: named with both lengths', () => {
    const raw = ramp()
    const stored = compressPayload(raw, 8)!
    const bytes = join(
      encodeRankFile(meta, [
        { name: 'grid', kind: 'heavy', dtype: 'float64', bytes: stored, encoded: { codec: PAYLOAD_CODEC, shuffle: 8, length: raw.byteLength + 8, checksum: crc32(raw) >>> 0 } },
      ]),
    )
    expect(() => decodeRankFile(bytes, 'f')).toThrow(`compressed entry "grid" decompressed to ${raw.byteLength} bytes, its header says ${raw.byteLength + 8}`)
  })

  it('a stored stream that is not brotli, with a matching stored checksum: cannot be decompressed, named', () => {
    const garbage = new Uint8Array(64).fill(0xab)
    const bytes = join(
      encodeRankFile(meta, [{ name: 'grid', kind: 'heavy', dtype: 'float64', bytes: garbage, encoded: { codec: PAYLOAD_CODEC, shuffle: 8, length: 800, checksum: 0 } }]),
    )
    expect(() => decodeRankFile(bytes, 'f')).toThrow(/compressed entry "grid" cannot be decompressed/)
  })
})
