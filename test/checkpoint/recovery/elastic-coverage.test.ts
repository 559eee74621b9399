import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { elasticCoverage, shareOf } from '../../../src/checkpoint/recovery/elastic/coverage.js'
import type { RankView } from '../../../src/checkpoint/recovery/line.js'

describe('elastic coverage', () => {
  it('shareOf splits the files present among the ranks that see one directory: each file checked by exactly one of them', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.nat(20), { minLength: 1, maxLength: 6 }), fc.uniqueArray(fc.nat(40), { maxLength: 30 }), (peerSet, present) => {
        const peers = [...peerSet].sort((a, b) => a - b)
        const counts = new Map<number, number>()
        for (const q of peers) for (const r of shareOf(peers, q)(present)) counts.set(r, (counts.get(r) ?? 0) + 1)
        expect([...counts.keys()].sort((a, b) => a - b)).toEqual([...present].sort((a, b) => a - b))
        for (const c of counts.values()) expect(c).toBe(1)
      }),
    )
  })

  it('serves each old file from the fastest level holding it valid, the lowest rank there; the rest are missing, absent when no rank even found it damaged', () => {
    const oldSize = 5
    const holding = fc.record({ ranks: fc.uniqueArray(fc.nat(oldSize - 1), { maxLength: oldSize }), damaged: fc.uniqueArray(fc.nat(oldSize - 1), { maxLength: 2 }) })
    // everyView[q][i]: new rank q's view of level i (3 ranks × 2 levels), one checkpoint (7) of another rank count.
    const views = fc.array(fc.array(holding, { minLength: 2, maxLength: 2 }), { minLength: 3, maxLength: 3 })
    fc.assert(
      fc.property(views, (vs) => {
        const everyView: RankView[][] = vs.map((levels, q) =>
          levels.map((h) => ({ rank: q, valid: [], problems: [], elastic: [{ seq: 7, oldSize, ranks: h.ranks, damaged: h.damaged.filter((r) => !h.ranks.includes(r)) }] })),
        )
        const [c] = elasticCoverage(everyView)
        for (let r = 0; r < oldSize; r++) {
          // Every (level, rank) holding r valid, in the order preferred: level first, then rank.
          const holders: [number, number][] = []
          for (let i = 0; i < 2; i++) for (let q = 0; q < 3; q++) if (vs[q][i].ranks.includes(r)) holders.push([i, q])
          if (holders.length === 0) {
            expect(c.servers[r]).toBeUndefined()
            expect(c.missing).toContain(r)
            const seenDamaged = vs.some((levels) => levels.some((h) => h.damaged.includes(r) && !h.ranks.includes(r)))
            expect(c.absent.includes(r)).toBe(!seenDamaged)
          } else {
            expect(c.servers[r]).toEqual({ level: holders[0][0], rank: holders[0][1] })
            expect(c.missing).not.toContain(r)
          }
        }
      }),
    )
  })
})
