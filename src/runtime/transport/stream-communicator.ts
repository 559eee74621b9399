import { createServer, type Server, type ServerOpts, type Socket } from 'node:net'
import { plainAllocator, type BufferAllocator } from '../../domains/dtype.js'
import { CommunicationError, ConfigError } from '../../errors.js'
import { SENT, type Message } from '../../routing/communicator.js'
import { PointToPointCommunicator } from './collectives.js'
import { BYE, COALESCE_BYTES, DATA, FrameReader, HELLO, MAX_PAYLOAD, writeFrame } from './frames.js'
import { Mailbox } from './mailbox.js'
import { MessagePool } from './message-pool.js'

/**
 * The timings of both stream transports (Unix sockets and TCP), in one
 * place: how long the rendezvous waits for every peer, how long a dropped
 * connection waits before failing what involves it (the launcher sees the
 * dead rank first and blames it), and the backoff of a dial to a peer not
 * listening yet (doubling from the first delay up to the longest).
 */
export const STREAM_DEFAULTS = Object.freeze({
  rendezvousTimeoutMs: 30_000,
  lostPeerGraceMs: 1000,
  dialFirstDelayMs: 5,
  dialLongestDelayMs: 100,
})

/**
 * A transport over byte streams, one per pair of ranks: the Unix-socket
 * transport (`SocketCommunicator`, sockets.ts) and the TCP transport
 * (`TcpCommunicator`, tcp.ts) are this class plus how they listen, dial and
 * shake hands. It holds the mailbox, send and receive, the frame reading
 * (frames.ts), the grace period after a lost peer, the goodbye on close, and
 * the rendezvous (listen, dial the lower ranks, accept the higher ones, wait
 * until every pair is linked). Every received payload is copied once into a
 * pooled buffer of its own (8-byte aligned, reused once released); a send up
 * to 16 KiB is copied next to its header and returns SENT, a larger one
 * resolves once the kernel has the bytes, so the caller may then reuse its
 * memory.
 *
 * ```ts
 * class PipeCommunicator extends StreamCommunicator {
 *   protected listen() { return this.serve((server) => server.listen(myPath), myPath) }
 *   protected connect(peer: number) { return createConnection(paths[peer]) }
 *   // … connectPeers, notListeningYet, endpointName, whereMissing, hello, readHello, lossCauses
 * }
 * const comm = new PipeCommunicator(rank, size, 1000)
 * await comm.rendezvous(30_000)
 * ```
 */
export abstract class StreamCommunicator extends PointToPointCommunicator {
  /** Plain memory; a rank process installs its RankAllocations' (warm spares, warm-memory.ts). */
  allocator: BufferAllocator = plainAllocator
  private readonly sockets: Array<Socket | undefined>
  /** Every socket opened, identified or not (all are dropped if the rendezvous fails). */
  private readonly opened = new Set<Socket>()
  private readonly saidBye: boolean[]
  /** performance.now() when each peer's connection was found lost. */
  private readonly lostAt: Array<number | undefined>
  private readonly inbox: Mailbox
  private readonly pool = new MessagePool()
  private closed = false
  /** Large sends the kernel has not taken yet: closing fails them, as a peer that stopped reading (hung) never takes them. */
  private readonly pendingSends = new Set<(e: Error) => void>()
  /** Failures held back by the grace period after a lost peer: closing runs them at once (nothing waits to blame a rank then). */
  private readonly graceWaits = new Set<() => void>()
  /** Set once the rendezvous is over (linked or failed): dialling stops. */
  private stopDialing = false
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
    this.inbox = new Mailbox()
  }

  // What a transport says: where it listens, how it reaches a peer, its handshake.

  /** Open the server that accepts the higher ranks (`serve` does the common part). */
  protected abstract listen(): Promise<Server>
  /**
   * Start linking the lower ranks: call `dialLower` once their endpoints are
   * known; `fail` fails the rendezvous. `server` is this rank's, listening.
   */
  protected abstract connectPeers(server: Server, fail: (err: Error) => void): void
  /** A new connection to `peer`'s endpoint (connecting). */
  protected abstract connect(peer: number): Socket
  /** Whether a failed connection's error code means the peer is not accepting yet (dial again). */
  protected abstract notListeningYet(code: string | undefined): boolean
  /** `peer`'s endpoint, as error messages name it. */
  protected abstract endpointName(peer: number): string
  /** Where the `missing` ranks were awaited, for the timeout message (inside its parentheses). */
  protected abstract whereMissing(missing: readonly number[]): string
  /** The HELLO payload this rank sends to the lower ranks it dials. */
  protected abstract hello(): Uint8Array
  /**
   * The group size announced by the first frame of an accepted connection, or
   * undefined when the connection is refused (the transport has dropped it,
   * through `protocolError` when that must fail the rendezvous).
   */
  protected abstract readHello(socket: Socket, kind: number, tag: number, payload: Uint8Array): number | undefined
  /** How a peer may have been lost, for the messages of failed receives and sends. */
  protected abstract readonly lossCauses: string
  /** Runs once the rendezvous is over, linked or failed (the server is closed). */
  protected rendezvousEnded(): void {}
  /**
   * The handshake that must succeed on a new connection before any frame is
   * read (TCP: the run's secret, auth.ts), or undefined when there is none
   * (Unix sockets live in a private directory). `peer` is the dialled rank,
   * undefined on an accepted connection. Resolves false when the connection
   * was refused (dropped and reported); rejects to fail the rendezvous.
   */
  protected authenticate(_socket: Socket, _peer: number | undefined): Promise<boolean> | undefined {
    return undefined
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
      this.pendingSends.add(reject)
      writeFrame(socket, DATA, tag, bytes, (err) => {
        this.pendingSends.delete(reject)
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
    // A send to a lost peer waits out the grace; closed (an abort from the launcher), it fails now, or the run's
    // end (which waits for its background partner copies) would wait for the grace too.
    for (const fail of [...this.graceWaits]) fail()
    const closed = new CommunicationError(`rank ${this.rank}: communicator closed`)
    for (const fail of this.pendingSends) fail(closed)
    this.pendingSends.clear()
    for (const s of this.sockets) {
      if (!s || s.destroyed || s.writableEnded) continue
      // end() flushes queued writes first, so messages already sent still arrive.
      writeFrame(s, BYE, this.rank, new Uint8Array(0), undefined)
      s.end()
    }
  }

  /** Listen, connect to the lower ranks, and wait until every peer is linked (or `timeoutMs` passes). */
  async rendezvous(timeoutMs: number): Promise<void> {
    if (this.size === 1) return
    const server = await this.listen()
    let timer: NodeJS.Timeout | undefined
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
                `${missing.join(', ')} to connect (${this.whereMissing(missing)})`,
            ),
          )
        }, timeoutMs)
        this.connectPeers(server, reject)
      })
    } catch (e) {
      for (const s of this.opened) s.destroy()
      throw e
    } finally {
      this.stopDialing = true
      this.onPeerChange = undefined
      clearTimeout(timer)
      // Every pair is linked (or we gave up): nobody else may connect.
      server.close()
      this.rendezvousEnded()
    }
  }

  /** A server that adopts every connection it accepts, once `bind` has it listening (`where` names the place in errors). */
  protected serve(bind: (server: Server) => void, where: string, options: ServerOpts = {}): Promise<Server> {
    const server = createServer(options, (socket) => this.accept(socket))
    return new Promise<Server>((resolve, reject) => {
      server.once('error', (e) => reject(new CommunicationError(`rank ${this.rank}: cannot listen on ${where}: ${e.message}`)))
      server.once('listening', () => resolve(server))
      bind(server)
    })
  }

  /** Dial every lower rank (their endpoints must be known); `fail` fails the rendezvous. */
  protected dialLower(fail: (err: Error) => void): void {
    for (let peer = 0; peer < this.rank; peer++) this.dial(peer).catch(fail)
  }

  /** Connect to a lower rank, retrying while it is not listening yet. */
  private async dial(peer: number): Promise<void> {
    for (let delay: number = STREAM_DEFAULTS.dialFirstDelayMs; !this.stopDialing; delay = Math.min(STREAM_DEFAULTS.dialLongestDelayMs, delay * 2)) {
      const socket = await new Promise<Socket | undefined>((resolve, reject) => {
        const s = this.connect(peer)
        s.once('connect', () => resolve(s))
        s.once('error', (e: NodeJS.ErrnoException) => {
          s.destroy()
          if (this.notListeningYet(e.code)) resolve(undefined)
          else reject(new CommunicationError(`rank ${this.rank}: cannot connect to rank ${peer} at ${this.endpointName(peer)}: ${e.message}`))
        })
      })
      if (socket) {
        if (this.stopDialing) {
          socket.destroy()
          return
        }
        const auth = this.authenticate(socket, peer)
        if (auth) {
          this.opened.add(socket)
          if (!(await auth) || this.stopDialing) return void socket.destroy()
        }
        writeFrame(socket, HELLO, this.rank, this.hello(), undefined)
        this.adopt(socket, peer)
        return
      }
      await new Promise((r) => setTimeout(r, delay))
    }
  }

  /** An accepted connection: read once its handshake (if any) has succeeded. */
  private accept(socket: Socket): void {
    const auth = this.authenticate(socket, undefined)
    if (!auth) return this.adopt(socket, undefined)
    this.opened.add(socket)
    socket.once('close', () => this.opened.delete(socket))
    auth.then(
      (ok) => {
        if (ok && !socket.destroyed) this.adopt(socket, undefined)
      },
      () => socket.destroy(),
    )
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
    // A handshake leaves the socket paused, with what followed it pushed back.
    socket.resume()
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
    const theirSize = this.readHello(socket, kind, tag, payload)
    if (theirSize === undefined) return undefined
    const peer = tag
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

  /** Drop `socket` and fail the rendezvous (if one is under way) with a protocol error. */
  protected protocolError(socket: Socket, what: string): false {
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
    if (wait <= 0 || this.closed) return fail()
    const once = () => {
      if (!this.graceWaits.delete(once)) return
      clearTimeout(timer)
      fail()
    }
    const timer = setTimeout(once, wait)
    this.graceWaits.add(once)
  }

  private lostError(peer: number, what: string): CommunicationError {
    const why = this.saidBye[peer]
      ? `rank ${peer} closed its communicator`
      : `the connection to rank ${peer} closed unexpectedly (${this.lossCauses})`
    return new CommunicationError(`rank ${this.rank}: ${why}; ${what}`)
  }

  private socket(peer: number): Socket {
    const s = this.sockets[peer]
    if (peer !== this.rank && !s) throw new ConfigError(`rank ${this.rank}: no channel to rank ${peer} (size ${this.size})`)
    return s as Socket
  }
}

/** The release of a message sent to oneself: its bytes are a fresh copy, nothing to give back. */
const noRelease = (): void => {}
