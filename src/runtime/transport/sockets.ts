import { unlinkSync } from 'node:fs'
import { createConnection, type Server, type Socket } from 'node:net'
import { ConfigError } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import { HELLO } from './frames.js'
import { STREAM_DEFAULTS, StreamCommunicator } from './stream-communicator.js'

// The wire format (16-byte frame header, HELLO/DATA/BYE) is in frames.ts, shared with the TCP transport;
// mailbox, sends, receives, lost peers and the rendezvous are StreamCommunicator's (stream-communicator.ts).

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
  const comm = new SocketCommunicator(rank, size, endpoints, options.lostPeerGraceMs ?? STREAM_DEFAULTS.lostPeerGraceMs)
  await comm.rendezvous(options.timeoutMs ?? STREAM_DEFAULTS.rendezvousTimeoutMs)
  return comm
}

/**
 * The processes transport: one Unix domain socket per pair of ranks, binary
 * frames (a `StreamCommunicator` whose endpoints are socket paths known up
 * front). Every received payload is copied once into a pooled buffer of its
 * own (8-byte aligned, reused once released); a send up to 16 KiB is copied
 * next to its header and returns SENT, a larger one resolves once the
 * kernel has the bytes, so the caller may then reuse its memory.
 *
 * ```ts
 * const comm = new SocketCommunicator(rank, 2, ['/tmp/x/0.sock', '/tmp/x/1.sock'], 1000)
 * await comm.rendezvous(30_000)
 * ```
 */
class SocketCommunicator extends StreamCommunicator {
  protected readonly lossCauses = 'the rank exited or was killed'

  constructor(
    rank: number,
    size: number,
    private readonly endpoints: readonly string[],
    graceMs: number,
  ) {
    super(rank, size, graceMs)
  }

  protected listen(): Promise<Server> {
    const path = this.endpoints[this.rank]
    removeQuietly(path) // a stale socket file from an earlier run would make listen fail
    return this.serve((server) => server.listen(path), path)
  }

  protected connectPeers(_server: Server, fail: (err: Error) => void): void {
    this.dialLower(fail)
  }

  protected connect(peer: number): Socket {
    return createConnection(this.endpoints[peer])
  }

  protected notListeningYet(code: string | undefined): boolean {
    // No socket file yet, or nobody accepting on it yet (or the backlog is full).
    return code === 'ENOENT' || code === 'ECONNREFUSED' || code === 'EAGAIN'
  }

  protected endpointName(peer: number): string {
    return this.endpoints[peer]
  }

  protected whereMissing(missing: readonly number[]): string {
    return `sockets ${missing.map((r) => this.endpoints[r]).join(', ')}`
  }

  /** u32 group size. */
  protected hello(): Uint8Array {
    const hello = new Uint8Array(4)
    new DataView(hello.buffer).setUint32(0, this.size, true)
    return hello
  }

  protected readHello(socket: Socket, kind: number, _tag: number, payload: Uint8Array): number | undefined {
    if (kind !== HELLO || payload.byteLength !== 4) {
      this.protocolError(socket, 'a connection did not start with a handshake')
      return undefined
    }
    return new DataView(payload.buffer, payload.byteOffset, 4).getUint32(0, true)
  }

  protected override rendezvousEnded(): void {
    removeQuietly(this.endpoints[this.rank])
  }
}

function removeQuietly(path: string): void {
  try {
    unlinkSync(path)
  } catch {
    // Usually absent already. Any other failure is safe to leave: before listening, listen() then
    // fails and says why; after the rendezvous, the launcher deletes the whole socket directory.
  }
}
