import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { CountedKernel, defineProgram, Domain2D, DomainDesc, option, runLocal } from '../../src/index.js'
import { allocatedBytes, startAllocationCount } from '../../src/bench/alloc.js'
import { MessageChannel } from 'node:worker_threads'
import { channelHeaders, ThreadCommunicator } from '../../src/runtime/transport/threads.js'

const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

/** Row strips of a (4·P) × 32 plate with a fixed top edge: a halo above and below each rank (one rank: the whole 4 × 32 plate). */
class StripPlate extends Domain2D {
  possessed(rank: number): DomainDesc<2> {
    return DomainDesc.of([1 + 4 * rank, 1], [5 + 4 * rank, 33])
  }
  needed(rank: number): DomainDesc<2> {
    const p = this.possessed(rank)
    return DomainDesc.of([p.lower[0] - 1, 0], [p.upper[0] + 1, 34])
  }
}

class StripSweep extends CountedKernel<StripPlate> {
  override initialize(read: StripPlate, write: StripPlate): void {
    for (const d of [read, write]) if (d.box.lower[0] === 0) for (let j = 0; j < 34; j++) d.put(0, j, 1)
  }
  calculate(read: StripPlate, write: StripPlate): void {
    const u = read.data
    const v = write.data
    const s = read.s0
    const o = read.offset
    const b = write.possessedBox
    for (let i = b.lower[0]; i < b.upper[0]; i++) for (let j = 1; j < 33; j++) v[o + i * s + j] = 0.25 * (u[o + (i - 1) * s + j] + u[o + (i + 1) * s + j] + u[o + i * s + j - 1] + u[o + i * s + j + 1])
  }
}

/** Row strips of a ring of 4·P rows × 8 cells of 3 values: halos that wrap around (one rank wraps onto itself). */
class RingLattice extends Domain2D {
  constructor(readonly rows: number) {
    super({ components: 3, periodic: [true, false] })
  }
  possessed(rank: number): DomainDesc<2> {
    return DomainDesc.of([4 * rank, 0], [4 + 4 * rank, 8])
  }
  needed(rank: number): DomainDesc<2> {
    return this.possessed(rank).expand([1, 0])
  }
}

class RingSweep extends CountedKernel<RingLattice> {
  calculate(read: RingLattice, write: RingLattice): void {
    const { data: u, s0, offset: o } = read
    const v = write.data
    const b = write.possessedBox
    for (let i = b.lower[0]; i < b.upper[0]; i++) for (let k = 0; k < 24; k++) v[o + i * s0 + k] = 0.5 * (u[o + (i - 1) * s0 + k] + u[o + (i + 1) * s0 + k])
  }
}

/** Every rank counts the thread's allocations during its loop (all ranks share the heap: rank 0's figure is the group's). */
const strips = defineProgram({
  name: 'alloc-probe',
  options: { steps: option.int(10, 'supersteps', { min: 1 }), ring: option.boolean(false, 'a periodic ring of 3-value cells instead of the plate') },
  async main(ctx): Promise<number> {
    const sk = ctx.options.ring
      ? ctx.skeleton(new RingSweep(ctx.options.steps), [new RingLattice(4 * ctx.size), new RingLattice(4 * ctx.size)], { checkpoint: { every: 1_000_000_000 } })
      : ctx.skeleton(new StripSweep(ctx.options.steps), [new StripPlate(), new StripPlate()], { checkpoint: { every: 1_000_000_000 } })
    const count = startAllocationCount()
    await sk.run()
    return allocatedBytes(count)
  },
})

/** Bytes the skeleton loops of a run of `steps` supersteps on `ranks` ranks allocated, with the real checkpoint coordinator. */
async function loopBytes(ranks: number, steps: number, ring = false): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'molotof-alloc-'))
  dirs.push(dir)
  const [bytes] = await runLocal(strips, { ranks, argv: ['--steps', String(steps), ...(ring ? ['--ring'] : [])], checkpoint: { dir, policy: { every: 1_000_000_000 }, keep: 1, resume: false } })
  return bytes
}

/** Bytes per rank-superstep of 10,000 more supersteps: the best of three long-minus-short differences. */
async function perRankStep(ranks: number, ring = false): Promise<number> {
  // The difference between a long and a short run cancels set-up and JIT
  // warm-up; GC accounting is noisy by a few KB, so the best of three is
  // kept. A single closure or promise per superstep costs 40+ bytes.
  await loopBytes(ranks, 2_000, ring)
  const perStep: number[] = []
  for (let r = 0; r < 3; r++) {
    const short = await loopBytes(ranks, 1_000, ring)
    const long = await loopBytes(ranks, 11_000, ring)
    perStep.push((long - short) / 10_000 / ranks)
  }
  return Math.min(...perStep)
}

describe('a superstep allocates nothing in steady state', () => {
  it('10,000 more supersteps (checkpoint coordinator, a policy that never fires) allocate under 8 bytes per superstep', async () => {
    expect(await perRankStep(1)).toBeLessThan(8)
  })

  it('4 ranks in one thread exchanging halos (runLocal, the StepScheduler) allocate under 8 bytes per rank-superstep', async () => {
    expect(await perRankStep(4)).toBeLessThan(8)
  })

  it('periodic halos of 3-value cells (a ring: wraps onto itself on 1 rank, to a neighbour on 4) allocate under 8 bytes per rank-superstep', async () => {
    expect(await perRankStep(1, true)).toBeLessThan(8)
    expect(await perRankStep(4, true)).toBeLessThan(8)
  })

  it('a halo through the threads transport (shared-memory ring, send + recvNow) allocates under 8 bytes per message', async () => {
    // Both ends in this thread: messages go through the same ring, mailbox and pool as between two workers.
    const channel = new MessageChannel()
    const headers = channelHeaders(2)
    const a = new ThreadCommunicator(0, 2, [undefined, channel.port1], headers[0])
    const b = new ThreadCommunicator(1, 2, [channel.port2, undefined], headers[1])
    try {
      const halo = new Uint8Array(new SharedArrayBuffer(512))
      // The first message announces the ring over the port: let it arrive.
      a.send(1, 0, halo)
      ;(await b.recv(0, 0)).release()
      const exchange = (n: number) => {
        for (let i = 1; i <= n; i++) {
          a.send(1, i, halo)
          const m = b.recvNow(0, i)
          if (m === undefined) throw new Error(`message ${i} did not arrive`)
          m.release()
        }
      }
      exchange(2_000)
      const perMessage: number[] = []
      for (let r = 0; r < 3; r++) {
        const count = startAllocationCount()
        exchange(10_000)
        perMessage.push(allocatedBytes(count) / 10_000)
      }
      expect(Math.min(...perMessage)).toBeLessThan(8)
    } finally {
      a.close()
      b.close()
    }
  })
})
