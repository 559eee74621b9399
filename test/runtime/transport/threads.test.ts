import fc from 'fast-check'
import { MessageChannel } from 'node:worker_threads'
import { describe, expect, it } from 'vitest'
import { channelHeaders, ThreadCommunicator } from '../../../src/runtime/transport/threads.js'

/** Two thread communicators in this thread (their channels work the same; recvNow must not block here). */
function pair(): [ThreadCommunicator, ThreadCommunicator] {
  const ch = new MessageChannel()
  const h = channelHeaders(2)
  return [
    new ThreadCommunicator(0, 2, [undefined, ch.port1], h[0], { blockMs: 0 }),
    new ThreadCommunicator(1, 2, [ch.port2, undefined], h[1], { blockMs: 0 }),
  ]
}

/** Bytes that identify (message index, position), in a plain or a shared buffer. */
function payload(i: number, size: number, shared: boolean): Uint8Array {
  const b = new Uint8Array(shared ? new SharedArrayBuffer(size) : new ArrayBuffer(size))
  for (let k = 0; k < size; k++) b[k] = (i * 31 + k * 7) & 0xff
  return b
}

const same = (x: Uint8Array, y: Uint8Array) => Buffer.from(x.buffer, x.byteOffset, x.byteLength).equals(Buffer.from(y.buffer, y.byteOffset, y.byteLength))

describe('threads transport (rings and ports)', () => {
  it('delivers every message with its bytes, in send order per tag, across ring, ring overflow and port', async () => {
    const message = fc.record({
      size: fc.oneof(fc.integer({ min: 0, max: 64 }), fc.integer({ min: 1000, max: 70_000 }), fc.constant(150_000)),
      tag: fc.integer({ min: -3, max: 3 }),
      shared: fc.boolean(),
    })
    await fc.assert(
      fc.asyncProperty(fc.array(message, { minLength: 1, maxLength: 25 }), fc.boolean(), async (msgs, now) => {
        const [a, b] = pair()
        try {
          // Send everything first: the ring (256 KiB) overflows to the port on the way.
          const sends = msgs.map((m, i) => a.send(1, m.tag, payload(i, m.size, m.shared)))
          const byTag = new Map<number, number[]>()
          msgs.forEach((m, i) => byTag.set(m.tag, [...(byTag.get(m.tag) ?? []), i]))
          // Receive tag by tag (not in send order): each tag's messages must come in order.
          for (const [tag, idx] of [...byTag].reverse()) {
            for (const i of idx) {
              const got = (now ? b.recvNow(0, tag) : undefined) ?? (await b.recv(0, tag))
              expect(same(got.bytes, payload(i, msgs[i].size, false))).toBe(true)
              got.release()
            }
          }
          await Promise.all(sends)
        } finally {
          a.close()
          b.close()
        }
      }),
      { numRuns: 30 },
    )
  })

  it('wakes a receive that waits on the event loop when the message comes later', async () => {
    const [a, b] = pair()
    try {
      const late = b.recv(0, 5)
      await new Promise((r) => setTimeout(r, 20))
      a.send(1, 5, payload(1, 100, false))
      expect((await late).bytes).toEqual(payload(1, 100, false))
      // And again, with the ring already known.
      const later = b.recv(0, 6)
      await new Promise((r) => setTimeout(r, 5))
      a.send(1, 6, payload(2, 10, false))
      expect((await later).bytes).toEqual(payload(2, 10, false))
    } finally {
      a.close()
      b.close()
    }
  })

  it('a receive waiting on the event loop still wakes when another receive from the same peer pulled its bell off the port', async () => {
    const [a, b] = pair()
    try {
      // The ring a → b exists already (its creation goes by port, and would wake b by itself).
      a.send(1, 3, payload(0, 8, false))
      ;(await b.recv(0, 3)).release()
      // b waits for tag 1 on the event loop: a's next message rings the bell.
      const waiting = b.recv(0, 1)
      // Two messages too large for the ring: on the port, the bell goes between them.
      void a.send(1, 2, payload(1, 100_000, false))
      void a.send(1, 2, payload(2, 100_000, false))
      // b takes them before its event loop turns (as a background transfer does while a collective waits):
      // its pull reads data, bell, data off the port.
      for (const i of [1, 2]) {
        const m = b.recvNow(0, 2)!
        expect(same(m.bytes, payload(i, 100_000, false))).toBe(true)
        m.release()
      }
      // The message the first receive waits for, small, by ring: only a bell wakes b for it.
      a.send(1, 1, payload(3, 8, false))
      const woke = await Promise.race([waiting.then((m) => m.bytes), new Promise<undefined>((r) => setTimeout(r, 2000))])
      expect(woke).toEqual(payload(3, 8, false))
    } finally {
      a.close()
      b.close()
    }
  })

  it('collectives agree across the pair', async () => {
    const [a, b] = pair()
    try {
      expect(await Promise.all([a.allreduce(1.5, 'sum'), b.allreduce(2.25, 'sum')])).toEqual([3.75, 3.75])
      expect(await Promise.all([a.allgather('x'), b.allgather({ y: 1 })])).toEqual([
        ['x', { y: 1 }],
        ['x', { y: 1 }],
      ])
    } finally {
      a.close()
      b.close()
    }
  })
})
