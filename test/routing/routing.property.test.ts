import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { localGroup } from '../../src/runtime/launch/local.js'
import { Domain, DomainDesc, type NumericDType, type StorageOrder } from '../../src/index.js'
import { partitionAt, type Partition } from '../../src/routing/partition.js'
import { Router, type Schedule } from '../../src/routing/router.js'

/** A domain whose partition is given as data, step by step. */
class TableDomain extends Domain {
  constructor(
    dims: number,
    private readonly poss: DomainDesc[][],
    private readonly need: DomainDesc[][],
    order: StorageOrder,
    dtype: NumericDType,
  ) {
    super(dims, { order, dtype })
  }
  possessed(rank: number, _size: number, step: number): DomainDesc {
    return this.poss[step][rank]
  }
  needed(rank: number, _size: number, step: number): DomainDesc {
    return this.need[step][rank]
  }
  override partitionEpoch(step: number): number {
    return step
  }
}

/** Split `box` into `parts` boxes (some may be empty) by random cuts. */
const tiling = (extents: number[], parts: number) =>
  fc.array(fc.tuple(fc.nat(), fc.nat(), fc.double({ min: 0, max: 1, noNaN: true })), { minLength: parts - 1, maxLength: parts - 1 }).map((cuts) => {
    const boxes = [DomainDesc.of(extents.map(() => 0), extents)]
    for (const [pick, dimSeed, where] of cuts) {
      const i = pick % boxes.length
      const b = boxes[i]
      const d = dimSeed % extents.length
      const at = b.lower[d] + Math.min(b.extent(d), Math.floor(where * (b.extent(d) + 1)))
      const up = [...b.upper]
      up[d] = at
      const lo = [...b.lower]
      lo[d] = at
      boxes.splice(i, 1, DomainDesc.of(b.lower, up), DomainDesc.of(lo, b.upper))
    }
    return boxes
  })

const scenario = fc
  .record({
    dims: fc.integer({ min: 1, max: 3 }),
    ranks: fc.integer({ min: 1, max: 5 }),
    order: fc.constantFrom<StorageOrder>('C', 'F'),
    dtype: fc.constantFrom<NumericDType>('float64', 'int32', 'float32'),
  })
  .chain(({ dims, ranks, order, dtype }) =>
    fc
      .array(fc.integer({ min: 1, max: 6 }), { minLength: dims, maxLength: dims })
      .chain((extents) =>
        fc.record({
          dims: fc.constant(dims),
          ranks: fc.constant(ranks),
          order: fc.constant(order),
          dtype: fc.constant(dtype),
          extents: fc.constant(extents),
          from: tiling(extents, ranks),
          to: tiling(extents, ranks),
          perm: fc.shuffledSubarray([...Array(ranks).keys()], { minLength: ranks, maxLength: ranks }),
          halos: fc.array(fc.array(fc.integer({ min: 0, max: 2 }), { minLength: dims, maxLength: dims }), { minLength: ranks, maxLength: ranks }),
          sameStep: fc.boolean(),
          maxInFlight: fc.integer({ min: 1, max: 3 }),
        }),
      ),
  )

/** A value that identifies a global cell, exact in every dtype used. */
function cellValue(c: readonly number[]): number {
  return 1 + c.reduce((acc, x) => acc * 7 + x, 0)
}

type Case = { poss: DomainDesc[][]; need: DomainDesc[][] }

function borderCase(s: Parameters<typeof build>[0]): Case {
  return build(s)
}

function build(s: {
  ranks: number
  extents: number[]
  from: DomainDesc[]
  to: DomainDesc[]
  perm: number[]
  halos: number[][]
  sameStep: boolean
}): Case {
  const p0 = s.perm.map((i) => s.from[i])
  const p1 = s.sameStep ? p0 : s.to
  // Halos may reach outside the global box: cells nobody possesses must keep their value.
  const n1 = p1.map((b, q) => (b.isEmpty ? b : b.expand(s.halos[q])))
  const n0 = p0.map((b, q) => (b.isEmpty ? b : b.expand(s.halos[q])))
  return { poss: [p0, p1], need: [n0, n1] }
}

async function runBorder(c: Case, ranks: number, dims: number, order: StorageOrder, dtype: NumericDType, schedule: Schedule) {
  const comms = localGroup(ranks, { shared: true })
  return Promise.all(
    comms.map(async (comm) => {
      const q = comm.rank
      const w = new TableDomain(dims, c.poss, c.need, order, dtype)
      const from: Partition = partitionAt(w, ranks, 0)
      const to: Partition = partitionAt(w, ranks, 1)
      w.resize(from.possessed[q].hull(to.needed[q]))
      for (const cell of w.box.cells()) w.set(cell, from.possessed[q].containsPoint(cell) ? cellValue(cell) : -1 - q)
      const router = new Router(comm, 'border', schedule, 'table')
      const plan = router.plan(from, to)
      await router.route(plan, w, w, 7)
      await router.settleAll()
      return { w, plan, from, to }
    }),
  )
}

describe('routing plans (property-based)', () => {
  it('border exchange: every needed cell holds its owner value, possessed cells stay, no self-sends; paced = all-at-once', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const c = borderCase(s)
        const all = await runBorder(c, s.ranks, s.dims, s.order, s.dtype, { kind: 'all' })
        const paced = await runBorder(c, s.ranks, s.dims, s.order, s.dtype, { kind: 'paced', maxInFlight: s.maxInFlight })
        for (const { w, plan, from, to } of all) {
          const q = plan.rank
          expect(plan.sends.every((t) => t.peer !== q)).toBe(true)
          expect(plan.recvs.every((t) => t.peer !== q)).toBe(true)
          for (const cell of to.needed[q].cells()) {
            const owner = from.possessed.findIndex((b) => b.containsPoint(cell))
            const expected = owner >= 0 ? cellValue(cell) : -1 - q
            expect(w.get(cell)).toBe(expected)
          }
          for (const cell of from.possessed[q].cells()) expect(w.get(cell)).toBe(cellValue(cell))
        }
        for (let q = 0; q < s.ranks; q++) expect(Array.from(paced[q].w.data)).toEqual(Array.from(all[q].w.data))
      }),
      { numRuns: 150 },
    )
  })

  it('circulation: every block reaches its destination (ring shift), in both schedules', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, fc.integer({ min: 1, max: 4 }), async (s, shift) => {
        const blocks = s.perm.map((i) => s.from[i])
        // At step 1, rank q holds the block rank q+shift held at step 0.
        const poss = [blocks, blocks.map((_, q) => blocks[(q + shift) % s.ranks])]
        const c: Case = { poss, need: poss }
        for (const schedule of [{ kind: 'all' } as const, { kind: 'paced', maxInFlight: s.maxInFlight } as const]) {
          const comms = localGroup(s.ranks, { shared: true })
          const out = await Promise.all(
            comms.map(async (comm) => {
              const q = comm.rank
              const r = new TableDomain(s.dims, c.poss, c.need, s.order, s.dtype)
              const w = new TableDomain(s.dims, c.poss, c.need, s.order, s.dtype)
              const from = partitionAt(r, s.ranks, 0)
              const to = partitionAt(r, s.ranks, 1)
              r.resize(from.needed[q])
              w.resize(to.needed[q])
              for (const cell of r.box.cells()) r.set(cell, cellValue(cell))
              const router = new Router(comm, 'circulation', schedule, 'ring')
              await router.route(router.plan(from, to), r, w, 1)
              await router.settleAll()
              return w
            }),
          )
          out.forEach((w, q) => {
            for (const cell of poss[1][q].cells()) expect(w.get(cell)).toBe(cellValue(cell))
          })
        }
      }),
      { numRuns: 100 },
    )
  })

  it('reuses the cached plan while the partition does not change', () => {
    const [comm] = localGroup(1)
    const n = [[DomainDesc.of([0], [4])], [DomainDesc.of([0], [4])], [DomainDesc.of([0], [3])]]
    const d = new TableDomain(1, n, n, 'C', 'float64')
    const router = new Router(comm, 'border', { kind: 'all' }, 't')
    const a = router.plan(partitionAt(d, 1, 0), partitionAt(d, 1, 1))
    const b = router.plan(partitionAt(d, 1, 1), partitionAt(d, 1, 0))
    expect(b).toBe(a)
    expect(router.plansBuilt).toBe(1)
    router.plan(partitionAt(d, 1, 1), partitionAt(d, 1, 2))
    expect(router.plansBuilt).toBe(2)
  })
})
