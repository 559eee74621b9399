import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { CountedKernel, defineProgram, Domain2D, DomainDesc, option, runLocal, splitPoint } from '../../src/index.js'
import { ConfigError, RankFailedError } from '../../src/errors.js'
import { SparseClock } from '../../src/skeletons/sparse-clock.js'
import { DONE, EVICTED, StepScheduler, WOULD_WAIT, type Stepper } from '../../src/skeletons/step-scheduler.js'

const ROWS_PER_RANK = 3
const COLS = 5

/** Row strips of a (3·P + 2) × 7 grid whose top edge is fixed at 1: one neighbour above, one below. */
class Strip extends Domain2D {
  constructor(readonly rows: number) {
    super()
  }
  possessed(rank: number, size: number): DomainDesc<2> {
    return DomainDesc.of([1 + splitPoint(this.rows, size, rank), 1], [1 + splitPoint(this.rows, size, rank + 1), COLS + 1])
  }
  needed(rank: number, size: number): DomainDesc<2> {
    const p = this.possessed(rank, size)
    return DomainDesc.of([p.lower[0] - 1, 0], [p.upper[0] + 1, COLS + 2])
  }
}

class Sweep extends CountedKernel<Strip> {
  constructor(
    steps: number,
    readonly failAt: number,
    readonly rank: number,
  ) {
    super(steps)
  }
  override initialize(read: Strip, write: Strip): void {
    for (const d of [read, write]) if (d.box.lower[0] === 0) for (let j = 0; j < COLS + 2; j++) d.put(0, j, 1)
  }
  calculate(read: Strip, write: Strip, it: number): void {
    if (it === this.failAt) throw new Error(`kernel of rank ${this.rank} fails at step ${it}`)
    const b = write.possessedBox
    for (let i = b.lower[0]; i < b.upper[0]; i++) {
      for (let j = 1; j <= COLS; j++) write.put(i, j, 0.25 * (read.at(i - 1, j) + read.at(i + 1, j) + read.at(i, j - 1) + read.at(i, j + 1)))
    }
  }
}

/** Each rank waits `delays[rank]` ms before its skeleton starts, so ranks enter their loops at different times. */
const program = defineProgram({
  name: 'scheduler-probe',
  options: {
    steps: option.int(20, 'supersteps', { min: 1 }),
    delays: option.string('', 'comma-separated delay (ms) per rank before the loop'),
    failRank: option.int(-1, 'rank whose kernel throws'),
    failAt: option.int(-1, 'step at which it throws'),
  },
  async main(ctx): Promise<number[]> {
    const o = ctx.options
    const delay = Number(o.delays.split(',')[ctx.rank] ?? 0)
    if (delay > 0) await new Promise((r) => setTimeout(r, delay))
    const rows = ROWS_PER_RANK * ctx.size
    const kernel = new Sweep(o.steps, ctx.rank === o.failRank ? o.failAt : -1, ctx.rank)
    const grid = await ctx.skeleton(kernel, [new Strip(rows), new Strip(rows)]).run()
    const b = grid.possessedBox
    const values: number[] = []
    for (let i = b.lower[0]; i < b.upper[0]; i++) for (let j = 1; j <= COLS; j++) values.push(grid.at(i, j))
    return values
  },
})

/** The same sweeps on the whole grid in one array, written apart from the library. */
function serial(rows: number, steps: number): number[] {
  const w = COLS + 2
  let u = new Float64Array((rows + 2) * w)
  let v = new Float64Array((rows + 2) * w)
  for (let j = 0; j < w; j++) u[j] = v[j] = 1
  for (let s = 0; s < steps; s++) {
    for (let i = 1; i <= rows; i++) for (let j = 1; j <= COLS; j++) v[i * w + j] = 0.25 * (u[(i - 1) * w + j] + u[(i + 1) * w + j] + u[i * w + j - 1] + u[i * w + j + 1])
    ;[u, v] = [v, u]
  }
  const out: number[] = []
  for (let i = 1; i <= rows; i++) for (let j = 1; j <= COLS; j++) out.push(u[i * w + j])
  return out
}

describe('the ranks of one thread run their supersteps through the StepScheduler', () => {
  it('ranks that enter their loops at different times (a parked rank woken by a late one) give the serial result', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 40 }), fc.array(fc.constantFrom(0, 0, 1, 5), { minLength: 6, maxLength: 6 }), async (P, steps, delays) => {
        const values = await runLocal(program, { ranks: P, argv: ['--steps', String(steps), '--delays', delays.join(',')] })
        expect(values.flat()).toEqual(serial(ROWS_PER_RANK * P, steps))
      }),
      { numRuns: 40 },
    )
  })

  it('a rank that fails while the others wait in the scheduler fails the run with its error, and nothing hangs', async () => {
    for (const [failRank, delays] of [
      [0, ''],
      [2, '0,0,0,5'],
      [3, '5,0,0,0'],
    ] as const) {
      const run = runLocal(program, { ranks: 4, argv: ['--steps', '30', '--fail-rank', String(failRank), '--fail-at', '7', '--delays', delays] })
      const err = await run.then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(err).toBeInstanceOf(RankFailedError)
      expect((err as RankFailedError).message).toContain(`kernel of rank ${failRank} fails at step 7`)
    }
  })
})

/** A loop that needs `needs` messages from rank `from` with tag 7, counted by `got`. */
class FakeLoop implements Stepper {
  got = 0
  advances = 0
  constructor(
    readonly from: number,
    readonly needs: number,
    readonly arrived: () => number,
  ) {}
  advance(): typeof DONE | typeof WOULD_WAIT | Promise<unknown> {
    this.advances++
    this.got = this.arrived()
    return this.got >= this.needs ? DONE : WOULD_WAIT
  }
  awaitedSource(): number {
    return this.from
  }
  awaitedTag(): number {
    return 7
  }
}

describe('StepScheduler', () => {
  it('wakes a parked loop for the message it waits for only, and hands it back when it ends', async () => {
    const s = new StepScheduler(3, new SparseClock(50))
    let count = 0
    const loop = new FakeLoop(2, 2, () => count)
    const parked = s.park(0, loop)
    expect(s.waiting).toBe(1)
    s.delivered(0, 1, 7) // another source
    s.delivered(0, 2, 8) // another tag
    s.delivered(1, 2, 7) // another rank
    await new Promise((r) => setImmediate(r))
    expect(loop.advances).toBe(0)
    count = 1
    s.delivered(0, 2, 7)
    await new Promise((r) => setImmediate(r))
    expect(loop.advances).toBe(1)
    expect(s.waiting).toBe(1)
    count = 2
    s.delivered(0, 2, 7)
    expect(await parked).toBe(DONE)
    expect(loop.advances).toBe(2)
    expect(s.waiting).toBe(0)
  })

  it("one slot per rank: a loop takes it from a collective (handed back, EVICTED), never from another loop", async () => {
    const s = new StepScheduler(2, new SparseClock(50))
    const collective = s.park(0, new FakeLoop(1, 1, () => 0), true)
    // The collective's message arrives, then the loop parks before the scheduler runs it.
    s.delivered(0, 1, 7)
    let count = 0
    const loop = new FakeLoop(1, 1, () => count)
    const parked = s.park(0, loop)
    expect(await collective).toBe(EVICTED)
    expect(s.holds(0)).toBe(true)
    await expect(s.park(0, new FakeLoop(1, 1, () => 0))).rejects.toThrow(ConfigError)
    count = 1
    s.delivered(0, 1, 7)
    expect(await parked).toBe(DONE)
    expect(s.holds(0)).toBe(false)
  })

  it('runs every ready loop, more than a burst of them, and those made ready behind the one running', async () => {
    const n = 40
    const s = new StepScheduler(n, new SparseClock(50))
    const got = new Array<number>(n).fill(0)
    const order: number[] = []
    // Loop k waits for one message from rank k + 1 (the last one from rank 0); once it has it, it sends to rank k − 1.
    const loops: Stepper[] = got.map((_, k) => ({
      advance: () => {
        if (got[k] === 0) return WOULD_WAIT
        order.push(k)
        if (k > 0) {
          got[k - 1] = 1
          s.delivered(k - 1, k, 7)
        }
        return DONE
      },
      awaitedSource: () => (k + 1) % n,
      awaitedTag: () => 7,
    }))
    const parked = loops.map((l, k) => s.park(k, l))
    // Wake the top half at once (more than a burst), the chain down from rank 19 does the rest.
    for (let k = 20; k < n; k++) {
      got[k] = 1
      s.delivered(k, (k + 1) % n, 7)
    }
    for (const p of parked) expect(await p).toBe(DONE)
    expect([...order].sort((a, b) => a - b)).toEqual(got.map((_, k) => k))
    expect(s.waiting).toBe(0)
  })

  it('fails every parked loop, and every later one, once the run fails', async () => {
    const s = new StepScheduler(2, new SparseClock(50))
    const a = s.park(0, new FakeLoop(1, 1, () => 0))
    const b = s.park(1, new FakeLoop(0, 1, () => 0))
    const err = new Error('rank 3 failed')
    s.fail(err)
    await expect(a).rejects.toBe(err)
    await expect(b).rejects.toBe(err)
    await expect(s.park(0, new FakeLoop(1, 1, () => 0))).rejects.toBe(err)
    expect(s.waiting).toBe(0)
  })

  it('a loop that throws while driven rejects its own park only', async () => {
    const s = new StepScheduler(2, new SparseClock(50))
    const thrower: Stepper = {
      advance: () => {
        throw new Error('boom')
      },
      awaitedSource: () => 1,
      awaitedTag: () => 7,
    }
    let count = 0
    const a = s.park(0, thrower)
    const b = s.park(1, new FakeLoop(0, 1, () => count))
    s.delivered(0, 1, 7)
    await expect(a).rejects.toThrow('boom')
    count = 1
    s.delivered(1, 0, 7)
    expect(await b).toBe(DONE)
  })
})
