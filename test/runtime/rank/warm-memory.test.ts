import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { describe, expect, it } from 'vitest'
import { readBufferBytes } from '../../../src/checkpoint/store/checkpoint-store.js'
import { RankAllocations, warmSizes, type WarmMemory } from '../../../src/runtime/rank/warm-memory.js'
import { recycledPool, warmPool } from '../../../src/runtime/boot/spare-host.mjs'

const MiB = 2 ** 20

interface Pool extends WarmMemory {
  filled: Promise<void>
  readonly bytes: number
}
const pool = warmPool as (sizes: number[], stop?: () => boolean) => Pool
const recycled = recycledPool as (buffers: SharedArrayBuffer[]) => Pool

describe('warmPool (a spare touching memory ahead)', () => {
  it('holds zeroed buffers of the sizes asked for, each handed out once and only for its exact size', async () => {
    const p = pool([2 * MiB, 3 * MiB, 2 * MiB])
    await p.filled
    expect(p.bytes).toBe(7 * MiB)
    expect(p.take(5 * MiB)).toBeUndefined()
    expect(p.take(2 * MiB + 8)).toBeUndefined()
    const a = p.take(2 * MiB)!
    expect(a.byteLength).toBe(2 * MiB)
    // Shared, as the rank's own large buffers (the checkpoint I/O thread copies domains from them).
    expect(a).toBeInstanceOf(SharedArrayBuffer)
    expect(new Uint8Array(a).every((x) => x === 0)).toBe(true)
    const b = p.take(2 * MiB)!
    expect(b).not.toBe(a)
    expect(p.take(2 * MiB)).toBeUndefined()
    expect(p.bytes).toBe(3 * MiB)
    p.release()
    expect(p.bytes).toBe(0)
    expect(p.take(3 * MiB)).toBeUndefined()
  })

  it('stops filling when told (a run started), and touches nothing beyond half the free memory', async () => {
    let stop = false
    const p = pool([MiB, MiB, MiB, MiB], () => stop)
    stop = true
    await p.filled
    expect(p.bytes).toBeLessThan(4 * MiB)
    const huge = pool([2 ** 50])
    await huge.filled
    expect(huge.bytes).toBe(0)
  })
})

describe('recycledPool (a kept survivor reusing its last run\'s buffers)', () => {
  it('hands each buffer out once, for its exact size, zeroed', () => {
    const a = new SharedArrayBuffer(2 * MiB)
    new Uint8Array(a).fill(7)
    const b = new SharedArrayBuffer(3 * MiB)
    const p = recycled([a, b])
    expect(p.from).toBe('last-run')
    expect(p.take(4 * MiB)).toBeUndefined()
    const got = p.take(2 * MiB)!
    expect(got).toBe(a)
    expect(new Uint8Array(got).every((x) => x === 0)).toBe(true)
    expect(p.take(2 * MiB)).toBeUndefined()
    p.release()
    expect(p.take(3 * MiB)).toBeUndefined()
  })
})

describe('RankAllocations (a rank process allocating its large buffers)', () => {
  it('serves large buffers of a size the warm memory holds from it, others fresh, and records the large sizes', () => {
    const given: number[] = []
    const warm: WarmMemory = {
      from: 'touched',
      take: (n) => (n === 4 * MiB ? (given.push(n), new SharedArrayBuffer(n)) : undefined),
      release: () => given.push(-1),
    }
    const a = new RankAllocations(warm)
    expect(a.allocate(1000).byteLength).toBe(1000)
    expect(a.allocate(4 * MiB).byteLength).toBe(4 * MiB)
    expect(a.allocate(5 * MiB).byteLength).toBe(5 * MiB)
    expect(given).toEqual([4 * MiB])
    expect(a.warmBytes).toBe(4 * MiB)
    expect(a.sizes).toEqual([4 * MiB, 5 * MiB])
    // The report adds the read buffer of the rank's file; small sizes are left out.
    expect(a.report([readBufferBytes(16 * MiB + 700), 100])).toEqual([4 * MiB, 5 * MiB, 17 * MiB])
    // A read buffer of an earlier recovery still alive is not counted twice.
    expect(a.report([5 * MiB])).toEqual([4 * MiB, 5 * MiB])
    a.release()
    expect(given).toEqual([4 * MiB, -1])
    // Released: nothing more is taken from it.
    a.allocate(4 * MiB)
    expect(given).toEqual([4 * MiB, -1])
    expect(a.warmBytes).toBe(4 * MiB)
  })

  it('forgets the buffers that were collected: a domain that grew reports its new size, not its old one', async () => {
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    const a = new RankAllocations(undefined)
    let old: ArrayBufferLike | undefined = a.allocate(2 * MiB)
    const kept = a.allocate(3 * MiB)
    expect(a.sizes).toEqual([2 * MiB, 3 * MiB])
    old = undefined
    for (let i = 0; i < 50 && a.sizes.length > 1; i++) {
      gc()
      await new Promise((r) => setTimeout(r, 10))
    }
    expect(old).toBeUndefined()
    expect(a.sizes).toEqual([3 * MiB])
    expect(kept.byteLength).toBe(3 * MiB)
  })

  it('gives the live large buffers back for the next run in the process', () => {
    const a = new RankAllocations(undefined)
    const big = a.allocate(2 * MiB)
    a.allocate(1000)
    expect(a.liveBuffers()).toEqual([big])
  })

  it('without warm memory allocates fresh zeroed buffers', () => {
    const a = new RankAllocations(undefined)
    const b = a.allocate(2 * MiB)
    expect(new Uint8Array(b).every((x) => x === 0)).toBe(true)
    // Shared, large or small: the checkpoint I/O thread copies domains from them.
    expect(b).toBeInstanceOf(SharedArrayBuffer)
    expect(a.allocate(1000)).toBeInstanceOf(SharedArrayBuffer)
    expect(a.warmBytes).toBe(0)
  })
})

describe('warmSizes and readBufferBytes', () => {
  it("a spare touches the sizes of the rank that asked for the most bytes, in that rank's order", () => {
    expect(warmSizes(new Map())).toEqual([])
    const reports = new Map([
      [0, [8 * MiB, 8 * MiB]],
      [1, [9 * MiB, 8 * MiB, 2 * MiB]],
      [2, [16 * MiB]],
    ])
    expect(warmSizes(reports)).toEqual([9 * MiB, 8 * MiB, 2 * MiB])
  })

  it('rounds read buffers from 1 MiB on up to whole MiB, so that every rank asks for the same size', () => {
    expect(readBufferBytes(1000)).toBe(1000)
    expect(readBufferBytes(MiB - 1)).toBe(MiB - 1)
    expect(readBufferBytes(MiB)).toBe(MiB)
    expect(readBufferBytes(MiB + 1)).toBe(2 * MiB)
    // Two ranks' files of one checkpoint differ by a few header bytes.
    expect(readBufferBytes(16 * MiB + 612)).toBe(readBufferBytes(16 * MiB + 655))
  })
})
