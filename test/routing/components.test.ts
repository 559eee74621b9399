import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { CountedKernel, defineProgram, Domain2D, DomainDesc, option, RankGrid, runLocal, type StorageOrder } from '../../src/index.js'
import { partitionAt } from '../../src/routing/partition.js'
import { Router } from '../../src/routing/router.js'
import { localGroup } from '../../src/runtime/launch/local.js'

// A D2Q9 lattice: 9 values a cell, a component axis that halos and routing never grow or split.
const Q = 9
const CX = [0, 1, 0, -1, 0, 1, -1, -1, 1]
const CY = [0, 0, 1, 0, -1, 1, 1, -1, -1]
const OPPOSITE = [0, 3, 4, 1, 2, 7, 8, 5, 6]

/** An initial distribution identifying the global cell and the component. */
function initial(i: number, j: number, q: number): number {
  return 1 + ((i * 31 + j * 17 + q * 7) % 23) / 23
}

class Lattice extends Domain2D {
  readonly global: DomainDesc<2>
  constructor(
    readonly nx: number,
    readonly ny: number,
    order: StorageOrder = 'C',
  ) {
    super({ components: Q, order })
    this.global = DomainDesc.of([0, 0], [nx, ny])
  }
  possessed(rank: number, size: number): DomainDesc<2> {
    return RankGrid.of(this.global, size).boxOf(rank)
  }
  needed(rank: number, size: number): DomainDesc<2> {
    return this.possessed(rank, size).expand(1).intersect(this.global)
  }
}

/** Streaming with bounce-back at the walls, then a relaxation towards the cell's mean (couples the components). */
class StreamAndRelax extends CountedKernel<Lattice> {
  override initialize(read: Lattice, write: Lattice): void {
    // Every needed cell, halos included: this test is about routing, not about the first exchange.
    for (const d of [read, write]) {
      const b = d.box
      for (let i = b.lower[0]; i < b.upper[0]; i++) for (let j = b.lower[1]; j < b.upper[1]; j++) for (let q = 0; q < Q; q++) d.put(i, j, initial(i, j, q), q)
    }
  }
  calculate(read: Lattice, write: Lattice): void {
    const b = write.possessedBox
    const { data: f, s0, s1, offset } = read
    const out = write.data
    const nx = read.nx
    const ny = read.ny
    for (let i = b.lower[0]; i < b.upper[0]; i++) {
      for (let j = b.lower[1]; j < b.upper[1]; j++) {
        const at = offset + i * s0 + j * s1
        let mean = 0
        for (let q = 0; q < Q; q++) {
          const si = i - CX[q]
          const sj = j - CY[q]
          const v = si >= 0 && si < nx && sj >= 0 && sj < ny ? f[offset + si * s0 + sj * s1 + q] : f[at + OPPOSITE[q]]
          out[at + q] = v
          mean += v
        }
        mean /= Q
        for (let q = 0; q < Q; q++) out[at + q] = 0.8 * out[at + q] + 0.2 * mean
      }
    }
  }
}

const program = defineProgram({
  name: 'd2q9-components',
  options: { nx: option.int(13, 'rows'), ny: option.int(11, 'columns'), steps: option.int(6, 'supersteps'), order: option.string('C', 'C or F') },
  async main(ctx) {
    const { nx, ny, steps } = ctx.options
    const order = ctx.options.order as StorageOrder
    const grid = await ctx.skeleton(new StreamAndRelax(steps), [new Lattice(nx, ny, order), new Lattice(nx, ny, order)]).run()
    const cells: Array<[number, number, number[]]> = []
    for (const [i, j] of grid.possessedBox.cells()) cells.push([i, j, Array.from({ length: Q }, (_, q) => grid.get([i, j], q))])
    return { cells, allocated: grid.data.length, box: grid.box.toJSON(), needed: grid.needed(ctx.rank, ctx.size).toJSON() }
  },
})

/** The same lattice on one array, cell (i, j) component q at ((i·ny) + j)·9 + q, without molotof. */
function serial(nx: number, ny: number, steps: number): Float64Array {
  let f = new Float64Array(nx * ny * Q)
  let g = new Float64Array(nx * ny * Q)
  for (let i = 0; i < nx; i++) for (let j = 0; j < ny; j++) for (let q = 0; q < Q; q++) f[(i * ny + j) * Q + q] = initial(i, j, q)
  for (let s = 0; s < steps; s++) {
    for (let i = 0; i < nx; i++) {
      for (let j = 0; j < ny; j++) {
        const streamed: number[] = []
        for (let q = 0; q < Q; q++) {
          const si = i - CX[q]
          const sj = j - CY[q]
          streamed.push(si >= 0 && si < nx && sj >= 0 && sj < ny ? f[(si * ny + sj) * Q + q] : f[(i * ny + j) * Q + OPPOSITE[q]])
        }
        let mean = 0
        for (const v of streamed) mean += v
        mean /= Q
        for (let q = 0; q < Q; q++) g[(i * ny + j) * Q + q] = 0.8 * streamed[q] + 0.2 * mean
      }
    }
    ;[f, g] = [g, f]
  }
  return f
}

describe('a domain with components per cell (D2Q9)', () => {
  for (const [ranks, order] of [[1, 'C'], [4, 'C'], [4, 'F'], [3, 'C']] as const) {
    it(`gives the serial lattice's values on ${ranks} rank(s), ${order} order, in exactly cells × 9 values`, async () => {
      const nx = 13
      const ny = 11
      const steps = 6
      const want = serial(nx, ny, steps)
      const out = await runLocal(program, { ranks, argv: ['--nx', String(nx), '--ny', String(ny), '--steps', String(steps), '--order', order] })
      let seen = 0
      for (const r of out) {
        for (const [i, j, values] of r.cells) {
          for (let q = 0; q < Q; q++) expect(values[q], `cell (${i}, ${j}) component ${q}`).toBe(want[(i * ny + j) * Q + q])
          seen++
        }
        const box = DomainDesc.of(r.box.lower, r.box.upper)
        expect(r.box).toEqual(r.needed)
        expect(r.allocated).toBe(box.volume * Q)
      }
      expect(seen).toBe(nx * ny)
    })
  }

  for (const to of [4, 3]) {
    it(`checkpoints whole cells: stopped on 4 ranks after step 3, resumed on ${to}, gives the serial lattice`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'molotof-components-'))
      try {
        const argv = ['--nx', '13', '--ny', '11', '--steps', '6']
        const ft = { dir, policy: { every: 1 }, keep: 2, resume: false }
        await expect(runLocal(program, { ranks: 4, argv, checkpoint: { ...ft, interrupt: { skeleton: 0, step: 3 } } })).rejects.toThrow(/interrupted/)
        const logs: string[] = []
        const out = await runLocal(program, { ranks: to, argv, checkpoint: { ...ft, resume: true }, onLog: (_r, t) => logs.push(t) })
        expect(logs.join('\n')).toMatch(to === 4 ? /resuming from checkpoint/ : /resuming a checkpoint of 4 ranks on 3/)
        const want = serial(13, 11, 6)
        let seen = 0
        for (const r of out) {
          for (const [i, j, values] of r.cells) {
            for (let q = 0; q < Q; q++) expect(values[q], `cell (${i}, ${j}) component ${q}`).toBe(want[(i * 11 + j) * Q + q])
            seen++
          }
        }
        expect(seen).toBe(13 * 11)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    })
  }

  it('routes whole cells: every needed cell of every rank holds the 9 values its owner holds', async () => {
    const ranks = 4
    const comms = localGroup(ranks, { shared: true })
    const value = (i: number, j: number, q: number) => 1000 * i + 10 * j + q
    await Promise.all(
      comms.map(async (comm) => {
        const q0 = comm.rank
        const d = new Lattice(9, 7)
        const part = partitionAt(d, ranks, 0)
        d.resize(part.needed[q0])
        expect(d.data.length).toBe(part.needed[q0].volume * Q)
        d.fill(-1)
        for (const [i, j] of part.possessed[q0].cells()) for (let q = 0; q < Q; q++) d.put(i, j, value(i, j, q), q)
        const router = new Router(comm, 'border', { kind: 'all' }, 'lattice')
        await router.route(router.plan(part, part), d, d, 3)
        await router.settleAll()
        for (const [i, j] of part.needed[q0].cells()) for (let q = 0; q < Q; q++) expect(d.at(i, j, q), `rank ${q0} cell (${i}, ${j}) q ${q}`).toBe(value(i, j, q))
      }),
    )
  })
})
