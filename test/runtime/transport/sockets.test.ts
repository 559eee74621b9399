import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { Communicator, Message } from '../../../src/routing/communicator.js'
import { connectSocketCommunicator } from '../../../src/runtime/transport/sockets.js'

const dirs: string[] = []
const open: Communicator[] = []

afterEach(() => {
  for (const c of open.splice(0)) c.close()
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

function endpointsFor(size: number): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'mlt-sock-'))
  dirs.push(dir)
  return Array.from({ length: size }, (_, r) => join(dir, `${r}.sock`))
}

/**
 * Rank 0 here, connected to rank 1 in a child process (test/fixtures/socket-peer.ts),
 * after the peer's first message (tag 1); `body` gets the communicator, the
 * child and that message. The child is killed afterwards whatever happened.
 */
async function withPeerProcess(lostPeerGraceMs: number | undefined, body: (a: Communicator, child: ChildProcess, first: Message) => Promise<void>): Promise<void> {
  const endpoints = endpointsFor(2)
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/socket-peer.ts', '1', ...endpoints], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  try {
    const a = await connectSocketCommunicator(0, 2, endpoints, { timeoutMs: 20_000, ...(lostPeerGraceMs !== undefined ? { lostPeerGraceMs } : {}) })
    open.push(a)
    await body(a, child, await a.recv(1, 1))
  } finally {
    child.kill('SIGKILL')
  }
}

/** `size` communicators of one group, all in this process. */
async function group(size: number, endpoints = endpointsFor(size)): Promise<Communicator[]> {
  const comms = await Promise.all(endpoints.map((_, r) => connectSocketCommunicator(r, size, endpoints)))
  open.push(...comms)
  return comms
}

/** Deterministic bytes for message `seq` from `src` to `dst`. */
function pattern(src: number, dst: number, seq: number, length: number): Uint8Array {
  const b = new Uint8Array(length)
  for (let i = 0; i < length; i++) b[i] = (src * 31 + dst * 7 + seq * 13 + i) & 255
  return b
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength))
}

describe('socket communicator', () => {
  it('delivers messages of every size, per (source, tag) in order, each over its own aligned buffer', async () => {
    const size = 3
    const comms = await group(size)
    const sizes = [0, 1, 7, 13, 4099, 16 * 1024, 16 * 1024 + 1, 3 * 1024 * 1024 + 5, 0, 5]
    const tagOf = (seq: number) => [7, -3, 1e9][seq % 3]
    await Promise.all(
      comms.map(async (comm) => {
        const sends: Promise<void>[] = []
        for (let dst = 0; dst < size; dst++) {
          sizes.forEach((len, seq) => sends.push(comm.send(dst, tagOf(seq), pattern(comm.rank, dst, seq, len))))
        }
        // Receive tag by tag, in the reverse order of sending: matching must not depend on arrival order.
        for (let src = size - 1; src >= 0; src--) {
          for (const tag of [1e9, -3, 7]) {
            for (let seq = 0; seq < sizes.length; seq++) {
              if (tagOf(seq) !== tag) continue
              const m = await comm.recv(src, tag)
              expect(m.bytes.byteLength).toBe(sizes[seq])
              expect(m.bytes.byteOffset % 8).toBe(0)
              expect(sameBytes(m.bytes, pattern(src, comm.rank, seq, sizes[seq]))).toBe(true)
              m.release()
            }
          }
        }
        await Promise.all(sends)
      }),
    )
  })

  it('keeps order through a burst of thousands of small messages on interleaved tags, both ways', async () => {
    const [a, b] = await group(2)
    const count = 6000
    const burst = async (from: Communicator, to: Communicator) => {
      const sends: Promise<void>[] = []
      for (let i = 0; i < count; i++) {
        const bytes = new Uint8Array(4 + (i % 37))
        new DataView(bytes.buffer).setUint32(0, i, true)
        sends.push(from.send(to.rank, i % 3, bytes))
      }
      const next = [0, 1, 2]
      const got = [0, 0, 0]
      for (let i = 0; i < count; i++) {
        const tag = (i * 7) % 3 // a different interleaving than the sender's
        if (next[tag] >= count) continue
        const m = await to.recv(from.rank, tag)
        const seq = new DataView(m.bytes.buffer, m.bytes.byteOffset).getUint32(0, true)
        expect(seq).toBe(next[tag])
        expect(m.bytes.byteLength).toBe(4 + (seq % 37))
        next[tag] += 3
        got[tag]++
        m.release()
      }
      for (let tag = 0; tag < 3; tag++) {
        while (next[tag] < count) {
          const m = await to.recv(from.rank, tag)
          expect(new DataView(m.bytes.buffer, m.bytes.byteOffset).getUint32(0, true)).toBe(next[tag])
          next[tag] += 3
          got[tag]++
        }
      }
      expect(got[0] + got[1] + got[2]).toBe(count)
      await Promise.all(sends)
    }
    await Promise.all([burst(a, b), burst(b, a)])
  })

  it('sends from shared and misaligned memory; a resolved send leaves the caller free to overwrite its bytes', async () => {
    const [a, b] = await group(2)
    const shared = new Float64Array(new SharedArrayBuffer(8 * 1_000_000))
    for (let i = 0; i < shared.length; i++) shared[i] = i * 0.5
    await a.send(1, 4, new Uint8Array(shared.buffer))
    shared.fill(-1) // after the send resolved: must not change what rank 1 receives
    const odd = new Uint8Array(new ArrayBuffer(8 * 100 + 3), 3, 8 * 100)
    const values = Float64Array.from({ length: 100 }, (_, i) => Math.PI * i)
    odd.set(new Uint8Array(values.buffer))
    await a.send(1, 5, odd)
    const m1 = await b.recv(0, 4)
    const f1 = new Float64Array(m1.bytes.buffer, m1.bytes.byteOffset, m1.bytes.byteLength / 8)
    expect(f1.length).toBe(1_000_000)
    expect(f1[0]).toBe(0)
    expect(f1[999_999]).toBe(999_999 * 0.5)
    expect(f1.every((v, i) => v === i * 0.5)).toBe(true)
    const m2 = await b.recv(0, 5)
    expect(m2.bytes.byteOffset % 8).toBe(0)
    expect(Array.from(new Float64Array(m2.bytes.buffer, m2.bytes.byteOffset, 100))).toEqual(Array.from(values))
    expect(a.allocator(16)).toBeInstanceOf(ArrayBuffer)
  })

  it('delivers self-sends locally, as a copy', async () => {
    const [a] = await group(2)
    const bytes = new Uint8Array([1, 2, 3])
    await a.send(0, 9, bytes)
    bytes[0] = 42
    const m = await a.recv(0, 9)
    expect(Array.from(m.bytes)).toEqual([1, 2, 3])
  })

  it('runs the collectives', async () => {
    const comms = await group(4)
    const results = await Promise.all(
      comms.map(async (c) => {
        const sum = await c.allreduce(c.rank + 1, 'sum')
        const max = await c.allreduce(c.rank * 3, 'max')
        const min = await c.allreduce(-c.rank, 'min')
        const all = await c.allgather({ rank: c.rank, name: `r${c.rank}` })
        await c.barrier()
        return { sum, max, min, all }
      }),
    )
    for (const r of results) {
      expect(r).toMatchObject({ sum: 10, max: 9, min: -3 })
      expect(r.all.map((x) => x.name)).toEqual(['r0', 'r1', 'r2', 'r3'])
    }
  })

  it('replaces stale socket files, and a single rank needs no socket at all', async () => {
    const endpoints = endpointsFor(2)
    writeFileSync(endpoints[0], 'stale')
    writeFileSync(endpoints[1], 'stale')
    const [a, b] = await group(2, endpoints)
    await a.send(1, 0, new Uint8Array([5]))
    expect(Array.from((await b.recv(0, 0)).bytes)).toEqual([5])
    const [solo] = await group(1, ['/nonexistent/dir/0.sock'])
    expect(await solo.allreduce(3, 'sum')).toBe(3)
  })

  it('times out naming the ranks that never connected', async () => {
    const endpoints = endpointsFor(3)
    await expect(connectSocketCommunicator(0, 3, endpoints, { timeoutMs: 300 })).rejects.toThrow(/timed out after 0\.3 s waiting for ranks 1, 2 to connect/)
  })

  it('a peer that closes its communicator fails pending receives from it, after delivering what it sent', async () => {
    const [a, b, c] = await group(3)
    const pending = a.recv(1, 5)
    await b.send(0, 6, new Uint8Array([6]))
    b.close()
    await expect(pending).rejects.toThrow(/rank 0: rank 1 closed its communicator; no message with tag 5 can arrive/)
    expect(Array.from((await a.recv(1, 6)).bytes)).toEqual([6]) // already arrived: still delivered
    await expect(a.recv(1, 6)).rejects.toThrow(/rank 1 closed its communicator/)
    await expect(a.send(1, 1, new Uint8Array(1))).rejects.toThrow(/rank 1 closed its communicator; cannot send/)
    // The other peers are unaffected.
    await c.send(0, 5, new Uint8Array([7]))
    expect(Array.from((await a.recv(2, 5)).bytes)).toEqual([7])
    // Closing fails this rank's own pending receives.
    const own = c.recv(0, 99)
    c.close()
    await expect(own).rejects.toThrow(/rank 2: communicator closed/)
  })

  it('a peer process killed outright fails pending receives and sends after a grace period, instead of hanging', async () => {
    await withPeerProcess(300, async (a, child, first) => {
      expect(Array.from(first.bytes)).toEqual([1, 2, 3])
      const pending = a.recv(1, 2)
      const t0 = performance.now()
      child.kill('SIGKILL')
      await expect(pending).rejects.toThrow(/rank 0: the connection to rank 1 closed unexpectedly \(the rank exited or was killed\); no message with tag 2/)
      // Not at once: the launcher gets the grace period to blame the dead rank first.
      const ms = performance.now() - t0
      expect(ms).toBeGreaterThanOrEqual(300)
      expect(ms).toBeLessThan(1300)
      await expect(a.send(1, 3, new Uint8Array(8))).rejects.toThrow(/connection to rank 1 closed unexpectedly .*; (cannot send|send failed)/)
    })
  })

  it('closing the communicator fails a large send that a stopped peer never reads, instead of leaving it pending', async () => {
    await withPeerProcess(undefined, async (a, child) => {
      child.kill('SIGSTOP')
      // More than the socket buffers hold: the kernel cannot take it all while the peer does not read.
      const send = a.send(1, 3, new Uint8Array(32 * 2 ** 20))
      const settled = Promise.allSettled([send])
      await new Promise((r) => setTimeout(r, 200))
      const t0 = performance.now()
      a.close()
      const [s] = await settled
      expect(s.status).toBe('rejected')
      expect(String((s as PromiseRejectedResult).reason)).toMatch(/rank 0: communicator closed/)
      expect(performance.now() - t0).toBeLessThan(1000)
    })
  }, 15_000)

  it('closing the communicator fails a send to a killed peer at once, not after the grace period (a rank told to stop)', async () => {
    await withPeerProcess(5000, async (a, child) => {
      const pending = a.recv(1, 2)
      child.kill('SIGKILL')
      await new Promise((r) => child.once('exit', r))
      // Sent once the connection is gone: held back for the grace period.
      await new Promise((r) => setTimeout(r, 200))
      const send = a.send(1, 3, new Uint8Array(64 * 1024))
      const failed = Promise.allSettled([send, pending])
      const t0 = performance.now()
      a.close()
      const [s, p] = await failed
      expect(s.status).toBe('rejected')
      expect(p.status).toBe('rejected')
      expect(performance.now() - t0).toBeLessThan(1000)
    })
  }, 15_000)
})
