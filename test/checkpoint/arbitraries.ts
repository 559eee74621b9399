// fast-check generators shared by the checkpoint tests.
import fc from 'fast-check'
import { DTYPES, joinBytes, type DType } from '../../src/domains/dtype.js'
import type { EntryInput, RankFileMeta } from '../../src/checkpoint/format/rank-file.js'
import { encodeLight } from '../../src/checkpoint/light/codec.js'

export const dtypeArb: fc.Arbitrary<DType> = fc.constantFrom(...(Object.keys(DTYPES) as DType[]))

/** Boxes of 1 to 3 dimensions with arbitrary (possibly empty) extents. */
export const boxArb = fc.integer({ min: 1, max: 3 }).chain((dims) =>
  fc.tuple(
    fc.array(fc.integer({ min: -1000, max: 1000 }), { minLength: dims, maxLength: dims }),
    fc.array(fc.integer({ min: 0, max: 50 }), { minLength: dims, maxLength: dims }),
  ).map(([lower, ext]) => ({ lower, upper: lower.map((l, d) => l + ext[d]) })),
)

const leafArb = fc.oneof(
  fc.integer(),
  fc.double(), // includes NaN, ±0, ±Infinity
  fc.constantFrom(NaN, -0, Infinity),
  fc.string(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.bigInt(),
  fc.date({ noInvalidDate: true }),
)

// Keys superjson refuses for safety (prototype pollution) are not what these tests are about.
const keyArb = fc.string({ maxLength: 6 }).filter((k) => k !== '__proto__' && k !== 'constructor' && k !== 'prototype')

/** Light values: nested objects, arrays, Maps and Sets over the leaves superjson must keep exact. */
export const lightValueArb: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown; array: unknown[]; object: Record<string, unknown>; map: Map<unknown, unknown>; set: Set<unknown> }>((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leafArb, tie('array'), tie('object'), tie('map'), tie('set')),
  array: fc.array(tie('value'), { maxLength: 4 }),
  object: fc.dictionary(keyArb, tie('value'), { maxKeys: 4, noNullPrototype: true }),
  map: fc.array(fc.tuple(leafArb, tie('value')), { maxLength: 4 }).map((e) => new Map(e)),
  set: fc.array(leafArb, { maxLength: 4 }).map((a) => new Set(a)),
})).value

/** Bytes in one piece, or cut at random places into a gather list (pieces may be empty). */
const piecesArb = (bytes: Uint8Array): fc.Arbitrary<Uint8Array | Uint8Array[]> =>
  fc.oneof(
    fc.constant(bytes),
    fc.array(fc.integer({ min: 0, max: bytes.length }), { maxLength: 4 }).map((cuts) => {
      const at = [0, ...cuts.sort((a, b) => a - b), bytes.length]
      return at.slice(1).map((end, i) => bytes.subarray(at[i], end))
    }),
  )

const heavyArb = fc.tuple(dtypeArb, fc.integer({ min: 0, max: 40 }), fc.option(boxArb, { nil: undefined })).chain(([dtype, n, box]) =>
  fc
    .uint8Array({ minLength: n * DTYPES[dtype].BYTES_PER_ELEMENT, maxLength: n * DTYPES[dtype].BYTES_PER_ELEMENT })
    .chain(piecesArb)
    .map((bytes): Omit<EntryInput, 'name'> => ({ kind: 'heavy', dtype, bytes, ...(box ? { box } : {}) })),
)

/** The payload of an entry in one buffer (a gather list joined). */
export function wholeBytes(bytes: EntryInput['bytes']): Uint8Array {
  return bytes instanceof Uint8Array ? bytes : join(bytes)
}

const lightEntryArb = lightValueArb.map((v): Omit<EntryInput, 'name'> & { value: unknown; bytes: Uint8Array } => ({ kind: 'light', bytes: encodeLight(v), value: v }))

/** A list of entries with unique names, heavy and light mixed. */
export const entriesArb = fc
  .uniqueArray(fc.string({ minLength: 1, maxLength: 8 }), { maxLength: 6 })
  .chain((names) => fc.tuple(...names.map((name) => fc.oneof(heavyArb, lightEntryArb).map((e) => ({ ...e, name })))))
  .map((es) => es as (EntryInput & { value?: unknown })[])

export const metaArb: fc.Arbitrary<RankFileMeta> = fc.integer({ min: 1, max: 64 }).chain((size) =>
  fc.record({
    fingerprint: fc.string(),
    skeleton: fc.nat(10),
    step: fc.nat(1_000_000),
    rank: fc.nat(size - 1),
    size: fc.constant(size),
    settings: fc.dictionary(keyArb, fc.oneof(fc.integer(), fc.string(), fc.boolean(), fc.constant(null), fc.array(fc.integer(), { maxLength: 3 })), { maxKeys: 4, noNullPrototype: true }),
    digests: fc.dictionary(keyArb, fc.string(), { maxKeys: 3, noNullPrototype: true }),
    createdAt: fc.date({ noInvalidDate: true, min: new Date(0), max: new Date('2999-01-01') }).map((d) => d.toISOString()),
  }),
)

/** The parts of an encoded file joined into one buffer, as it would be on disk. */
export const join = joinBytes
