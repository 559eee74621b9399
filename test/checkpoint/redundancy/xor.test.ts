import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { encodeParity, rebuildMember } from '../../../src/checkpoint/redundancy/xor.js'
import { XorSets } from '../../../src/checkpoint/redundancy/sets.js'

// A set of 2 to 7 files of random lengths (empty ones too), and a member to lose.
const setArb = fc.integer({ min: 2, max: 7 }).chain((g) =>
  fc.record({
    files: fc.array(fc.uint8Array({ minLength: 0, maxLength: 300 }), { minLength: g, maxLength: g }),
    lost: fc.integer({ min: 0, max: g - 1 }),
  }),
)

describe('XOR parity of a set (pure)', () => {
  it('any one lost member is rebuilt to the exact bytes it had, from the others and the slices', () => {
    fc.assert(
      fc.property(setArb, ({ files, lost }) => {
        // Kept apart from what the encoder sees: the comparison is with these bytes, not with a recomputation.
        const originals = files.map((f) => Uint8Array.from(f))
        const slices = encodeParity(files)
        const lengths = files.map((f) => f.byteLength)
        const back = rebuildMember(
          lost,
          files.map((f, i) => (i === lost ? undefined : f)),
          slices.map((s, i) => (i === lost ? undefined : s)),
          lengths,
        )
        expect(back).toEqual(originals[lost])
      }),
      { numRuns: 300 },
    )
  })

  it('each slice holds 1/(G−1) of the longest file (up to 8 bytes more): the memory a member gives to redundancy', () => {
    fc.assert(
      fc.property(setArb, ({ files }) => {
        const g = files.length
        const longest = Math.max(...files.map((f) => f.byteLength))
        for (const s of encodeParity(files)) {
          expect(s.byteLength).toBeGreaterThanOrEqual(longest / (g - 1))
          expect(s.byteLength).toBeLessThan(longest / (g - 1) + 8)
        }
      }),
    )
  })

  it('a damaged slice rebuilds other bytes (never silently the right ones)', () => {
    fc.assert(
      fc.property(
        setArb.filter(({ files }) => files.some((f) => f.byteLength > 0)),
        fc.nat(),
        ({ files, lost }, at) => {
          const slices = encodeParity(files)
          // Flip a bit in a slice that holds a chunk of the lost member with real bytes of it.
          const g = files.length
          const chunk = slices[0].byteLength
          const k = Math.floor((at % Math.max(1, files[lost].byteLength)) / Math.max(1, chunk))
          if (files[lost].byteLength === 0) return
          const p = (lost + k + 1) % g
          const offset = (at % Math.max(1, files[lost].byteLength)) - k * chunk
          slices[p][offset] ^= 1
          const back = rebuildMember(lost, files.map((f, i) => (i === lost ? undefined : f)), slices, files.map((f) => f.byteLength))
          expect(back).not.toEqual(files[lost])
        },
      ),
    )
  })

  it('two lost members of one set are refused, naming them', () => {
    fc.assert(
      fc.property(
        setArb.filter(({ files }) => files.length >= 3),
        fc.nat(),
        ({ files, lost }, pick) => {
          const other = (lost + 1 + (pick % (files.length - 1))) % files.length
          const slices = encodeParity(files)
          const lengths = files.map((f) => f.byteLength)
          const without = (xs: Uint8Array[]) => xs.map((x, i) => (i === lost || i === other ? undefined : x))
          expect(() => rebuildMember(lost, without(files), slices, lengths)).toThrow(/two members of an XOR set are lost/)
          expect(() => rebuildMember(lost, files, without(slices), lengths)).toThrow(/two members of an XOR set are lost/)
        },
      ),
    )
  })
})

describe('XOR sets across nodes', () => {
  it('every member of a set is on another node, and every rank is in exactly one set of G to 2G−1 members', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 2, max: 12 }), fc.integer({ min: 2, max: 12 }), (perNode, nodes, g) => {
        fc.pre(g <= nodes)
        const size = perNode * nodes
        const sets = new XorSets(size, perNode, g)
        for (let r = 0; r < size; r++) {
          const m = sets.membersOf(r)
          expect(m).toContain(r)
          expect(new Set(m.map((x) => Math.floor(x / perNode))).size).toBe(m.length)
          expect(m.length).toBeGreaterThanOrEqual(g)
          expect(m.length).toBeLessThanOrEqual(2 * g - 1)
          for (const x of m) expect(sets.membersOf(x)).toEqual(m)
          for (const x of m) expect(sets.setOf(x)).toBe(sets.setOf(r))
        }
      }),
    )
  })

  it('6 nodes of 2 ranks with xor:3: sets {0,2,4} {1,3,5} {6,8,10} {7,9,11}', () => {
    const sets = new XorSets(12, 2, 3)
    expect([0, 1, 6, 7].map((r) => sets.membersOf(r))).toEqual([
      [0, 2, 4],
      [1, 3, 5],
      [6, 8, 10],
      [7, 9, 11],
    ])
    // 5 nodes, xor:2: the last group takes the fifth node.
    expect(new XorSets(5, 1, 2).membersOf(4)).toEqual([2, 3, 4])
  })

  it('xor:1 and a set larger than the node count are refused, naming the flag', () => {
    expect(() => new XorSets(4, 1, 1)).toThrow(/--redundancy xor:1: a set needs at least 2 nodes/)
    expect(() => new XorSets(4, 2, 3)).toThrow(/--redundancy xor:3: this run has 2 nodes, fewer than the 3/)
  })
})
