import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { localGroup } from '../../../src/runtime/launch/local.js'
import { Collectives } from '../../../src/runtime/transport/collectives.js'
import type { ReduceOp } from '../../../src/routing/communicator.js'

/** The bits of a double, so that 0 and -0, and NaN payloads, count as different. */
const bits = (x: number): bigint => new BigUint64Array(new Float64Array([x]).buffer)[0]

/** One allreduce over `values` (rank q contributes values[q]) on a fresh runLocal group: every rank's result. */
async function allreduce(values: number[], op: ReduceOp): Promise<number[]> {
  const comms = localGroup(values.length)
  try {
    return await Promise.all(comms.map((c) => c.allreduce(values[c.rank], op)))
  } finally {
    for (const c of comms) c.close()
  }
}

const finite = fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e12, max: 1e12 })
const sizes = [2, 3, 5, 8, 13, 64]

describe('collectives in O(log P)', () => {
  for (const P of sizes) {
    it(`allreduce on ${P} ranks: the same bits on every rank and in every run, for random inputs`, async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(finite, { minLength: P, maxLength: P }), fc.constantFrom<ReduceOp>('sum', 'min', 'max'), async (values, op) => {
          const first = await allreduce(values, op)
          const again = await allreduce(values, op)
          const b = bits(first[0])
          for (const r of [...first, ...again]) expect(bits(r)).toBe(b)
          if (op === 'max') expect(first[0]).toBe(Math.max(...values))
          if (op === 'min') expect(first[0]).toBe(Math.min(...values))
          if (op === 'sum') {
            // Any order of P additions is within P·ε·Σ|x| of the exact sum.
            const exact = values.reduce((a, x) => a + x, 0)
            const scale = values.reduce((a, x) => a + Math.abs(x), 0)
            expect(Math.abs(first[0] - exact)).toBeLessThanOrEqual(2 * P * Number.EPSILON * scale)
          }
        }),
        { numRuns: P >= 64 ? 8 : 25 },
      )
    })
  }

  it('allgather on 1…64 ranks returns every rank its inputs in rank order (numbers, typed arrays, objects)', async () => {
    for (const P of [1, 2, 3, 7, 64]) {
      const comms = localGroup(P)
      const input = (q: number) => (q % 3 === 0 ? q * 1.5 : q % 3 === 1 ? new Float64Array([q, -q, q / 3]) : { rank: q, name: `r${q}` })
      const out = await Promise.all(comms.map((c) => c.allgather(input(c.rank))))
      for (const got of out) expect(got).toEqual(Array.from({ length: P }, (_, q) => input(q)))
      for (const c of comms) c.close()
    }
  })

  it('barrier on 64 ranks: no rank leaves before every rank has arrived', async () => {
    const P = 64
    const comms = localGroup(P)
    let arrived = 0
    const seen = await Promise.all(
      comms.map(async (c) => {
        // Ranks arrive at different times.
        for (let k = 0; k < c.rank % 5; k++) await Promise.resolve()
        arrived++
        await c.barrier()
        return arrived
      }),
    )
    expect(seen).toEqual(new Array(P).fill(P))
    for (const c of comms) c.close()
  })

  it('allreduce gives the same bits whether ranks arrive in step or at different times', async () => {
    const P = 64
    const values = Array.from({ length: P }, (_, q) => Math.sin(q + 1) * 10 ** (q % 7))
    const inStep = await allreduce(values, 'sum')
    const comms = localGroup(P)
    const staggered = await Promise.all(
      comms.map(async (c) => {
        // Some ranks post their receives long before the partner sends, others after.
        for (let k = 0; k < (c.rank * 7) % 11; k++) await Promise.resolve()
        return c.allreduce(values[c.rank], 'sum')
      }),
    )
    for (const c of comms) c.close()
    for (const r of staggered) expect(bits(r)).toBe(bits(inStep[0]))
  })

  it('an allreduce takes log2(P) rounds (plus 2 when P is not a power of two)', () => {
    expect([1, 2, 4, 64, 1024].map(Collectives.allreduceRounds)).toEqual([0, 1, 2, 6, 10])
    expect([3, 5, 1000].map(Collectives.allreduceRounds)).toEqual([3, 4, 11])
  })
})
