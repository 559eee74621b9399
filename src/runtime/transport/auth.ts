import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { Socket } from 'node:net'

// The handshake that opens every TCP connection of a run (the cluster
// rendezvous and the ranks' links), before any byte is read as a message:
//
//   dialer   → acceptor   MAGIC (8) | Nd (32)
//   acceptor → dialer     Na (32)   | HMAC(K, "acceptor" | context | Nd | Na)
//   dialer   → acceptor   HMAC(K, "dialer" | context | Nd | Na)
//
// K is the run's secret; Nd and Na are fresh random nonces of each side, so
// each side proves it knows K over a nonce it did not choose and a recorded
// exchange is worth nothing later. The two proofs are labelled by role (a
// proof cannot be reflected back to its maker) and by context ("rendezvous",
// "ranks": a rendezvous exchange does not open a rank's port).

/** Opens the dialer's challenge: tells a molotof handshake from a stranger's bytes at once. */
const MAGIC = Buffer.from('molotof\x01', 'latin1')
const NONCE_BYTES = 32
const MAC_BYTES = 32
/** What a handshake waits for the other side before giving up (ms): a stranger that sends nothing is closed by then. */
export const HANDSHAKE_TIMEOUT_MS = 5000
/** The shortest secret accepted (bytes): a guessable secret would defeat the handshake. */
export const MIN_SECRET_BYTES = 16

/** Which end of the connection: the one that connected, or the one that accepted. */
export type HandshakeRole = 'dialer' | 'acceptor'

/** Why a handshake failed: the other side's proof was wrong, its bytes were not a handshake, it fell silent, or it hung up. */
export interface HandshakeFailure {
  kind: 'proof' | 'protocol' | 'timeout' | 'closed'
  /** One line, naming no secret. */
  why: string
}

/** The proof of `role` over both nonces. */
function handshakeProof(key: Uint8Array, role: HandshakeRole, context: string, dialerNonce: Uint8Array, acceptorNonce: Uint8Array): Buffer {
  return createHmac('sha256', key).update(`molotof ${role} ${context}\0`).update(dialerNonce).update(acceptorNonce).digest()
}

/**
 * Run the handshake on a connected `socket` as `role`: resolves undefined once
 * both sides proved they know `key`, else the failure (the socket is then
 * destroyed; nothing it sent was read as a message). On success the socket is
 * paused and any bytes that followed the handshake are pushed back on it: the
 * next reader attaches its 'data' listener and calls `socket.resume()`.
 *
 * ```ts
 * const failed = await handshake(socket, key, 'acceptor', 'ranks')
 * if (failed) log(`refused ${socket.remoteAddress}: ${failed.why}`)
 * ```
 */
export function handshake(socket: Socket, key: Uint8Array, role: HandshakeRole, context: string, timeoutMs = HANDSHAKE_TIMEOUT_MS): Promise<HandshakeFailure | undefined> {
  return new Promise((resolve) => {
    const myNonce = randomBytes(NONCE_BYTES)
    let theirNonce: Buffer | undefined
    let pending: Buffer = Buffer.alloc(0)
    let step = 0
    let done = false
    const finish = (failure: HandshakeFailure | undefined, rest?: Buffer) => {
      if (done) return
      done = true
      clearTimeout(timer)
      socket.off('data', onData)
      socket.off('error', onError)
      socket.off('close', onClose)
      if (failure) {
        socket.destroy()
      } else {
        socket.pause()
        if (rest && rest.length > 0) socket.unshift(rest)
      }
      resolve(failure)
    }
    /** Take `n` bytes once they are all there. */
    const take = (n: number): Buffer | undefined => {
      if (pending.length < n) return undefined
      const out = pending.subarray(0, n)
      pending = pending.subarray(n)
      return out
    }
    const fail = (kind: HandshakeFailure['kind'], why: string) => finish({ kind, why })
    const verify = (answer: Buffer, theirRole: HandshakeRole, dialerNonce: Buffer, acceptorNonce: Buffer): boolean =>
      timingSafeEqual(answer, handshakeProof(key, theirRole, context, dialerNonce, acceptorNonce))
    const onData = (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
      if (role === 'acceptor') {
        if (step === 0) {
          const challenge = take(MAGIC.length + NONCE_BYTES)
          if (!challenge) {
            if (!MAGIC.subarray(0, Math.min(pending.length, MAGIC.length)).equals(pending.subarray(0, MAGIC.length))) fail('protocol', 'it did not start with the molotof handshake')
            return
          }
          if (!challenge.subarray(0, MAGIC.length).equals(MAGIC)) return fail('protocol', 'it did not start with the molotof handshake')
          theirNonce = Buffer.from(challenge.subarray(MAGIC.length))
          socket.write(Buffer.concat([myNonce, handshakeProof(key, 'acceptor', context, theirNonce, myNonce)]))
          step = 1
        }
        const answer = take(MAC_BYTES)
        if (!answer) return
        if (!verify(answer, 'dialer', theirNonce!, myNonce)) return fail('proof', "its answer to the challenge was wrong (not this run's secret)")
        return finish(undefined, pending)
      }
      const reply = take(NONCE_BYTES + MAC_BYTES)
      if (!reply) return
      theirNonce = Buffer.from(reply.subarray(0, NONCE_BYTES))
      if (!verify(reply.subarray(NONCE_BYTES), 'acceptor', myNonce, theirNonce)) return fail('proof', "it did not prove it knows this run's secret")
      socket.write(handshakeProof(key, 'dialer', context, myNonce, theirNonce))
      finish(undefined, pending)
    }
    const onError = () => {} // 'close' follows
    const onClose = () => fail('closed', 'it closed the connection during the handshake')
    const timer = setTimeout(() => fail('timeout', `it did not complete the handshake within ${(timeoutMs / 1000).toFixed(1)} s`), timeoutMs)
    timer.unref()
    socket.on('data', onData)
    socket.on('error', onError)
    socket.on('close', onClose)
    if (role === 'dialer') socket.write(Buffer.concat([MAGIC, myNonce]))
  })
}

/** The peer's address as a log line names it (`host:port`). */
export function peerAddress(socket: Socket): string {
  const host = socket.remoteAddress?.startsWith('::ffff:') ? socket.remoteAddress.slice(7) : (socket.remoteAddress ?? '?')
  return `${host}:${socket.remotePort ?? '?'}`
}
