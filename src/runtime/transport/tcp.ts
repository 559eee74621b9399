import { createConnection, type Server, type Socket } from 'node:net'
import { CommunicationError, ConfigError } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import { handshake, peerAddress } from './auth.js'
import { HELLO } from './frames.js'
import { STREAM_DEFAULTS, StreamCommunicator } from './stream-communicator.js'

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
  /**
   * The run's secret: every connection, dialled or accepted, starts with a
   * challenge–response on it (auth.ts) before any frame is read. Absent: no
   * handshake (a cluster run started with --insecure-cluster).
   */
  key?: Uint8Array
  /** How long a handshake waits for the other side (ms, default 5 s). */
  handshakeTimeoutMs?: number
}

/** What the ranks' handshakes prove knowledge of the secret for (a rendezvous exchange does not open a rank's port). */
const RANKS_CONTEXT = 'ranks'

/** Size of the HELLO payload on TCP: u32 group size, u32 generation. */
const HELLO_BYTES = 8

/**
 * Join the TCP transport: listen on `host` (a port the system chooses),
 * publish the endpoint, connect to every lower rank and accept every higher
 * one (one connection per pair, Nagle off), and resolve once all peers are
 * linked. Every connection first passes the challenge–response on the run's
 * secret (`key`, auth.ts): one that fails is closed before any byte of it is
 * read as a frame. The frames are those of the Unix-socket transport
 * (frames.ts); the HELLO also carries the attempt's generation, and a connection of another
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
  const comm = new TcpCommunicator(rank, size, options, options.lostPeerGraceMs ?? STREAM_DEFAULTS.lostPeerGraceMs)
  await comm.rendezvous(options.timeoutMs ?? STREAM_DEFAULTS.rendezvousTimeoutMs)
  return comm
}

/**
 * The TCP transport: one connection per pair of ranks, binary frames, no
 * Nagle delay (a `StreamCommunicator` whose endpoints are exchanged through
 * the launcher once every rank listens). Same memory rules as the Unix-socket
 * transport: a received payload is copied once into a pooled buffer; a send up
 * to 16 KiB is copied next to its header and returns SENT, a larger one
 * resolves once the kernel has the bytes.
 *
 * ```ts
 * const comm = new TcpCommunicator(rank, size, { host: '127.0.0.1', generation: 1, exchange }, 1000)
 * await comm.rendezvous(30_000)
 * ```
 */
class TcpCommunicator extends StreamCommunicator {
  protected readonly lossCauses = 'the rank exited, was killed, or its node was lost'
  readonly generation: number
  private readonly host: string
  private readonly exchange: TcpConnectOptions['exchange']
  private readonly onRefused: (why: string) => void
  private readonly key: Uint8Array | undefined
  private readonly handshakeTimeoutMs: number | undefined
  /** Every rank's endpoint, in rank order, once the exchange has answered. */
  private endpoints: readonly TcpEndpoint[] = []

  constructor(rank: number, size: number, options: TcpConnectOptions, graceMs: number) {
    super(rank, size, graceMs)
    this.generation = options.generation
    this.host = options.host
    this.exchange = options.exchange
    this.onRefused = options.onRefused ?? (() => {})
    this.key = options.key
    this.handshakeTimeoutMs = options.handshakeTimeoutMs
  }

  /**
   * The run's secret, both ways: a connection that fails it is closed unread
   * and reported (accepted), or fails the rendezvous naming the peer (dialled).
   */
  protected override authenticate(socket: Socket, peer: number | undefined): Promise<boolean> | undefined {
    if (!this.key) return undefined
    const from = peerAddress(socket)
    return handshake(socket, this.key, peer === undefined ? 'acceptor' : 'dialer', RANKS_CONTEXT, this.handshakeTimeoutMs).then((failed) => {
      if (!failed) return true
      if (peer === undefined) {
        this.onRefused(`rank ${this.rank}: refused a connection from ${from}: ${failed.why}`)
        return false
      }
      throw new CommunicationError(
        `rank ${this.rank}: rank ${peer} at ${this.endpointName(peer)} failed the handshake: ${failed.why}` +
          (failed.kind === 'proof' ? ' (the nodes were given different secrets, or another process holds that port)' : ''),
      )
    })
  }

  protected listen(): Promise<Server> {
    return this.serve((server) => server.listen(0, this.host), this.host, { noDelay: true })
  }

  /** Publish this rank's endpoint; dial the lower ranks once every endpoint is known. */
  protected connectPeers(server: Server, fail: (err: Error) => void): void {
    const address = server.address()
    const port = typeof address === 'object' && address ? address.port : 0
    this.exchange({ host: this.host, port }).then((all) => {
      if (all.length !== this.size) return fail(new CommunicationError(`rank ${this.rank}: got ${all.length} endpoints for ${this.size} ranks`))
      this.endpoints = all
      this.dialLower(fail)
    }, fail)
  }

  protected connect(peer: number): Socket {
    const at = this.endpoints[peer]
    return createConnection({ host: at.host, port: at.port, noDelay: true })
  }

  protected notListeningYet(code: string | undefined): boolean {
    return code === 'ECONNREFUSED' || code === 'EAGAIN' || code === 'ECONNRESET'
  }

  protected endpointName(peer: number): string {
    return `${this.endpoints[peer].host}:${this.endpoints[peer].port}`
  }

  protected whereMissing(missing: readonly number[]): string {
    return this.endpoints.length === 0 ? 'the endpoint table never came' : `at ${missing.map((r) => this.endpointName(r)).join(', ')}`
  }

  /** u32 group size, u32 generation. */
  protected hello(): Uint8Array {
    const hello = new Uint8Array(HELLO_BYTES)
    const v = new DataView(hello.buffer)
    v.setUint32(0, this.size, true)
    v.setUint32(4, this.generation, true)
    return hello
  }

  /** A stranger or a straggler of another attempt is refused quietly (told to `onRefused`), without failing the rendezvous. */
  protected readHello(socket: Socket, kind: number, tag: number, payload: Uint8Array): number | undefined {
    if (kind !== HELLO || payload.byteLength !== HELLO_BYTES) {
      // A stranger, or a message sent before any handshake: never delivered.
      this.refuse(socket, `a connection from ${socket.remoteAddress}:${socket.remotePort} did not start with a molotof handshake`)
      return undefined
    }
    const v = new DataView(payload.buffer, payload.byteOffset, HELLO_BYTES)
    const theirGeneration = v.getUint32(4, true)
    if (theirGeneration !== this.generation) {
      this.refuse(socket, `a connection of attempt ${theirGeneration} from rank ${tag} was refused (this is attempt ${this.generation})`)
      return undefined
    }
    return v.getUint32(0, true)
  }

  private refuse(socket: Socket, why: string): void {
    socket.destroy()
    this.onRefused(`rank ${this.rank}: ${why}`)
  }
}
