import { unlinkSync } from 'node:fs'
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { plainAllocator } from '../domains/dtype.js'
import { CommunicationError, ConfigError } from '../errors.js'
import { PointToPointCommunicator } from './collectives.js'
import { SENT, type Communicator, type Message } from '../routing/communicator.js'
import { Mailbox } from './mailbox.js'
import { MessagePool } from './message-pool.js'
import { BYE, COALESCE_BYTES, DATA, FrameReader, HELLO, MAX_PAYLOAD, writeFrame } from './frames.js'

// The wire format (16-byte frame header, HELLO/DATA/BYE) is in frames.ts, shared with the TCP transport.

export interface SocketConnectOptions {
  /** Give up when some peer has not connected after this long (ms, default 30 s). */
  timeoutMs?: number
  /**
   * After a peer's connection drops without a goodbye, wait this long (ms,
   * default 1000) before failing the receives and sends that involve it. The
   * launcher sees the dead rank first and blames it, instead of the survivor
   * that would otherwise report "connection lost" a moment earlier.
   */
  lostPeerGraceMs?: number
}

/**
 * Join the processes transport: listen on `endpoints[rank]` (a Unix socket
 * path), connect to every lower rank, and resolve once all `size - 1` peers
 * are linked (one socket per pair). Rejects naming the missing ranks if some
 * peer never shows up.
 *
 * ```ts
 * const comm = await connectSocketCommunicator(rank, size, ['/tmp/x/0.sock', '/tmp/x/1.sock'])
 * await comm.send(1 - rank, 7, bytes)
 * ```
 */
export async function connectSocketCommunicator(
  rank: number,
  size: number,
  endpoints: readonly string[],
  options: SocketConnectOptions = {},
): Promise<Communicator> {
  if (!Number.isInteger(size) || size < 1) throw new ConfigError(`sockets: bad group size ${size}`)
  if (!Number.isInteger(rank) || rank < 0 || rank >= size) throw new ConfigError(`sockets: rank ${rank} is outside 0..${size - 1}`)
  if (endpoints.length !== size) throw new ConfigError(`sockets: ${endpoints.length} endpoints for ${size} ranks`)
  const comm = new SocketCommunicator(rank, size, options.lostPeerGraceMs ?? 1000)
  await comm.rendezvous(endpoints, options.timeoutMs ?? 30_000)
  return comm
}

/**
 * The processes transport: one Unix domain socket per pair of ranks, binary
 * frames. Every received payload is copied once into a pooled buffer of its
 * own (8-byte aligned, reused once released); a send up to 16 KiB is copied
 * next to its header and returns SENT, a larger one resolves once the
 * kernel has the bytes, so the caller may then reuse its memory.
 */
class SocketCommunicator extends PointToPointCommunicator {
  readonly allocator = plainAllocator
  private readonly sockets: Array<Socket | undefined>
  /** Every socket opened, identified or not (all are dropped if the rendezvous fails). */
  private readonly opened = new Set<Socket>()
  private readonly saidBye: boolean[]
  /** performance.now() when each peer's connection was found lost. */
  private readonly lostAt: Array<number | undefined>
  private readonly inbox: Mailbox
  private readonly pool = new MessagePool()
  private closed = false
  /** Called when a peer gets linked, or the rendezvous must fail. */
  private onPeerChange: ((err?: Error) => void) | undefined

  constructor(
    readonly rank: number,
    readonly size: number,
    private readonly graceMs: number,
  ) {
    super()
    this.sockets = new Array(size).fill(undefined)
    this.saidBye = new Array(size).fill(false)
    this.lostAt = new Array(size).fill(undefined)
    this.inbox = new Mailbox(size)
  }

  send(dest: number, tag: number, bytes: Uint8Array): Promise<void> {
    if (dest === this.rank) {
      // slice() copies into a fresh ArrayBuffer: aligned, and independent of the caller's memory.
      this.inbox.deliver(dest, tag, { bytes: bytes.slice(), release: noRelease })
      return SENT
    }
    const socket = this.socket(dest)
    if (this.closed) return Promise.reject(new CommunicationError(`rank ${this.rank}: cannot send to rank ${dest}: communicator closed`))
    if (bytes.byteLength > MAX_PAYLOAD) return Promise.reject(new ConfigError(`rank ${this.rank}: message of ${bytes.byteLength} bytes is too large (max 4 GiB)`))
    if (socket.destroyed || socket.writableEnded) return this.sendToLost(dest, tag)
    if (bytes.byteLength <= COALESCE_BYTES) {
      // Copied next to its header: the caller may reuse its memory at once. A
      // failed write closes the socket, and 'close' fails what depends on the peer.
      writeFrame(socket, DATA, tag, bytes, undefined)
      return SENT
    }
    return this.sendLarge(socket, dest, tag, bytes)
  }

  // The closures of a send live in these methods: inside `send` they would
  // make every call allocate their shared context, small frames included.
  private sendToLost(dest: number, tag: number): Promise<void> {
    return new Promise<void>((_resolve, reject) => this.afterGrace(dest, () => reject(this.lostError(dest, `cannot send to it (tag ${tag})`))))
  }

  private sendLarge(socket: Socket, dest: number, tag: number, bytes: Uint8Array): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      writeFrame(socket, DATA, tag, bytes, (err) => {
        if (!err) resolve()
        else this.afterGrace(dest, () => reject(this.lostError(dest, `send failed (tag ${tag}): ${err.message}`)))
      })
    })
  }

  recv(src: number, tag: number): Promise<Message> {
    this.socket(src)
    return this.inbox.take(src, tag)
  }

  recvNow(src: number, tag: number): Message | undefined {
    return this.inbox.takeNow(src, tag)
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    this.inbox.fail(new CommunicationError(`rank ${this.rank}: communicator closed`))
    for (const s of this.sockets) {
      if (!s || s.destroyed || s.writableEnded) continue
      // end() flushes queued writes first, so messages already sent still arrive.
      writeFrame(s, BYE, this.rank, new Uint8Array(0), undefined)
      s.end()
    }
  }

  /** Listen, connect to lower ranks, and wait until every peer is linked. */
  async rendezvous(endpoints: readonly string[], timeoutMs: number): Promise<void> {
    if (this.size === 1) return
    const path = endpoints[this.rank]
    const server = await this.listen(path)
    let timer: NodeJS.Timeout | undefined
    let stopConnecting = false
    try {
      await new Promise<void>((resolve, reject) => {
        this.onPeerChange = (err) => {
          if (err) reject(err)
          else if (this.missing().length === 0) resolve()
        }
        this.onPeerChange()
        timer = setTimeout(() => {
          const missing = this.missing()
          reject(
            new CommunicationError(
              `rank ${this.rank}: timed out after ${(timeoutMs / 1000).toFixed(1)} s waiting for rank${missing.length > 1 ? 's' : ''} ` +
                `${missing.join(', ')} to connect (sockets ${missing.map((r) => endpoints[r]).join(', ')})`,
            ),
          )
        }, timeoutMs)
        for (let peer = 0; peer < this.rank; peer++) {
          this.dial(peer, endpoints[peer], () => stopConnecting).catch(reject)
        }
      })
    } catch (e) {
      for (const s of this.opened) s.destroy()
      throw e
    } finally {
      stopConnecting = true
      this.onPeerChange = undefined
      clearTimeout(timer)
      // Every pair is linked (or we gave up): nobody else may connect.
      server.close()
      removeQuietly(path)
    }
  }

  private listen(path: string): Promise<Server> {
    removeQuietly(path) // a stale socket file from an earlier run would make listen fail
    const server = createServer((socket) => this.adopt(socket, undefined))
    return new Promise<Server>((resolve, reject) => {
      server.once('error', (e) => reject(new CommunicationError(`rank ${this.rank}: cannot listen on ${path}: ${e.message}`)))
      server.listen(path, () => resolve(server))
    })
  }

  /** Connect to a lower rank, retrying while it is not listening yet. */
  private async dial(peer: number, path: string, stop: () => boolean): Promise<void> {
    for (let delay = 5; !stop(); delay = Math.min(100, delay * 2)) {
      const socket = await new Promise<Socket | undefined>((resolve, reject) => {
        const s = createConnection(path)
        s.once('connect', () => resolve(s))
        s.once('error', (e: NodeJS.ErrnoException) => {
          s.destroy()
          if (e.code === 'ENOENT' || e.code === 'ECONNREFUSED' || e.code === 'EAGAIN') resolve(undefined)
          else reject(new CommunicationError(`rank ${this.rank}: cannot connect to rank ${peer} at ${path}: ${e.message}`))
        })
      })
      if (socket) {
        if (stop()) {
          socket.destroy()
          return
        }
        const hello = new Uint8Array(4)
        new DataView(hello.buffer).setUint32(0, this.size, true)
        writeFrame(socket, HELLO, this.rank, hello, undefined)
        this.adopt(socket, peer)
        return
      }
      await new Promise((r) => setTimeout(r, delay))
    }
  }

  /** Take charge of a socket; `peer` is undefined for an accepted one until its HELLO arrives. */
  private adopt(socket: Socket, known: number | undefined): void {
    let peer = known
    this.opened.add(socket)
    if (peer !== undefined) this.link(peer, socket)
    const reader = new FrameReader(this.pool, (kind, tag, payload) => {
      if (peer === undefined) {
        peer = this.identify(socket, kind, tag, payload.bytes)
        payload.release()
        return peer !== undefined
      }
      if (kind === DATA) {
        this.inbox.deliver(peer, tag, payload)
        return true
      }
      payload.release()
      if (kind === BYE) this.saidBye[peer] = true
      else return this.protocolError(socket, `unexpected frame kind ${kind} from rank ${peer}`)
      return true
    })
    socket.on('data', (chunk: Buffer) => reader.push(chunk))
    socket.on('error', () => {}) // 'close' follows and reports
    socket.on('close', () => {
      this.opened.delete(socket)
      if (peer === undefined || this.sockets[peer] !== socket) return
      if (this.onPeerChange) this.onPeerChange(new CommunicationError(`rank ${this.rank}: rank ${peer} disconnected while the ranks were connecting`))
      const lost = peer
      this.lostAt[lost] ??= performance.now()
      if (!this.closed) this.afterGrace(lost, () => this.inbox.failPeer(lost, (tag) => this.lostError(lost, `no message with tag ${tag} can arrive`)))
    })
  }

  private identify(socket: Socket, kind: number, tag: number, payload: Uint8Array): number | undefined {
    const peer = tag
    if (kind !== HELLO || payload.byteLength !== 4) {
      this.protocolError(socket, 'a connection did not start with a handshake')
      return undefined
    }
    const theirSize = new DataView(payload.buffer, payload.byteOffset, 4).getUint32(0, true)
    if (theirSize !== this.size || !Number.isInteger(peer) || peer <= this.rank || peer >= this.size || this.sockets[peer]) {
      this.protocolError(socket, `unexpected handshake from rank ${peer} of a group of ${theirSize} (this is rank ${this.rank} of ${this.size})`)
      return undefined
    }
    this.link(peer, socket)
    return peer
  }

  private link(peer: number, socket: Socket): void {
    this.sockets[peer] = socket
    this.onPeerChange?.()
  }

  private protocolError(socket: Socket, what: string): false {
    const err = new CommunicationError(`rank ${this.rank}: protocol error: ${what}`)
    socket.destroy()
    this.onPeerChange?.(err)
    return false
  }

  private missing(): number[] {
    const m: number[] = []
    for (let r = 0; r < this.size; r++) if (r !== this.rank && !this.sockets[r]) m.push(r)
    return m
  }

  /** Run `fail` once the grace period after losing `peer` is over (at once if it said goodbye). */
  private afterGrace(peer: number, fail: () => void): void {
    const lost = (this.lostAt[peer] ??= performance.now())
    const wait = this.saidBye[peer] ? 0 : this.graceMs - (performance.now() - lost)
    if (wait <= 0) fail()
    else setTimeout(fail, wait)
  }

  private lostError(peer: number, what: string): CommunicationError {
    const why = this.saidBye[peer]
      ? `rank ${peer} closed its communicator`
      : `the connection to rank ${peer} closed unexpectedly (the rank exited or was killed)`
    return new CommunicationError(`rank ${this.rank}: ${why}; ${what}`)
  }

  private socket(peer: number): Socket {
    const s = this.sockets[peer]
    if (peer !== this.rank && !s) throw new ConfigError(`rank ${this.rank}: no channel to rank ${peer} (size ${this.size})`)
    return s as Socket
  }
}

const noRelease = (): void => {}



function removeQuietly(path: string): void {
  try {
    unlinkSync(path)
  } catch {
    // Usually absent already. Any other failure is safe to leave: before listening, listen() then
    // fails and says why; after the rendezvous, the launcher deletes the whole socket directory.
  }
}
