import type { Socket } from 'node:net'
import { deserialize, serialize } from 'node:v8'
import { CommunicationError, ConfigError, type ErrorRecord } from '../../errors.js'
import { handshake, peerAddress } from '../transport/auth.js'
import type { RankExit, RankGroupSpec, RankWhere } from '../group.js'
import type { LauncherToRank, RankToLauncher } from '../protocol.js'
import type { RanksOrigin } from '../groups/spares.js'
import type { HostPort } from '../cluster-env.js'
import type { Injection } from '../inject.js'
import type { MembershipView } from './membership.js'

/** What a coordinator holds that a successor needs to go on: where the run's supervisor was (see Supervisor.handover). */
export interface CoordinatorState {
  /** The attempt running when this was sent. */
  attempt: number
  /** Failures counted so far (the restart budget). */
  failures: number
  /** Why a stop with a checkpoint was asked for, when one was. */
  preempt: string | undefined
  /** Injected failures that fired already (`--inject`): a successor does not fire them again. */
  fired: Injection[]
  /** Nodes lost so far, under every coordinator (the final summary counts them). */
  losses: number
}

/**
 * What the coordinator tells every node with each attempt and membership
 * change: enough for the lowest-numbered survivor to take the role over
 * when the coordinator is lost (see ClusterLeader.succeed).
 */
export interface ClusterView {
  membership: MembershipView
  /** The members of the last membership every live member acknowledged: a partition's majority is counted among them. */
  settled: number[]
  coordinator: number
  /** Where each node other than the coordinator listens for the others should it become the coordinator. */
  endpoints: Record<number, HostPort>
  /** The last attempt's generation: a successor's attempts number on from it. */
  generation: number
  run: CoordinatorState
}

/** What a node supervisor says about itself when it joins node 0; every field must match node 0's (see `identity`). */
export interface JoinRequest {
  t: 'join'
  node: number
  nodes: number
  /** Settings and program digest that must be equal on every node, by name (shown in a refusal). */
  identity: Record<string, string>
  /** Which machine and checkpoint directory: nodes on one machine sharing one directory are refused. */
  machine: string
  dir: string
  /** Where this node listens should it become the coordinator (a successor's followers join there). */
  takeover?: HostPort
  /** Joining a successor: the last view this node was told (the successor adopts the newest). */
  view?: ClusterView
  /** Joining a successor: the furthest step this node's ranks had reached when the coordinator was lost (the successor reports the loss at it). */
  reached?: { skeleton: number; step: number }
}

/** One rank's heartbeat as its node saw it: rank, ms since its last beat, where it was. */
export type RemoteBeat = [rank: number, agoMs: number, where: RankWhere]

/** Node supervisor → the coordinator (node 0, or its successor). `gen` is the attempt's generation: the coordinator drops messages of any other. */
export type AgentMessage =
  | JoinRequest
  | { t: 'rank'; gen: number; m: RankToLauncher }
  /** A rank ended; `where` is its last heartbeat's place (a killed rank's last word), so node 0 names it exactly. */
  | { t: 'exit'; gen: number; rank: number; how: RankExit; where: RankWhere }
  | { t: 'beats'; gen: number; beats: RemoteBeat[] }
  | { t: 'stopped'; gen: number }
  /** How this node got the attempt's ranks (kept processes, a spare node's warm ones, new ones): added into the attempt's `ranksFrom`. */
  | { t: 'origin'; gen: number; origin: RanksOrigin }
  /** A signal reached this node's supervisor (SIGTERM from the batch system): node 0 preempts the run. */
  | { t: 'preempt'; why: string }
  /** This node holds the view of `epoch` (the coordinator settles a membership once every live member has it). */
  | { t: 'view-ack'; epoch: number }

/** The coordinator (node 0, or its successor) → node supervisor. */
export type LeaderMessage =
  | { t: 'welcome' }
  /** Refused at the rendezvous; `error` is an ErrorRecord of the reason. */
  | { t: 'refused'; error: ErrorRecord }
  /** Start this attempt's `ranks` on the node (the global ranks of its place in the membership). */
  | { t: 'start'; gen: number; spec: RankGroupSpec; ranks: number[] }
  /** To a spare node: touch buffers of these sizes ahead in its warm rank processes (warm-memory.ts). */
  | { t: 'warm'; sizes: number[] }
  | { t: 'peers'; gen: number; endpoints: Array<{ host: string; port: number }> }
  | { t: 'to-rank'; gen: number; rank: number; m: LauncherToRank }
  | { t: 'kill'; gen: number; rank: number; signal: NodeJS.Signals }
  | { t: 'stop'; gen: number }
  | { t: 'ping' }
  /** The membership and the coordinator's state, to answer with view-ack (see ClusterView). */
  | { t: 'view'; view: ClusterView }
  /** Node 0 counts this node as lost (silent past --node-timeout) and goes on without it; the connection closes next. */
  | { t: 'dropped'; why: string }
  /** This side of a partition lost the majority and stops (see decideSide): exit 76 without writing the run's outcome. */
  | { t: 'stand-down'; why: string }
  /** The run is over: exit with this code. */
  | { t: 'finish'; code: number }

/**
 * One control connection between node supervisors: messages as
 * `u32 length | v8.serialize(message)`, so typed arrays in rank results cross
 * as they are. `onClose` runs once, when the connection ends for any reason.
 *
 * ```ts
 * const wire = new Wire<LeaderMessage, AgentMessage>(socket, (m) => handle(m), () => lost())
 * wire.send({ t: 'join', … })
 * ```
 */
export class Wire<In, Out> {
  private pending: Buffer = Buffer.alloc(0)
  private closed = false
  /** performance.now() of the last message received. */
  lastHeard = performance.now()

  constructor(
    readonly socket: Socket,
    private readonly onMessage: (m: In) => void,
    private readonly onClose: (why: string) => void,
  ) {
    socket.setNoDelay(true)
    socket.on('data', (chunk: Buffer) => this.push(chunk))
    socket.on('error', () => {}) // 'close' follows
    socket.on('close', () => this.end('the connection closed'))
    // A handshake leaves the socket paused, with what followed it pushed back.
    socket.resume()
  }

  send(m: Out): void {
    if (this.closed || this.socket.destroyed || this.socket.writableEnded) return
    const body = serialize(m)
    const head = Buffer.allocUnsafe(4)
    head.writeUInt32LE(body.length, 0)
    this.socket.write(Buffer.concat([head, body]))
  }

  /** Flush what was sent, then close. */
  close(): void {
    if (!this.socket.destroyed) this.socket.end()
  }

  get isClosed(): boolean {
    return this.closed
  }

  private push(chunk: Buffer): void {
    this.lastHeard = performance.now()
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk])
    while (this.pending.length >= 4 && !this.closed) {
      const n = this.pending.readUInt32LE(0)
      if (this.pending.length < 4 + n) return
      const body = this.pending.subarray(4, 4 + n)
      this.pending = this.pending.subarray(4 + n)
      let m: In
      try {
        m = deserialize(body) as In
      } catch {
        // Not a message of ours: drop the connection, and onClose says why.
        this.socket.destroy()
        this.end('a message could not be decoded (not a molotof node supervisor?)')
        return
      }
      this.onMessage(m)
    }
  }

  private end(why: string): void {
    if (this.closed) return
    this.closed = true
    this.onClose(why)
  }
}

/** What the rendezvous handshakes prove knowledge of the secret for (a rank's port does not take them). */
const RENDEZVOUS_CONTEXT = 'rendezvous'

/**
 * Node 0's side of the rendezvous handshake on a new connection: true once
 * the other side proved it knows the run's secret (or there is none:
 * --insecure-cluster); else false, the connection closed unread and one
 * line logged naming its address.
 *
 * ```ts
 * if (await admitConnection(socket, key, log)) new Wire(socket, …)
 * ```
 */
export async function admitConnection(socket: Socket, key: Uint8Array | undefined, log: (text: string) => void, self = 0): Promise<boolean> {
  if (!key) return true
  const from = peerAddress(socket)
  const failed = await handshake(socket, key, 'acceptor', RENDEZVOUS_CONTEXT)
  if (failed) log(`warning: node ${self}: refused a connection to the rendezvous from ${from}: ${failed.why}`)
  return !failed
}

/**
 * A node's side of the rendezvous handshake: resolves once node 0 proved it
 * knows the run's secret and was answered; rejects with ConfigError when its
 * proof was wrong (the nodes were given different secrets), else with
 * CommunicationError. `where` names the rendezvous in the message.
 *
 * ```ts
 * await proveToLeader(socket, key, 1, '10.0.0.1:29500')
 * ```
 */
export async function proveToLeader(socket: Socket, key: Uint8Array | undefined, node: number, where: string, timeoutMs?: number): Promise<void> {
  if (!key) return
  const failed = await handshake(socket, key, 'dialer', RENDEZVOUS_CONTEXT, timeoutMs)
  if (!failed) return
  if (failed.kind === 'proof') {
    throw new ConfigError(
      `node ${node}: the rendezvous at ${where} failed the handshake: ${failed.why}; the nodes were given different secrets ` +
        '(MOLOTOF_SECRET, or the secret file in --shared-dir: is that directory really shared?), or another process holds that port',
    )
  }
  throw new CommunicationError(`node ${node}: the handshake with the rendezvous at ${where} failed: ${failed.why}`)
}
