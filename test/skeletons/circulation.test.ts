import { describe, expect, it } from 'vitest'
import { CountedKernel, defineProgram, Domain2D, DomainDesc, option, runLocal, splitPoint, type StepContext } from '../../src/index.js'

/** Row blocks of an n×m matrix; block (rank + step) mod size sits on `rank` at `step` (a ring). */
class RingRows extends Domain2D {
  constructor(
    readonly n: number,
    readonly m: number,
  ) {
    super()
  }
  block(k: number, size: number): DomainDesc<2> {
    return DomainDesc.of([splitPoint(this.n, size, k), 0], [splitPoint(this.n, size, k + 1), this.m])
  }
  possessed(rank: number, size: number, step: number): DomainDesc<2> {
    return this.block((rank + step) % size, size)
  }
  needed(rank: number, size: number, step: number): DomainDesc<2> {
    return this.possessed(rank, size, step)
  }
  override partitionEpoch(step: number): number {
    return step
  }
}

interface Seen {
  /** Row ranges read at each step. */
  rows: [number, number][]
  /** False as soon as a cell read differs from its row index. */
  valuesRight: boolean
  maxWriteRows: number
  maxBufferCells: number
  maxReadBufferCells: number
}

/** Reads the block it holds (cell value = global row) and records the boxes and buffers of both domains. */
class Watch extends CountedKernel<RingRows> {
  readonly seen: Seen = { rows: [], valuesRight: true, maxWriteRows: 0, maxBufferCells: 0, maxReadBufferCells: 0 }
  override initialize(read: RingRows, _write: RingRows, _ctx: StepContext): void {
    for (const [i, j] of read.box.cells()) read.put(i, j, i)
  }
  calculate(read: RingRows, write: RingRows): void {
    const b = read.possessedBox
    const s = this.seen
    s.rows.push([b.lower[0], b.upper[0]])
    for (const [i, j] of b.cells()) if (read.at(i, j) !== i) s.valuesRight = false
    s.maxWriteRows = Math.max(s.maxWriteRows, write.box.extent(0))
    s.maxBufferCells = Math.max(s.maxBufferCells, write.data.buffer.byteLength / 8)
    s.maxReadBufferCells = Math.max(s.maxReadBufferCells, read.data.buffer.byteLength / 8)
  }
}

const ring = defineProgram({
  name: 'ring',
  options: { n: option.int(601, 'rows'), m: option.int(3, 'columns'), rounds: option.int(2, 'times around the ring') },
  async main(ctx) {
    const { n, m, rounds } = ctx.options
    const k = new Watch(rounds * ctx.size)
    await ctx.skeleton(k, [new RingRows(n, m), new RingRows(n, m)], { routing: 'circulation' }).run()
    return k.seen
  },
})

describe('circulation: the write domain is a receive buffer', () => {
  it.each([2, 3, 4, 5, 6, 7, 8])('holds at most the largest block on %i ranks (n = 601), and every rank reads each block in ring order', async (P) => {
    const n = 601
    const seen = await runLocal(ring, { ranks: P, argv: ['--n', String(n)] })
    let largest = 0
    for (let k = 0; k < P; k++) largest = Math.max(largest, splitPoint(n, P, k + 1) - splitPoint(n, P, k))
    for (let r = 0; r < P; r++) {
      const s = seen[r]
      expect(s.valuesRight, `rank ${r} read a wrong value`).toBe(true)
      // Ring order: at step t, rank r holds block (r + t) mod P.
      expect(s.rows).toEqual(Array.from({ length: 2 * P }, (_, t) => [splitPoint(n, P, (r + t) % P), splitPoint(n, P, ((r + t) % P) + 1)]))
      // Memory per rank: two blocks (the one read, the one received), never the whole matrix.
      expect(s.maxWriteRows, `rank ${r} receive box`).toBeLessThanOrEqual(largest)
      expect(s.maxBufferCells, `rank ${r} receive buffer`).toBeLessThanOrEqual(largest * 3)
      expect(s.maxReadBufferCells, `rank ${r} read buffer`).toBeLessThanOrEqual(largest * 3)
    }
  })
})
