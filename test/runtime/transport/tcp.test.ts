import { randomBytes } from 'node:crypto'
import { createConnection } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import type { JacobiResult } from '../../../examples/jacobi/jacobi.js'
import type { Communicator } from '../../../src/routing/communicator.js'
import { launch } from '../../../src/runtime/launch/launcher.js'
import { connectTcpCommunicator, type TcpEndpoint } from '../../../src/runtime/transport/tcp.js'

const open: Communicator[] = []
afterEach(() => {
  for (const c of open.splice(0)) c.close()
})

/** An endpoint exchange in one process: resolves for everyone once all `size` ranks have announced. */
function exchange(size: number, spy?: (all: TcpEndpoint[]) => void) {
  const all: TcpEndpoint[] = new Array(size)
  let count = 0
  let done: (v: TcpEndpoint[]) => void = () => {}
  const ready = new Promise<TcpEndpoint[]>((r) => (done = r))
  return (rank: number) => (mine: TcpEndpoint) => {
    all[rank] = mine
    if (++count === size) {
      spy?.(all)
      done(all)
    }
    return ready
  }
}

async function group(size: number, generation = 1, onRefused?: (why: string) => void, spy?: (all: TcpEndpoint[]) => void): Promise<Communicator[]> {
  const ex = exchange(size, spy)
  const comms = await Promise.all(
    Array.from({ length: size }, (_, r) => connectTcpCommunicator(r, size, { host: '127.0.0.1', generation, exchange: ex(r), onRefused })),
  )
  open.push(...comms)
  return comms
}

function pattern(src: number, dst: number, length: number): Uint8Array {
  const b = new Uint8Array(length)
  for (let i = 0; i < length; i++) b[i] = (src * 31 + dst * 7 + i) & 255
  return b
}

/** A raw 16-byte frame header plus payload, as a peer would write it. */
function frame(kind: number, tag: number, payload: Uint8Array): Buffer {
  const h = Buffer.alloc(16 + payload.byteLength)
  h.writeUInt32LE(payload.byteLength, 0)
  h.writeUInt32LE(kind, 4)
  h.writeDoubleLE(tag, 8)
  h.set(payload, 16)
  return h
}

describe('TCP transport', () => {
  it('delivers every pair, small and large, byte for byte, in order per tag', async () => {
    const comms = await group(3)
    const sizes = [0, 5, 16 * 1024, 16 * 1024 + 1, 3 << 20]
    const sends: Promise<void>[] = []
    for (const c of comms) for (let d = 0; d < 3; d++) for (const [k, n] of sizes.entries()) sends.push(c.send(d, k, pattern(c.rank, d, n)))
    for (const c of comms) {
      for (let s = 0; s < 3; s++) {
        for (const [k, n] of sizes.entries()) {
          const m = await c.recv(s, k)
          expect(Buffer.from(m.bytes).equals(Buffer.from(pattern(s, c.rank, n)))).toBe(true)
          m.release()
        }
      }
    }
    await Promise.all(sends)
    expect(await Promise.all(comms.map((c) => c.allreduce(c.rank + 0.5, 'sum')))).toEqual([4.5, 4.5, 4.5])
  })

  /**
   * Rank 0 of generation 5 listening, rank 1 not started yet: `knock` connects
   * to rank 0 first and writes `bytes`; then rank 1 joins. Returns the linked
   * pair and what rank 0 refused.
   */
  async function strangerFirst(bytes: Buffer): Promise<{ comms: Communicator[]; refused: string[] }> {
    const refused: string[] = []
    const ex = exchange(2)
    let rank0: TcpEndpoint | undefined
    const first = connectTcpCommunicator(0, 2, {
      host: '127.0.0.1',
      generation: 5,
      exchange: (mine) => {
        rank0 = mine
        return ex(0)(mine)
      },
      onRefused: (w) => refused.push(w),
    })
    while (!rank0) await new Promise((r) => setTimeout(r, 2))
    const stranger = createConnection({ host: rank0.host, port: rank0.port })
    stranger.on('error', () => {})
    await new Promise<void>((r) => stranger.once('connect', () => r()))
    stranger.write(bytes)
    await new Promise<void>((r) => stranger.once('close', () => r())) // rank 0 drops it
    const second = connectTcpCommunicator(1, 2, { host: '127.0.0.1', generation: 5, exchange: ex(1) })
    const comms = await Promise.all([first, second])
    open.push(...comms)
    return { comms, refused }
  }

  it('refuses a connection of an older generation, its messages undelivered, and still links the current one', async () => {
    const hello = new Uint8Array(8)
    new DataView(hello.buffer).setUint32(0, 2, true)
    new DataView(hello.buffer).setUint32(4, 4, true)
    // A straggler of attempt 4: a well-formed handshake, then a message it hopes gets delivered.
    const { comms, refused } = await strangerFirst(Buffer.concat([frame(1, 1, hello), frame(2, 9, new Uint8Array([6, 6, 6]))]))
    expect(refused.join('\n')).toMatch(/connection of attempt 4 from rank 1 was refused \(this is attempt 5\)/)
    expect(comms[0].recvNow!(1, 9)).toBeUndefined()
    await comms[1].send(0, 9, new Uint8Array([1, 2]))
    expect([...(await comms[0].recv(1, 9)).bytes]).toEqual([1, 2])
  })

  it('refuses a message sent before any handshake', async () => {
    const { comms, refused } = await strangerFirst(frame(2, 9, new Uint8Array([6, 6, 6])))
    expect(refused.join('\n')).toMatch(/did not start with a molotof handshake/)
    expect(comms[0].recvNow!(1, 9)).toBeUndefined()
  })

  it("a stranger's well-formed frame of the current attempt, on a port of ranks with a secret: refused, logged with its address, never delivered", async () => {
    const key = randomBytes(32)
    const refused: string[] = []
    const ex = exchange(2)
    let rank0: TcpEndpoint | undefined
    const first = connectTcpCommunicator(0, 2, {
      host: '127.0.0.1',
      generation: 5,
      key,
      exchange: (mine) => {
        rank0 = mine
        return ex(0)(mine)
      },
      onRefused: (w) => refused.push(w),
    })
    while (!rank0) await new Promise((r) => setTimeout(r, 2))
    // It knows the generation and the frame format: a HELLO of rank 1 in attempt 5, then a message.
    const hello = new Uint8Array(8)
    new DataView(hello.buffer).setUint32(0, 2, true)
    new DataView(hello.buffer).setUint32(4, 5, true)
    const stranger = createConnection({ host: rank0.host, port: rank0.port })
    stranger.on('error', () => {})
    await new Promise<void>((r) => stranger.once('connect', () => r()))
    const where = `127.0.0.1:${stranger.localPort}`
    stranger.write(Buffer.concat([frame(1, 1, hello), frame(2, 9, new Uint8Array([6, 6, 6]))]))
    await new Promise<void>((r) => stranger.once('close', () => r())) // rank 0 drops it
    const second = connectTcpCommunicator(1, 2, { host: '127.0.0.1', generation: 5, key, exchange: ex(1) })
    const comms = await Promise.all([first, second])
    open.push(...comms)
    expect(refused).toEqual([`rank 0: refused a connection from ${where}: it did not start with the molotof handshake`])
    expect(comms[0].recvNow!(1, 9)).toBeUndefined()
    await comms[1].send(0, 9, new Uint8Array([1, 2]))
    expect([...(await comms[0].recv(1, 9)).bytes]).toEqual([1, 2])
  })

  it('ranks given different secrets do not link: the dialling rank fails, naming its peer and the secret', async () => {
    const ex = exchange(2)
    const refused: string[] = []
    const results = await Promise.allSettled([
      connectTcpCommunicator(0, 2, { host: '127.0.0.1', generation: 1, key: randomBytes(32), exchange: ex(0), timeoutMs: 3000, onRefused: (w) => refused.push(w) }),
      connectTcpCommunicator(1, 2, { host: '127.0.0.1', generation: 1, key: randomBytes(32), exchange: ex(1), timeoutMs: 3000 }),
    ])
    for (const r of results) if (r.status === 'fulfilled') open.push(r.value)
    expect(results[1].status).toBe('rejected')
    expect(String((results[1] as PromiseRejectedResult).reason)).toMatch(/rank 1: rank 0 at 127\.0\.0\.1:\d+ failed the handshake: it did not prove it knows this run's secret \(the nodes were given different secrets/)
    expect(results[0].status).toBe('rejected') // timed out: rank 1 never linked
    expect(refused.join('\n')).toMatch(/rank 0: refused a connection from 127\.0\.0\.1:\d+: it closed the connection during the handshake/)
  })

  it('a peer lost without a goodbye fails pending receives after the grace period, naming a lost node as a cause', async () => {
    let rank0: TcpEndpoint | undefined
    const joining = connectTcpCommunicator(0, 2, {
      host: '127.0.0.1',
      generation: 5,
      lostPeerGraceMs: 100,
      exchange: async (mine) => {
        rank0 = mine
        return [mine, { host: '127.0.0.1', port: 1 }]
      },
    })
    while (!rank0) await new Promise((r) => setTimeout(r, 2))
    // A well-formed rank 1 of attempt 5, written by hand, then its connection dies.
    const peer = createConnection({ host: rank0.host, port: rank0.port })
    peer.on('error', () => {})
    await new Promise<void>((r) => peer.once('connect', () => r()))
    const hello = new Uint8Array(8)
    new DataView(hello.buffer).setUint32(0, 2, true)
    new DataView(hello.buffer).setUint32(4, 5, true)
    peer.write(Buffer.concat([frame(1, 1, hello), frame(2, 3, new Uint8Array([4]))]))
    const comm = await joining
    open.push(comm)
    expect([...(await comm.recv(1, 3)).bytes]).toEqual([4])
    const pending = comm.recv(1, 2)
    const t0 = performance.now()
    peer.destroy()
    await expect(pending).rejects.toThrow(/rank 0: the connection to rank 1 closed unexpectedly \(the rank exited, was killed, or its node was lost\); no message with tag 2/)
    expect(performance.now() - t0).toBeGreaterThanOrEqual(99) // not before the grace period (1 ms for timer rounding)
    await expect(comm.send(1, 2, new Uint8Array(1))).rejects.toThrow(/connection to rank 1 closed unexpectedly .*; cannot send to it \(tag 2\)/)
  })

  it('times out naming the missing ranks, and the endpoint table when it never came', async () => {
    const never = () => new Promise<readonly TcpEndpoint[]>(() => {})
    await expect(connectTcpCommunicator(0, 3, { host: '127.0.0.1', generation: 1, exchange: never, timeoutMs: 300 })).rejects.toThrow(
      /rank 0: timed out after 0\.3 s waiting for ranks 1, 2 to connect \(the endpoint table never came\)/,
    )
  })

  it('--transport tcp gives each attempt\'s ranks one random key, in their environment only, without the launcher\'s secret', async () => {
    type Seen = { keyAtStart: string | null; keyInEnv: string | null; secretInEnv: string | null; keyOnCommandLine: boolean }
    process.env.MOLOTOF_SECRET = 'a secret of the launcher, not for ranks'
    try {
      const tcp = await launch<Seen>('test/fixtures/rank-key.ts', { ranks: 2, argv: [], onLog: () => {}, transport: 'tcp' })
      const key = tcp.values[0].keyAtStart
      expect(key).toMatch(/^[0-9a-f]{64}$/)
      for (const v of tcp.values) expect(v).toEqual({ keyAtStart: key, keyInEnv: null, secretInEnv: null, keyOnCommandLine: false })
      const again = await launch<Seen>('test/fixtures/rank-key.ts', { ranks: 2, argv: [], onLog: () => {}, transport: 'tcp' })
      expect(again.values[0].keyAtStart).not.toBe(key)
      // Unix sockets in a private directory need no key.
      const unix = await launch<Seen>('test/fixtures/rank-key.ts', { ranks: 2, argv: [], onLog: () => {}, transport: 'processes' })
      expect(unix.values[0].keyAtStart).toBeNull()
    } finally {
      delete process.env.MOLOTOF_SECRET
    }
  })

  it('Jacobi over --transport tcp gives the bits of the Unix-socket transport', async () => {
    const argv = ['--n', '45', '--iterations', '30', '--return-rows']
    const opts = { ranks: 3, argv, onLog: () => {}, hangTimeoutMs: 20_000 }
    const [tcp, unix] = await Promise.all([
      launch<JacobiResult>('examples/jacobi/jacobi.ts', { ...opts, transport: 'tcp' }),
      launch<JacobiResult>('examples/jacobi/jacobi.ts', { ...opts, transport: 'processes' }),
    ])
    for (let r = 0; r < 3; r++) {
      expect(tcp.values[r].rows!.first).toBe(unix.values[r].rows!.first)
      expect(Buffer.from(tcp.values[r].rows!.values.buffer).equals(Buffer.from(unix.values[r].rows!.values.buffer))).toBe(true)
    }
    expect(tcp.value.checksum).toBe(unix.value.checksum)
  })
})
