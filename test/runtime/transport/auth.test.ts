import { createHmac, randomBytes } from 'node:crypto'
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { handshake, type HandshakeFailure } from '../../../src/runtime/transport/auth.js'

// The handshake of auth.ts between real sockets on loopback. The proofs a raw
// client computes here are written from the protocol's description (HMAC-SHA256
// over the role, the context and both nonces), independently of the module.

const servers: Server[] = []
afterAll(() => {
  for (const s of servers) s.close()
})

/** A listening server whose accepted sockets are handed out in order. */
async function listener(): Promise<{ port: number; next: () => Promise<Socket> }> {
  const waiting: Socket[] = []
  const takers: Array<(s: Socket) => void> = []
  const server = createServer((s) => {
    const t = takers.shift()
    if (t) t(s)
    else waiting.push(s)
  })
  servers.push(server)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
  const port = (server.address() as { port: number }).port
  return { port, next: () => new Promise<Socket>((r) => (waiting.length > 0 ? r(waiting.shift()!) : takers.push(r))) }
}

async function dial(port: number): Promise<Socket> {
  const s = createConnection({ host: '127.0.0.1', port })
  s.on('error', () => {})
  await new Promise<void>((r) => s.once('connect', () => r()))
  return s
}

/** Read exactly `n` bytes from a raw socket. */
function readBytes(s: Socket, n: number): Promise<Buffer> {
  return new Promise((resolve) => {
    let got = Buffer.alloc(0)
    const on = (c: Buffer) => {
      got = Buffer.concat([got, c])
      if (got.length >= n) {
        s.off('data', on)
        resolve(got.subarray(0, n))
      }
    }
    s.on('data', on)
  })
}

/** Everything a socket delivers from now until it closes. */
function drain(s: Socket): Promise<Buffer> {
  return new Promise((resolve) => {
    const parts: Buffer[] = []
    s.on('data', (c: Buffer) => parts.push(c))
    s.on('close', () => resolve(Buffer.concat(parts)))
    s.resume()
  })
}

const MAGIC = Buffer.from('molotof\x01', 'latin1')
const proof = (key: Buffer, role: string, context: string, nd: Buffer, na: Buffer) =>
  createHmac('sha256', key).update(`molotof ${role} ${context}\0`).update(nd).update(na).digest()

describe('handshake on the run secret', () => {
  it('passes with one secret on both sides and fails with two, whatever the secrets (property)', async () => {
    const { port, next } = await listener()
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 16, maxLength: 64 }), fc.uint8Array({ minLength: 16, maxLength: 64 }), fc.boolean(), async (a, b, same) => {
        const keyA = Buffer.from(a)
        const keyB = same ? Buffer.from(a) : Buffer.from(b)
        const differ = !keyA.equals(keyB)
        const [client, server] = await Promise.all([dial(port), next()])
        const [d, acc] = await Promise.all([handshake(client, keyA, 'dialer', 'ranks', 2000), handshake(server, keyB, 'acceptor', 'ranks', 2000)])
        if (differ) {
          // The dialer checks first: the acceptor's proof is wrong for its secret; the acceptor sees it hang up.
          expect(d?.kind).toBe('proof')
          expect(acc?.kind).toBe('closed')
        } else {
          expect(d).toBeUndefined()
          expect(acc).toBeUndefined()
        }
        client.destroy()
        server.destroy()
      }),
      { numRuns: 25 },
    )
  })

  it('hands the bytes that follow the handshake to the next reader, in order, both ways', async () => {
    const { port, next } = await listener()
    const key = randomBytes(32)
    const [client, server] = await Promise.all([dial(port), next()])
    const acceptor = handshake(server, key, 'acceptor', 'rendezvous')
    expect(await handshake(client, key, 'dialer', 'rendezvous')).toBeUndefined()
    // Written at once after the proof: it may arrive in the proof's own chunk.
    client.write('hello after the handshake')
    expect(await acceptor).toBeUndefined()
    server.write('and back')
    const [atServer, atClient] = [drain(server), drain(client)]
    setTimeout(() => {
      client.end()
      server.end()
    }, 100)
    expect((await atServer).toString()).toBe('hello after the handshake')
    expect((await atClient).toString()).toBe('and back')
  })

  it('a replayed answer fails: the acceptor chose a new nonce', async () => {
    const { port, next } = await listener()
    const key = randomBytes(32)
    // A genuine exchange, recorded from the dialer's side by a raw client that knows the key.
    const nd = randomBytes(32)
    const first = await dial(port)
    const firstServer = await next()
    const firstDone = handshake(firstServer, key, 'acceptor', 'ranks', 2000)
    first.write(Buffer.concat([MAGIC, nd]))
    const reply = await readBytes(first, 64)
    const answer = proof(key, 'dialer', 'ranks', nd, reply.subarray(0, 32))
    first.write(answer)
    expect(await firstDone).toBeUndefined()
    first.destroy()
    // The same bytes, replayed by someone who does not know the key.
    const replay = await dial(port)
    const replayServer = await next()
    const replayDone = handshake(replayServer, key, 'acceptor', 'ranks', 2000)
    replay.write(Buffer.concat([MAGIC, nd, answer]))
    const failed = await replayDone
    expect(failed?.kind).toBe('proof')
    expect(replayServer.destroyed).toBe(true)
    replay.destroy()
  })

  it("the acceptor's own proof sent back, or a proof of another context, fails", async () => {
    const { port, next } = await listener()
    const key = randomBytes(32)
    for (const forge of [(nd: Buffer, reply: Buffer) => reply.subarray(32), (nd: Buffer, reply: Buffer) => proof(key, 'dialer', 'rendezvous', nd, reply.subarray(0, 32))]) {
      const c = await dial(port)
      const s = await next()
      const done = handshake(s, key, 'acceptor', 'ranks', 2000)
      const nd = randomBytes(32)
      c.write(Buffer.concat([MAGIC, nd]))
      const reply = await readBytes(c, 64)
      c.write(forge(nd, reply))
      expect((await done)?.kind).toBe('proof')
      c.destroy()
    }
  })

  it('a truncated answer fails at the deadline, or when the dialer hangs up', async () => {
    const { port, next } = await listener()
    const key = randomBytes(32)
    for (const hangUp of [false, true]) {
      const c = await dial(port)
      const s = await next()
      const t0 = performance.now()
      const done = handshake(s, key, 'acceptor', 'ranks', 300)
      const nd = randomBytes(32)
      c.write(Buffer.concat([MAGIC, nd]))
      const reply = await readBytes(c, 64)
      c.write(proof(key, 'dialer', 'ranks', nd, reply.subarray(0, 32)).subarray(0, 31))
      if (hangUp) c.end()
      const failed: HandshakeFailure | undefined = await done
      expect(failed?.kind).toBe(hangUp ? 'closed' : 'timeout')
      if (!hangUp) {
        expect(failed?.why).toMatch(/did not complete the handshake within 0\.3 s/)
        expect(performance.now() - t0).toBeGreaterThanOrEqual(290)
      }
      c.destroy()
    }
  })

  it("a stranger's message is refused at its first bytes, and nothing is sent to it", async () => {
    const { port, next } = await listener()
    const c = await dial(port)
    const s = await next()
    const heard = drain(c)
    const done = handshake(s, randomBytes(32), 'acceptor', 'ranks', 5000)
    // A well-formed frame of the socket transports (16-byte header, payload).
    const frame = Buffer.alloc(24)
    frame.writeUInt32LE(8, 0)
    frame.writeUInt32LE(1, 4)
    frame.writeDoubleLE(1, 8)
    c.write(frame)
    const failed = await done
    expect(failed).toEqual({ kind: 'protocol', why: 'it did not start with the molotof handshake' })
    expect((await heard).length).toBe(0)
  })

  it("the dialer refuses an acceptor that answers without the secret", async () => {
    const { port, next } = await listener()
    const c = await dial(port)
    const s = await next()
    const done = handshake(c, randomBytes(32), 'dialer', 'ranks', 2000)
    await readBytes(s, 40)
    s.write(randomBytes(64))
    const failed = await done
    expect(failed?.kind).toBe('proof')
    expect(failed?.why).toMatch(/did not prove it knows this run's secret/)
    s.destroy()
  })
})
