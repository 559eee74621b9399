import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { plainAllocator } from '../domains/dtype.js'
import { CommunicationError, ConfigError } from '../errors.js'
import { SENT, type Communicator, type Message } from '../routing/communicator.js'
import { PointToPointCommunicator } from './collectives.js'
import { BYE, COALESCE_BYTES, DATA, FrameReader, HELLO, MAX_PAYLOAD, writeFrame } from './frames.js'
import { Mailbox } from './mailbox.js'
import { MessagePool } from './message-pool.js'

/** Where a rank listens. */
export interface TcpEndpoint {
  host: string
  port: number
}

export interface TcpConnectOptions {
  /** The address this rank listens on (its node's address; `127.0.0.1` on one host). */
  host: string
  /** The attempt's generation: connections of another generation are refused. */
  generation: number
  /** Publish this rank's endpoint and get every rank's, in rank order (through the launcher). */
  exchange: (mine: TcpEndpoint) => Promise<readonly TcpEndpoint[]>
  /** Give up when some peer has not connected after this long (ms, default 30 s). */
  timeoutMs?: number
  /** After a peer's connection drops without a goodbye, wait this long (ms, default 1000) before failing what involves it. */
  lostPeerGraceMs?: number
  /** Told about every connection refused (another generation, a stranger). */
  onRefused?: (why: string) => void
}

/** Size of the HELLO payload on TCP: u32 group size, u32 generation. */
const HELLO_BYTES = 8

/**
 * Join the TCP transport: listen on `host` (a port the system chooses),
 * publish the endpoint, connect to every lower rank and accept every higher
 * one (one connection per pair, Nagle off), and resolve once all peers are
 * linked. The frames are those of the Unix-socket transport (frames.ts); the
 * handshake also carries the attempt's generation, and a connection of another
 * generation is refused and dropped, so a straggler of an earlier attempt can
 * never deliver a message to this one.
 *
 * ```ts
 * const comm = await connectTcpCommunicator(rank, size, { host: '10.0.0.2', generation: 3, exchange })
 * await comm.send(1 - rank, 7, bytes)
 * ```
 */
export async function connectTcpCommunicator(rank: number, size: number, options: TcpConnectOptions): Promise<Communicator> {
  if (!Number.isInteger(size) || size < 1) throw new ConfigError(`tcp: bad group size ${size}`)
  if (!Number.isInteger(rank) || rank < 0 || rank >= size) throw new ConfigError(`tcp: rank ${rank} is outside 0..${size - 1}`)
  if (!Number.isInteger(options.generation) || options.generation < 0 || options.generation > 0xffffffff) {
    throw new ConfigError(`tcp: bad generation ${options.generation}`)
  }
  const comm = new TcpCommunicator(rank, size, options.generation, options.lostPeerGraceMs ?? 1000, options.onRefused ?? (() => {}))
  await comm.rendezvous(options, options.timeoutMs ?? 30_000)
  return comm
}

/**
 * The TCP transport: one connection per pair of ranks, binary frames, no
 * Nagle delay. Same memory rules as the Unix-socket transport: a received
 * payload is copied once into a pooled buffer; a send up to 16 KiB is copied
 * next to its header and returns SENT, a larger one resolves once the kernel
 * has the bytes.
 */
class TcpCommunicator extends PointToPointCommunicator {
  readonly allocator = plainAllocator
  private readonly sockets: Array<Socket | undefined>
  private readonly opened = new Set<Socket>()
  private readonly saidBye: boolean[]
  private readonly lostAt: Array<number | undefined>
  private readonly inbox: Mailbox
  private readonly pool = new MessagePool()
  private closed = false
  private onPeerChange: ((err?: Error) => void) | undefined

  constructor(
    readonly rank: number,
    readonly size: number,
    readonly generation: number,
    private readonly graceMs: number,
    private readonly onRefused: (why: string) => void,
  ) {
    super()
    this.sockets = new Array(size).fill(undefined)
    this.saidBye = new Array(size).fill(false)
    this.lostAt = new Array(size).fill(undefined)
    this.inbox = new Mailbox(size)
  }

  send(dest: number, tag: number, bytes: Uint8Array): Promise<void> {
    if (dest === this.rank) {
      this.inbox.deliver(dest, tag, { bytes: bytes.slice(), release: () => {} })
      return SENT
    }
    const socket = this.socket(dest)
    if (this.closed) return Promise.reject(new CommunicationError(`rank ${this.rank}: cannot send to rank ${dest}: communicator closed`))
    if (bytes.byteLength > MAX_PAYLOAD) return Promise.reject(new ConfigError(`rank ${this.rank}: message of ${bytes.byteLength} bytes is too large (max 4 GiB)`))
    if (socket.destroyed || socket.writableEnded) {
      return new Promise<void>((_resolve, reject) => this.afterGrace(dest, () => reject(this.lostError(dest, `cannot send to it (tag ${tag})`))))
    }
    if (bytes.byteLength <= COALESCE_BYTES) {
      writeFrame(socket, DATA, tag, bytes, undefined)
      return SENT
    }
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
      writeFrame(s, BYE, this.rank, new Uint8Array(0), undefined)
      s.end()
    }
  }

  async rendezvous(options: TcpConnectOptions, timeoutMs: number): Promise<void> {
    if (this.size === 1) return
    const server = await this.listen(options.host)
    const address = server.address()
    const port = typeof address === 'object' && address ? address.port : 0
    let timer: NodeJS.Timeout | undefined
    let stopConnecting = false
    let endpoints: readonly TcpEndpoint[] = []
    try {
      await new Promise<void>((resolve, reject) => {
        this.onPeerChange = (err) => {
          if (err) reject(err)
          else if (this.missing().length === 0) resolve()
        }
        timer = setTimeout(() => {
          const missing = this.missing()
          const where = endpoints.length === 0 ? 'the endpoint table never came' : `at ${missing.map((r) => `${endpoints[r].host}:${endpoints[r].port}`).join(', ')}`
          reject(
            new CommunicationError(
              `rank ${this.rank}: timed out after ${(timeoutMs / 1000).toFixed(1)} s waiting for rank${missing.length > 1 ? 's' : ''} ${missing.join(', ')} to connect (${where})`,
            ),
          )
        }, timeoutMs)
        options.exchange({ host: options.host, port }).then((all) => {
          if (all.length !== this.size) return reject(new CommunicationError(`rank ${this.rank}: got ${all.length} endpoints for ${this.size} ranks`))
          endpoints = all
          this.onPeerChange?.()
          for (let peer = 0; peer < this.rank; peer++) this.dial(peer, all[peer], () => stopConnecting).catch(reject)
        }, reject)
      })
    } catch (e) {
      for (const s of this.opened) s.destroy()
      throw e
    } finally {
      stopConnecting = true
      this.onPeerChange = undefined
      clearTimeout(timer)
      server.close()
    }
  }

  private listen(host: string): Promise<Server> {
    const server = createServer({ noDelay: true }, (socket) => this.adopt(socket, undefined))
    return new Promise<Server>((resolve, reject) => {
      server.once('error', (e) => reject(new CommunicationError(`rank ${this.rank}: cannot listen on ${host}: ${e.message}`)))
      server.listen(0, host, () => resolve(server))
    })
  }

  /** Connect to a lower rank, retrying briefly while it is not accepting yet. */
  private async dial(peer: number, at: TcpEndpoint, stop: () => boolean): Promise<void> {
    for (let delay = 5; !stop(); delay = Math.min(100, delay * 2)) {
      const socket = await new Promise<Socket | undefined>((resolve, reject) => {
        const s = createConnection({ host: at.host, port: at.port, noDelay: true })
        s.once('connect', () => resolve(s))
        s.once('error', (e: NodeJS.ErrnoException) => {
          s.destroy()
          if (e.code === 'ECONNREFUSED' || e.code === 'EAGAIN' || e.code === 'ECONNRESET') resolve(undefined)
          else reject(new CommunicationError(`rank ${this.rank}: cannot connect to rank ${peer} at ${at.host}:${at.port}: ${e.message}`))
        })
      })
      if (socket) {
        if (stop()) {
          socket.destroy()
          return
        }
        const hello = new Uint8Array(HELLO_BYTES)
        const v = new DataView(hello.buffer)
        v.setUint32(0, this.size, true)
        v.setUint32(4, this.generation, true)
        writeFrame(socket, HELLO, this.rank, hello, undefined)
        this.adopt(socket, peer)
        return
      }
      await new Promise((r) => setTimeout(r, delay))
    }
  }

  private adopt(socket: Socket, known: number | undefined): void {
    let peer = known
    socket.setNoDelay(true)
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

  /** The peer an accepted connection's HELLO names, or undefined when it is refused (the socket is then dropped). */
  private identify(socket: Socket, kind: number, tag: number, payload: Uint8Array): number | undefined {
    if (kind !== HELLO || payload.byteLength !== HELLO_BYTES) {
      // A stranger, or a message sent before any handshake: never delivered.
      this.refuse(socket, `a connection from ${socket.remoteAddress}:${socket.remotePort} did not start with a molotof handshake`)
      return undefined
    }
    const v = new DataView(payload.buffer, payload.byteOffset, HELLO_BYTES)
    const theirSize = v.getUint32(0, true)
    const theirGeneration = v.getUint32(4, true)
    if (theirGeneration !== this.generation) {
      this.refuse(socket, `a connection of attempt ${theirGeneration} from rank ${tag} was refused (this is attempt ${this.generation})`)
      return undefined
    }
    const peer = tag
    if (theirSize !== this.size || !Number.isInteger(peer) || peer <= this.rank || peer >= this.size || this.sockets[peer]) {
      this.protocolError(socket, `unexpected handshake from rank ${peer} of a group of ${theirSize} (this is rank ${this.rank} of ${this.size})`)
      return undefined
    }
    this.link(peer, socket)
    return peer
  }

  private refuse(socket: Socket, why: string): void {
    socket.destroy()
    this.onRefused(`rank ${this.rank}: ${why}`)
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

  private afterGrace(peer: number, fail: () => void): void {
    const lost = (this.lostAt[peer] ??= performance.now())
    const wait = this.saidBye[peer] ? 0 : this.graceMs - (performance.now() - lost)
    if (wait <= 0) fail()
    else setTimeout(fail, wait)
  }

  private lostError(peer: number, what: string): CommunicationError {
    const why = this.saidBye[peer]
      ? `rank ${peer} closed its communicator`
      : `the connection to rank ${peer} closed unexpectedly (the rank exited, was killed, or its node was lost)`
    return new CommunicationError(`rank ${this.rank}: ${why}; ${what}`)
  }

  private socket(peer: number): Socket {
    const s = this.sockets[peer]
    if (peer !== this.rank && !s) throw new ConfigError(`rank ${this.rank}: no channel to rank ${peer} (size ${this.size})`)
    return s as Socket
  }
}
