import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { localGroup } from '../../../src/runtime/launch/local.js'
import { CountedKernel, defineProgram, Domain, DomainDesc, option, runLocal } from '../../../src/index.js'
import { StepScheduler } from '../../../src/skeletons/step-scheduler.js'
import { SparseClock } from '../../../src/skeletons/sparse-clock.js'
import type { Communicator, ReduceOp } from '../../../src/routing/communicator.js'
import { CommunicationError } from '../../../src/errors.js'

/** The bits of a double, so that 0 and -0, and NaN payloads, count as different. */
const bits = (x: number): bigint => new BigUint64Array(new Float64Array([x]).buffer)[0]

/** A group of P ranks in this thread whose collectives run from a StepScheduler (as in runLocal), or await (no scheduler). */
function group(P: number, scheduled: boolean): { comms: Communicator[]; scheduler?: StepScheduler } {
  if (!scheduled) return { comms: localGroup(P) }
  const scheduler = new StepScheduler(P, new SparseClock(50))
  return { comms: localGroup(P, { scheduler }), scheduler }
}

/** Each rank first lets `delays[rank]` microtasks pass, then calls `body`. */
async function staggered<T>(comms: Communicator[], delays: readonly number[], body: (c: Communicator) => Promise<T>): Promise<T[]> {
  try {
    return await Promise.all(
      comms.map(async (c) => {
        for (let k = 0; k < delays[c.rank]; k++) await Promise.resolve()
        return body(c)
      }),
    )
  } finally {
    for (const c of comms) c.close()
  }
}

const finite = fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e12, max: 1e12 })

describe('collectives run by the step scheduler (ranks of one thread)', () => {
  it('allreduce: the same bits on every rank as the awaited collectives give, whatever order the ranks arrive in', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2, max: 40 }).chain((P) => fc.tuple(fc.array(finite, { minLength: P, maxLength: P }), fc.array(fc.nat(12), { minLength: P, maxLength: P }))),
        fc.constantFrom<ReduceOp>('sum', 'min', 'max'),
        async ([values, delays], op) => {
          const P = values.length
          const awaited = await staggered(group(P, false).comms, new Array(P).fill(0), (c) => c.allreduce(values[c.rank], op))
          const scheduled = await staggered(group(P, true).comms, delays, (c) => c.allreduce(values[c.rank], op))
          for (const r of scheduled) expect(bits(r)).toBe(bits(awaited[0]))
          if (op === 'max') expect(scheduled[0]).toBe(Math.max(...values))
          if (op === 'min') expect(scheduled[0]).toBe(Math.min(...values))
        },
      ),
      { numRuns: 40 },
    )
  })

  it('allreduces one after the other, each rank at its own pace: every result right', async () => {
    const P = 13
    const rounds = 30
    const { comms } = group(P, true)
    const results = await staggered(comms, comms.map((c) => c.rank % 4), async (c) => {
      const got: number[] = []
      for (let i = 0; i < rounds; i++) {
        if ((c.rank + i) % 3 === 0) await Promise.resolve()
        got.push(await c.allreduce(c.rank * 1000 + i, 'max'))
      }
      return got
    })
    const expected = Array.from({ length: rounds }, (_, i) => (P - 1) * 1000 + i)
    for (const r of results) expect(r).toEqual(expected)
  })

  it('two allreduces not awaited one by one both come out right (and without a scheduler too)', async () => {
    for (const scheduled of [true, false]) {
      const P = 6
      const results = await staggered(group(P, scheduled).comms, new Array(P).fill(0), (c) => Promise.all([c.allreduce(c.rank, 'sum'), c.allreduce(-c.rank, 'min'), c.barrier()]))
      for (const [sum, min] of results) {
        expect(sum).toBe(15)
        expect(min).toBe(-5)
      }
    }
  })

  it('barrier on 64 ranks: no rank leaves before every rank has arrived', async () => {
    const P = 64
    let arrived = 0
    const seen = await staggered(group(P, true).comms, Array.from({ length: P }, (_, q) => (q * 5) % 9), async (c) => {
      arrived++
      await c.barrier()
      return arrived
    })
    expect(seen).toEqual(new Array(P).fill(P))
  })

  it('a rank that never joins: the scheduler fails the parked allreduces (no hang), with the error it is given', async () => {
    const P = 4
    const { comms, scheduler } = group(P, true)
    const joined = comms.slice(0, 3).map((c) => c.allreduce(1, 'sum'))
    for (const p of joined) p.catch(() => {})
    await new Promise((r) => setTimeout(r, 10))
    expect(scheduler!.waiting).toBeGreaterThan(0)
    scheduler!.fail(new CommunicationError('rank 3 failed'))
    for (const p of joined) await expect(p).rejects.toThrow(/rank 3 failed/)
    for (const c of comms) c.close()
  })

  it('an allreduce a kernel starts inside a superstep and awaits after the loop: right on every rank, no hang', async () => {
    // The allreduce parks in its rank's slot; the loop, parking next for a halo, hands it back to its own awaits.
    const results = await runLocal(startsAllreduces, { ranks: 4, argv: ['--steps', '6'] })
    for (const r of results) expect(r).toEqual([0, 4, 8, 12, 16, 20].map((s) => s + 6))
  })

  for (const scheduled of [true, false]) {
    it(`an allreduce met by another collective on a peer fails with a message naming the mismatch (${scheduled ? 'scheduled' : 'awaited'})`, async () => {
      const [a, b] = group(2, scheduled).comms
      const reduced = a.allreduce(1, 'sum')
      const gathered = b.allgather(2)
      await expect(reduced).rejects.toThrow(/expected a number \(8 bytes\) from rank 1 .* called different collectives/)
      a.close()
      b.close()
      await expect(gathered).rejects.toThrow()
    })
  }
})

/** 4 cells per rank on a line, one halo cell on each side. */
class Line extends Domain<1> {
  constructor() {
    super(1)
  }
  possessed(rank: number): DomainDesc<1> {
    return DomainDesc.of([1 + 4 * rank], [5 + 4 * rank])
  }
  needed(rank: number): DomainDesc<1> {
    return DomainDesc.of([4 * rank], [6 + 4 * rank])
  }
}

/** Each superstep starts an allreduce of step + rank (over 4 ranks: 4·step + 6) and keeps its promise. */
class Starts extends CountedKernel<Line> {
  readonly pending: Promise<number>[] = []
  constructor(
    steps: number,
    private readonly ctx: { rank: number; allreduce(v: number, op: 'sum'): Promise<number> },
  ) {
    super(steps)
  }
  calculate(read: Line, write: Line): void {
    const b = write.possessedBox
    for (let i = b.lower[0]; i < b.upper[0]; i++) write.set([i], read.get([i]) + 1)
    this.pending.push(this.ctx.allreduce(this.pending.length + this.ctx.rank, 'sum'))
  }
}

const startsAllreduces = defineProgram({
  name: 'starts-allreduces',
  options: { steps: option.int(6, 'supersteps', { min: 1 }) },
  async main(ctx): Promise<number[]> {
    const k = new Starts(ctx.options.steps, ctx)
    await ctx.skeleton(k, [new Line(), new Line()]).run()
    return Promise.all(k.pending)
  },
})
