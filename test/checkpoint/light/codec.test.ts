import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { CheckpointMismatchError, ConfigError } from '../../../src/errors.js'
import { checkSerializable, decodeLight, diffLight, digestOf, encodeLight, type Serializer } from '../../../src/checkpoint/light/codec.js'
import { lightValueArb } from '../arbitraries.js'

const roundTrip = <T>(v: T, s?: Serializer<T>): T => decodeLight(encodeLight(v, s), s)

describe('light values: round trip', () => {
  it('keeps Map, Set, Date, BigInt, NaN, -0, undefined and nesting exact (property)', () => {
    fc.assert(
      fc.property(lightValueArb, (v) => {
        const back = roundTrip(v)
        expect(back).toEqual(v)
        expect(diffLight(v, back)).toBeUndefined()
        expect(digestOf(back)).toBe(digestOf(v))
      }),
      { numRuns: 500 },
    )
  })

  it('keeps the special values a JSON round trip would lose', () => {
    const v = {
      m: new Map<unknown, unknown>([['a', 1], [2n, new Set([NaN, -0])]]),
      d: new Date(Date.UTC(2024, 1, 29, 12)),
      big: 2n ** 70n,
      nan: NaN,
      negZero: -0,
      inf: -Infinity,
      u: undefined,
      list: [undefined, null, 'x'],
    }
    const back = roundTrip(v)
    expect(back.m).toBeInstanceOf(Map)
    expect(back.m.get(2n)).toEqual(new Set([NaN, -0]))
    expect(back.d.getTime()).toBe(v.d.getTime())
    expect(back.big).toBe(2n ** 70n)
    expect(Number.isNaN(back.nan)).toBe(true)
    expect(Object.is(back.negZero, -0)).toBe(true)
    expect(back.inf).toBe(-Infinity)
    expect('u' in back && back.u === undefined).toBe(true)
    expect(back.list).toEqual([undefined, null, 'x'])
    expect(roundTrip(undefined)).toBeUndefined()
    expect(roundTrip(-0)).toBe(-0)
  })

  it('keeps a NaN Map key next to another NaN (superjson 2.2 drops that entry without the workaround)', () => {
    const v = [new Map([[NaN, 1]]), NaN]
    expect(roundTrip(v)).toEqual(v)
    const nested = { a: [NaN], b: new Map([[NaN, 'x']]) }
    expect(roundTrip(nested).b.get(NaN)).toBe('x')
    expect(() => checkSerializable('v', nested)).not.toThrow()
  })

  it('keeps shared sub-objects shared', () => {
    const shared = { q: 1 }
    const back = roundTrip({ a: shared, b: shared })
    expect(back.a).toBe(back.b)
  })
})

describe('light values: user serializers', () => {
  class Rng {
    constructor(public state: bigint) {}
    next(): bigint {
      this.state = (this.state * 6364136223846793005n + 1n) & ((1n << 64n) - 1n)
      return this.state
    }
  }
  const rngSerializer: Serializer<Rng> = {
    name: 'Rng',
    serialize: (r) => ({ state: r.state }),
    deserialize: (d) => new Rng((d as { state: bigint }).state),
  }

  it('restores a class instance through its serializer', () => {
    const r = new Rng(42n)
    r.next()
    const back = roundTrip(r, rngSerializer)
    expect(back).toBeInstanceOf(Rng)
    expect(back.state).toBe(r.state)
    expect(() => checkSerializable('rng', r, rngSerializer)).not.toThrow()
  })

  it('refuses to restore with a missing or different serializer', () => {
    const bytes = encodeLight(new Rng(1n), rngSerializer)
    expect(() => decodeLight(bytes)).toThrow(CheckpointMismatchError)
    expect(() => decodeLight(bytes)).toThrow(/saved with serializer "Rng", but none is given/)
    expect(() => decodeLight(bytes, { ...rngSerializer, name: 'Other' })).toThrow(/serializer "Other" is given/)
    expect(() => decodeLight(encodeLight({ a: 1 }), rngSerializer)).toThrow(/saved without a serializer/)
  })

  it('checks what the serializer produces', () => {
    const bad: Serializer<Rng> = { name: 'Bad', serialize: (r) => ({ r, f: () => r }), deserialize: () => new Rng(0n) }
    expect(() => checkSerializable('rng', new Rng(1n), bad)).toThrow(/rng<Bad>\.r: an instance of class Rng/)
  })

  it('rejects garbage bytes with CheckpointError', () => {
    expect(() => decodeLight(new TextEncoder().encode('{"x":1}'))).toThrow(/not in the molotof light encoding/)
    expect(() => decodeLight(new Uint8Array([0xff, 0x00]))).toThrow(/not valid JSON/)
  })
})

describe('checkSerializable names the value, the path and the reason', () => {
  class Foo {
    x = 1
  }
  const sym = Symbol('s')
  const circular: Record<string, unknown> = { a: { b: {} } }
  ;((circular.a as Record<string, unknown>).b as Record<string, unknown>).back = circular
  const cases: [string, unknown, RegExp][] = [
    ['function', { n: 1, cb: () => 0 }, /cannot checkpoint settings\.cb: a function cannot be saved/],
    ['symbol', { s: sym }, /settings\.s: a symbol cannot be saved/],
    ['class instance', { foo: new Foo() }, /settings\.foo: an instance of class Foo cannot be saved without a serializer/],
    ['WeakMap', { w: new WeakMap() }, /settings\.w: a WeakMap cannot be saved/],
    ['circular', circular, /settings\.a\.b\.back: circular reference \(back to settings\)/],
    ['typed array', { grid: new Float64Array(4) }, /settings\.grid: a Float64Array is heavy data: register it as a heavy entry/],
    ['sparse array', { xs: [1, , 3] }, /settings\.xs\[1\]: a hole in a sparse array/],
    ['invalid Date', { when: new Date(NaN) }, /settings\.when: an invalid Date/],
    ['Map value', { m: new Map([['k', () => 1]]) }, /settings\.m\.get\("k"\): a function/],
    ['Set member', { s: new Set([Promise.resolve(1)]) }, /settings\.s\.values\(\)\[0\]: a Promise cannot be saved/],
    ['odd key', { 'a b': { f: () => 1 } }, /settings\["a b"\]\.f: a function/],
    ['symbol key', { [sym]: 1 }, /settings: it has symbol-keyed properties/],
    ['reserved key', { constructor: 'Ford' }, /settings\.constructor: superjson refuses the key "constructor"/],
    ['Error subclass', { e: new TypeError('x') }, /settings\.e: an instance of class TypeError/],
  ]
  for (const [what, value, message] of cases) {
    it(what, () => {
      expect(() => checkSerializable('settings', value)).toThrow(ConfigError)
      expect(() => checkSerializable('settings', value)).toThrow(message)
    })
  }

  it('accepts plain data, Map, Set, Date, BigInt, RegExp, URL and Error', () => {
    const v = { a: [1, 'x', null, undefined], m: new Map([[{ k: 1 }, new Set([1n])]]), d: new Date(0), r: /a+/gi, u: new URL('https://example.org/x?y=1'), e: new Error('boom'), o: Object.create(null) as object }
    expect(() => checkSerializable('v', v)).not.toThrow()
    const back = roundTrip(v)
    expect(back.r.source).toBe('a+')
    expect(back.u.href).toBe('https://example.org/x?y=1')
    expect(back.e.message).toBe('boom')
  })

  it('encodeLight checks too: a value that became unsaveable fails with the same message', () => {
    expect(() => encodeLight({ later: () => 1 }, undefined, 'state')).toThrow(/cannot checkpoint state\.later: a function/)
  })
})

describe('digestOf and diffLight', () => {
  it('digests ignore plain-object key order and sharing, but not Map order, -0 or types', () => {
    const shared = { q: [1, 2] }
    expect(digestOf({ a: 1, b: { c: 2, d: 3 } })).toBe(digestOf({ b: { d: 3, c: 2 }, a: 1 }))
    expect(digestOf({ x: shared, y: shared })).toBe(digestOf({ x: { q: [1, 2] }, y: { q: [1, 2] } }))
    expect(digestOf(NaN)).toBe(digestOf(Number('x')))
    expect(digestOf(-0)).not.toBe(digestOf(0))
    expect(digestOf(1)).not.toBe(digestOf(1n))
    expect(digestOf('1')).not.toBe(digestOf(1))
    expect(digestOf(new Map([[1, 'a'], [2, 'b']]))).not.toBe(digestOf(new Map([[2, 'b'], [1, 'a']])))
    expect(digestOf({ a: undefined })).not.toBe(digestOf({}))
    expect(digestOf(new Date(0))).not.toBe(digestOf(new Date(1)))
    expect(digestOf(1)).toMatch(/^[0-9a-f]{64}$/)
  })

  it('digest equality agrees with diffLight (property)', () => {
    fc.assert(
      fc.property(lightValueArb, lightValueArb, (a, b) => {
        expect(digestOf(a) === digestOf(b)).toBe(diffLight(a, b) === undefined)
      }),
      { numRuns: 300 },
    )
  })

  it('describes the first differing path', () => {
    expect(diffLight({ grid: { n: 100 } }, { grid: { n: 200 } }, 'config')).toBe('config.grid.n: 100 → 200')
    expect(diffLight({ a: 1 }, { a: 1, b: 2 })).toBe('value.b: (missing) → 2')
    expect(diffLight({ a: 1, b: 2 }, { a: 1 })).toBe('value.b: 2 → (missing)')
    expect(diffLight([1, 2], [1, 2, 3])).toBe('value: array of length 2 → 3')
    expect(diffLight(new Map([['k', { t: 1n }]]), new Map([['k', { t: 2n }]]), 'm')).toBe('m.get("k").t: 1n → 2n')
    expect(diffLight(new Set([1, 2]), new Set([1, 3]))).toBe('value.values()[1]: 2 → 3')
    expect(diffLight(0, -0)).toBe('value: 0 → -0')
    expect(diffLight('1', 1)).toBe('value: "1" → 1')
    expect(diffLight(new Date(0), new Date(0))).toBeUndefined()
    expect(diffLight({ x: NaN }, { x: NaN })).toBeUndefined()
    expect(diffLight({ a: 1, b: 2 }, { b: 2, a: 1 })).toBeUndefined()
  })
})
