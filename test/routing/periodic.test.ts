import { describe, expect, it } from 'vitest'
import { CountedKernel, defineProgram, Domain, Domain2D, DomainDesc, option, PartitionError, RankGrid, runLocal } from '../../src/index.js'
import { partitionAt } from '../../src/routing/partition.js'
import { RoutingPlan } from '../../src/routing/plan.js'

const mod = (i: number, n: number) => ((i % n) + n) % n
const start1 = (i: number) => Math.sin(i * 0.7) + (i % 5) * 0.25
const start2 = (i: number, j: number) => Math.cos(i * 0.3 + j * 0.9) + ((i * 7 + j) % 4) * 0.5

/** A ring of n cells: halos of one cell that wrap around. */
class Ring extends Domain<1> {
  readonly global: DomainDesc<1>
  constructor(readonly n: number) {
    super(1, { periodic: true })
    this.global = DomainDesc.of([0], [n])
  }
  possessed(rank: number, size: number): DomainDesc<1> {
    return RankGrid.of(this.global, size).boxOf(rank)
  }
  needed(rank: number, size: number): DomainDesc<1> {
    return this.possessed(rank, size).expand(1) // past the ends: wraps
  }
}

/** Upwind advection plus diffusion on the ring. */
class RingFlow extends CountedKernel<Ring> {
  override initialize(read: Ring, write: Ring): void {
    // Halos too (from the cell they mirror): this test is about routing, not about the first exchange.
    for (const d of [read, write]) for (let i = d.box.lower[0]; i < d.box.upper[0]; i++) d.set([i], start1(mod(i, d.n)))
  }
  calculate(read: Ring, write: Ring): void {
    const b = write.possessedBox
    const u = read.data
    const o = read.offset
    const v = write.data
    for (let i = b.lower[0]; i < b.upper[0]; i++) v[o + i] = u[o + i] + 0.3 * (u[o + i - 1] - u[o + i]) + 0.1 * (u[o + i - 1] - 2 * u[o + i] + u[o + i + 1])
  }
}

/** A channel: walls along rows (axis 0), periodic along columns (axis 1), on a 2-D grid of ranks. */
class Channel extends Domain2D {
  readonly global: DomainDesc<2>
  constructor(
    readonly nx: number,
    readonly ny: number,
  ) {
    super({ periodic: [false, true] })
    this.global = DomainDesc.of([0, 0], [nx, ny])
  }
  possessed(rank: number, size: number): DomainDesc<2> {
    return RankGrid.of(this.global, size).boxOf(rank)
  }
  needed(rank: number, size: number): DomainDesc<2> {
    return this.possessed(rank, size).expand(1).intersect(DomainDesc.of([0, -1], [this.nx, this.ny + 1]))
  }
}

class ChannelFlow extends CountedKernel<Channel> {
  override initialize(read: Channel, write: Channel): void {
    for (const d of [read, write]) for (const [i, j] of d.box.cells()) d.put(i, j, start2(i, mod(j, d.ny)))
  }
  calculate(read: Channel, write: Channel): void {
    const b = write.possessedBox
    const { data: u, s0, offset: o } = read
    const v = write.data
    const nx = read.nx
    for (let i = b.lower[0]; i < b.upper[0]; i++) {
      for (let j = b.lower[1]; j < b.upper[1]; j++) {
        const c = u[o + i * s0 + j]
        const up = i > 0 ? u[o + (i - 1) * s0 + j] : 0
        const down = i < nx - 1 ? u[o + (i + 1) * s0 + j] : 0
        v[o + i * s0 + j] = c + 0.4 * (u[o + i * s0 + j - 1] - c) + 0.1 * (up + down + u[o + i * s0 + j + 1] + u[o + i * s0 + j - 1] - 4 * c)
      }
    }
  }
}

const program = defineProgram({
  name: 'periodic',
  options: { shape: option.string('ring', 'ring or channel'), n: option.int(23, 'cells'), steps: option.int(9, 'supersteps') },
  async main(ctx) {
    const { n, steps } = ctx.options
    const cells: Array<[number[], number]> = []
    if (ctx.options.shape === 'ring') {
      const u = await ctx.skeleton(new RingFlow(steps), [new Ring(n), new Ring(n)]).run()
      for (const x of u.possessedBox.cells()) cells.push([x, u.get(x)])
    } else {
      const u = await ctx.skeleton(new ChannelFlow(steps), [new Channel(n - 6, n), new Channel(n - 6, n)]).run()
      for (const x of u.possessedBox.cells()) cells.push([x, u.get(x)])
    }
    return cells
  },
})

/** The ring without molotof: one array, neighbours by modular indexing. */
function serialRing(n: number, steps: number): number[] {
  let u = Array.from({ length: n }, (_, i) => start1(i))
  for (let s = 0; s < steps; s++) {
    u = u.map((c, i) => c + 0.3 * (u[mod(i - 1, n)] - c) + 0.1 * (u[mod(i - 1, n)] - 2 * c + u[mod(i + 1, n)]))
  }
  return u
}

function serialChannel(nx: number, ny: number, steps: number): number[][] {
  let u = Array.from({ length: nx }, (_, i) => Array.from({ length: ny }, (_, j) => start2(i, j)))
  for (let s = 0; s < steps; s++) {
    u = u.map((row, i) =>
      row.map((c, j) => {
        const left = row[mod(j - 1, ny)]
        const right = row[mod(j + 1, ny)]
        const up = i > 0 ? u[i - 1][j] : 0
        const down = i < nx - 1 ? u[i + 1][j] : 0
        return c + 0.4 * (left - c) + 0.1 * (up + down + right + left - 4 * c)
      }),
    )
  }
  return u
}

describe('periodic halos', () => {
  for (const ranks of [1, 3, 4]) {
    it(`advection-diffusion on a ring of 23 cells on ${ranks} rank(s) gives the serial result (modular indexing)`, async () => {
      const want = serialRing(23, 9)
      const out = await runLocal(program, { ranks, argv: ['--shape', 'ring', '--n', '23', '--steps', '9'] })
      const got = new Array<number>(23).fill(NaN)
      for (const r of out) for (const [[i], v] of r) got[i] = v
      expect(got).toEqual(want)
    })
  }

  for (const ranks of [1, 2, 4, 6]) {
    it(`a channel periodic along its columns on a grid of ${ranks} rank(s) gives the serial result`, async () => {
      const [nx, ny] = [11, 17]
      const want = serialChannel(nx, ny, 7)
      const out = await runLocal(program, { ranks, argv: ['--shape', 'channel', '--n', String(ny), '--steps', '7'] })
      let seen = 0
      for (const r of out) {
        for (const [[i, j], v] of r) {
          expect(v, `cell (${i}, ${j})`).toBe(want[i][j])
          seen++
        }
      }
      expect(seen).toBe(nx * ny)
    })
  }

  it('maps the cells past each end to their owner, one period away, and a rank alone onto itself', () => {
    const ring = new Ring(10)
    const part = partitionAt(ring, 2, 0)
    const plan0 = RoutingPlan.build(0, 'border', part, part)
    // Rank 0 possesses 0..5 and needs -1..6: cell 5 from rank 1 directly, cell -1 from rank 1's cell 9.
    expect(plan0.recvs.map((t) => ({ peer: t.peer, boxes: t.boxes.map(String) }))).toEqual([{ peer: 1, boxes: ['[5..6)', '[-1..0)'] }])
    const plan1 = RoutingPlan.build(1, 'border', part, part)
    expect(plan1.sends.map((t) => ({ peer: t.peer, boxes: t.boxes.map(String) }))).toEqual([{ peer: 0, boxes: ['[5..6)', '[9..10)'] }])
    const alone = RoutingPlan.build(0, 'border', partitionAt(ring, 1, 0), partitionAt(ring, 1, 0))
    expect(alone.sends).toEqual([])
    expect(alone.wraps.map((w) => `${w.from} → ${w.to}`).sort()).toEqual(['[0..1) → [10..11)', '[9..10) → [-1..0)'])
  })

  it('refuses a halo reaching more than one period past the global box', () => {
    class Wide extends Ring {
      override needed(rank: number, size: number): DomainDesc<1> {
        return this.possessed(rank, size).expand(12)
      }
    }
    const part = partitionAt(new Wide(10), 2, 0)
    expect(() => RoutingPlan.build(0, 'border', part, part)).toThrow(PartitionError)
  })
})
