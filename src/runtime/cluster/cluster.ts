import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { hostname, networkInterfaces } from 'node:os'
import { join } from 'node:path'
import { CommunicationError, ConfigError, errorRecord, MolotofError, NodeLostError, NodeMismatchError, reviveError, type SettingDifference } from '../../errors.js'
import type { RankToLauncher } from '../protocol.js'
import { RENDEZVOUS_FILE, type ClusterPlace, type HostPort } from '../cluster-env.js'
import type { CompiledProgram } from '../compiled-program.js'
import { admitConnection, proveToLeader, Wire, type AgentMessage, type ClusterView, type CoordinatorState, type JoinRequest, type LeaderMessage, type RemoteBeat } from './cluster-wire.js'
import type { ClusterSecret } from './secret.js'
import type { RankGroup, RankGroupEvents, RankGroupSpec, RankWhere, StartRankGroup } from '../group.js'
import { addOrigin, EndpointTable, NodeHosts, type Listening, type NodeRanks, type NodeRanksOptions } from './node-group.js'
import { decideSide, Membership, membersOf, ranksText, type MembershipChange } from './membership.js'
import { withMembership } from './membership-record.js'
import { warmSizes } from '../rank/warm-memory.js'
import type { RanksOrigin } from '../groups/spares.js'

/** How node supervisors find each other and watch each other. */
export interface ClusterOptions {
  place: ClusterPlace
  ranksPerNode: number
  /** Node 0's address (from `--rendezvous` or MOLOTOF_RENDEZVOUS); else `sharedDir` must be set. */
  rendezvous: HostPort | undefined
  /** A directory every node sees: node 0 writes its address there when `rendezvous` is not given. */
  sharedDir: string | undefined
  /** A node supervisor silent this long is lost; also the limit for the rendezvous (ms). */
  nodeTimeoutMs: number
  /** Period of the supervisors' own heartbeats (ms). */
  beatMs: number
  /** What must be equal on every node (program digest, options, settings), by name. */
  identity: Record<string, string>
  /** This node's checkpoint directory template, resolved (for the one-machine-one-directory check). */
  dir: string
  /** Log a line (warnings about refused stale messages and connections). */
  log?: (text: string) => void
  /** The run's secret: every rendezvous and rank connection starts with a handshake on it (none: --insecure-cluster). */
  secret: ClusterSecret | undefined
  /** The last this many nodes stand by as spare nodes (see Membership); 0 when absent. */
  spareNodes?: number
  /** Heartbeat period of the rank processes (ms): a spare node's warm processes beat at it (default `beatMs`). */
  rankHeartbeatMs?: number
  /** A node's rank processes that stop in time run the next attempt (NodeHosts); false: every attempt starts new ones (default true). */
  keepSurvivors?: boolean
}

/** A node lost during the run, as node 0 saw it: what the membership decided, and where the run was. */
export interface NodeLoss {
  change: MembershipChange
  /** Why the node counts as lost: its connection closed, or it was silent past --node-timeout. */
  why: string
  /** The step its first rank was at (-1 before the first step). */
  skeleton: number
  step: number
}

/** The exit code of a run that lost a node it cannot go on without (the CLI's EXIT.nodeLost), told to the other nodes. */
const NODE_LOST_EXIT = 76

/**
 * How long a node tries to reach the candidate successors (every member
 * below it, all at once), and how long a successor admits the members above
 * it (at most the node timeout). The members notice the coordinator's loss
 * within a beat of each other and search at the same time, so they arrive
 * together. A side without a majority stops once its search ends, mostly the
 * connection wait to the members it cannot reach (candidateConnectMs) (ms).
 */
const ELECTION_WAIT_MS = 5000

function electionWaitMs(opts: ClusterOptions): number {
  return Math.min(opts.nodeTimeoutMs, ELECTION_WAIT_MS)
}

/**
 * How long a candidate successor's TCP connection may take: half the
 * election wait, at least 1 s (one lost SYN). A live node's kernel completes
 * it however busy the node's process is (its listen backlog); the handshake
 * that follows gets the whole election wait. A node cut off never completes
 * it, and this is most of what a minority waits before it stops (ms).
 */
function candidateConnectMs(opts: ClusterOptions): number {
  return Math.max(Math.min(1000, opts.nodeTimeoutMs), electionWaitMs(opts) / 2)
}

/** Why a side without a majority of the last settled membership stops. */
function minorityText(self: number, what: string, settled: readonly number[], live: ReadonlySet<number>): string {
  const side = settled.filter((n) => live.has(n))
  return (
    `node ${self}: ${what}, and this side holds ${side.length} of the ${settled.length} nodes of the last membership (nodes ${side.join(', ')} of ${settled.join(', ')}): ` +
    'not a majority (on a tie, the side holding the lowest-numbered node goes on), so the other side may go on; this side stops without writing the run\'s outcome'
  )
}

/** How long node 0 tries to tell a node dropped for its silence so, before closing its connection outright (ms). */
const SAY_DROPPED_MS = 1000

/** The global ranks of `node`. */
export function ranksOfNode(node: number, ranksPerNode: number): number[] {
  return Array.from({ length: ranksPerNode }, (_, i) => node * ranksPerNode + i)
}

/**
 * The identity of this machine, to tell nodes sharing one host (and so one
 * file system) apart from nodes on different hosts.
 */
export function machineId(): string {
  try {
    return readFileSync('/etc/machine-id', 'utf8').trim() || hostname()
  } catch {
    // No machine-id (not systemd): the host name is the best we have.
    return hostname()
  }
}

interface AgentLink {
  node: number
  wire: Wire<AgentMessage, LeaderMessage>
  lost: boolean
  /** Where it listens should it become the coordinator. */
  takeover: HostPort | undefined
  /** The last view epoch it acknowledged. */
  acked: number
  /** Joining a successor: where its ranks were when the coordinator was lost. */
  reached?: Reached
}

/** A place in the run: skeleton and step (-1, -1 before the first step or when unknown). */
type Reached = { skeleton: number; step: number }

/** The furthest of `places` (-1, -1 when none is known). */
function furthest(places: readonly (Reached | undefined)[]): Reached {
  let best: Reached = { skeleton: -1, step: -1 }
  for (const p of places) if (p && (p.skeleton > best.skeleton || (p.skeleton === best.skeleton && p.step > best.step))) best = { skeleton: p.skeleton, step: p.step }
  return best
}

/**
 * The coordinator of a cluster run (node 0, or the successor that took the
 * role over: see `succeed`): listens at the rendezvous, admits one
 * supervisor per other node (after the handshake on the run's secret, see
 * `admitConnection`; refusing any started differently), and then
 * provides `startGroup`: the ranks of every node as one `RankGroup`, so the
 * ordinary `Supervisor` runs the whole cluster. Each attempt has a generation
 * number; messages of another generation are dropped. A node whose
 * connection closes, or silent past the node timeout, is lost: while this
 * side holds a majority of the last settled membership (`decideSide`) the
 * membership decides (a spare node takes its ranks, the run shrinks, or the
 * attempt ends with NodeLostError); a side without one stops (exit 76) and
 * yields the run's outcome to the other side (`onMinority`, StandDown). With every attempt each node is
 * told the membership and the coordinator's state (a `view`), so that the
 * lowest-numbered survivor can take over should this node be lost.
 *
 * ```ts
 * const leader = await ClusterLeader.open(options)
 * const sup = new Supervisor(file, { ranks: leader.size, startGroup: leader.startGroup, … })
 * try { … } finally { await leader.finish(code) }
 * ```
 */
export class ClusterLeader {
  private readonly agents: AgentLink[] = []
  private generation: number
  /** This node's number: 0, or a successor's. */
  private readonly self: number
  /** The members of the last membership every live member acknowledged (see decideSide). */
  private settled: number[]
  /** Losses decided but not yet held by every live member: reported, and their attempt failed, once they are (see settle). */
  private readonly unsettled: { loss: NodeLoss; attempt: LeaderAttempt | undefined }[] = []
  /** Set when this side lost the majority: why it stops. */
  private minority: string | undefined
  /** Where the run's supervisor is (attempt, failures, preemption), sent with every view. */
  runState: () => Omit<CoordinatorState, 'losses'> = () => ({ attempt: 0, failures: 0, preempt: undefined, fired: [] })
  /** Nodes lost under earlier coordinators. */
  private readonly earlierLosses: number
  /** This side lost the majority: the run's outcome is the other side's to write (see StandDown). */
  onMinority: () => void = () => {}
  private current: LeaderAttempt | undefined
  private pinger: NodeJS.Timeout | undefined
  private host = '127.0.0.1'
  private rendezvousFile: string | undefined
  private finishing = false
  /** The generation of the attempt that runs first after a spare replaced a node or a shrink: a refusal there is the loss's (see LeaderAttempt). */
  private changedFor = -1
  /** Which node carries which ranks, and the spare nodes standing by. */
  readonly membership: Membership
  /** The nodes lost so far (a summary counts them). */
  readonly losses: NodeLoss[] = []
  /** The large buffers each rank reported: spare nodes touch as much ahead (warm-memory.ts). */
  private readonly buffers = new Map<number, number[]>()
  private warm: number[] = []
  /** Set when a node supervisor forwards a signal (SIGTERM from the batch system). */
  onPreempt: (why: string) => void = () => {}
  /** How the last attempt's ranks were obtained: those of a spare node's first attempt from its warm processes. */
  lastOrigin: RanksOrigin | undefined
  /** This node's rank processes, kept across attempts: created with the first attempt (it brings the program), or a successor's own (see succeed). */
  private ownHosts: NodeHosts | undefined
  /** Told of every node lost during the run, once the membership decided (events, log line). */
  onNodeLost: (loss: NodeLoss) => void = () => {}

  private constructor(
    private readonly opts: ClusterOptions,
    private readonly server: Server | undefined,
    from?: ClusterView,
    ownHosts?: NodeHosts,
  ) {
    this.self = opts.place.node
    this.membership = new Membership(opts.place.nodes, opts.spareNodes ?? 0, opts.ranksPerNode, from?.membership)
    this.settled = from ? [...from.settled] : Array.from({ length: opts.place.nodes }, (_, i) => i)
    this.generation = from?.generation ?? 0
    this.earlierLosses = from?.run.losses ?? 0
    this.ownHosts = ownHosts
  }

  /** The run's ranks: working nodes × ranks per node (spare nodes carry none until they replace one). */
  get size(): number {
    return this.membership.slotCount * this.opts.ranksPerNode
  }

  /** Nodes lost during the run, under this coordinator and the earlier ones. */
  get lossCount(): number {
    return this.earlierLosses + this.losses.length
  }

  /** Listen at the rendezvous and wait until every other node has joined (or fail within the node timeout). */
  static async open(opts: ClusterOptions): Promise<ClusterLeader> {
    const { nodes } = opts.place
    if (nodes === 1) return new ClusterLeader(opts, undefined)
    const server = await listenRendezvous(opts)
    const leader = new ClusterLeader(opts, server)
    try {
      await leader.admit(server, Array.from({ length: nodes - 1 }, (_, i) => i + 1), false)
    } catch (e) {
      leader.closeAll()
      throw e
    }
    leader.startPings()
    leader.sendViews()
    return leader
  }

  /**
   * Take the coordinator's role over from `lost` (this node is the
   * lowest-numbered member it could reach, see runClusterAgent): admit the
   * members above it (only they may follow it) at this node's own listener
   * (`standby`, where connections that came early wait) for up to 5 s (the
   * node timeout when shorter), then count who is there. A minority (decideSide over the last settled membership)
   * stops: the nodes that joined are told to stand down, and NodeLostError
   * (exit 76). Otherwise the lost coordinator and every member that did not
   * join are lost as any node is (a spare node takes their ranks, or the run
   * shrinks), and the run's supervisor goes on here (Supervisor `takeover`);
   * the lost coordinator's step is the furthest `reached` by this node's
   * ranks and its followers' (see FollowEnd).
   * This node's rank processes (`hosts`, kept from the attempts it ran as a
   * member) run its ranks as the coordinator's own; the leader closes them
   * when it finishes or stops.
   *
   * ```ts
   * const leader = await ClusterLeader.succeed(opts, standby, host, view, 0, 'the connection closed', hosts, { skeleton: 0, step: 740 })
   * ```
   */
  static async succeed(opts: ClusterOptions, standby: StandbyListener, host: string, view: ClusterView, lost: number, why: string, hosts: NodeHosts, reached: Reached): Promise<ClusterLeader> {
    const leader = new ClusterLeader(opts, standby.server, view, hosts)
    leader.host = host
    const self = opts.place.node
    const others = membersOf(view.membership).filter((n) => n !== self && n !== lost)
    // Only the members above this node may follow it: one below answered nobody it could reach, and leads its own side.
    const expected = others.filter((n) => n > self)
    await leader.admit(standby.server, expected, true, standby)
    const live = new Set([self, ...leader.agents.map((a) => a.node)])
    const side = decideSide(view.settled, live)
    if (!side.goesOn) {
      const e = new NodeLostError(lost, minorityText(self, `node ${lost} was lost (${why})`, view.settled, live))
      for (const a of leader.agents) a.wire.send({ t: 'stand-down', why: e.message })
      // A moment for the stand-down to leave before the connections close.
      await Promise.all([sleep(100), hosts.close()])
      leader.closeAll()
      throw e
    }
    const missing = others.filter((n) => !live.has(n))
    const timeout = `did not join node ${self}, the new coordinator, within ${(electionWaitMs(opts) / 1000).toFixed(1)} s`
    // Missing spare nodes first: the slots of the lost working nodes go to spares that are there.
    const spares = new Set(view.membership.spares)
    const order = [...missing.filter((n) => spares.has(n)), lost, ...missing.filter((n) => !spares.has(n))]
    for (const node of order) {
      const because = node === lost ? `${why}; node ${self} took the coordinator's role over` : node < self ? `did not answer node ${self}, the new coordinator` : timeout
      const change = leader.membership.lose(node)
      if (!change) continue
      // The lost coordinator's step: the furthest its survivors' ranks had reached (every rank runs the same superstep, give or take one).
      const at = node === lost ? furthest([reached, ...leader.agents.map((a) => a.reached)]) : { skeleton: -1, step: -1 }
      leader.losses.push({ change, why: because, skeleton: at.skeleton, step: at.step })
      if (change.kind === 'unrecoverable') {
        await leader.finish(NODE_LOST_EXIT)
        throw new NodeLostError(node, `node ${node} was lost (${because}), and the run cannot go on without it: ${change.why}; run the launcher again with --resume to continue from the last checkpoint`)
      }
      if (change.kind !== 'spare-lost') leader.changedFor = leader.generation + 1
    }
    leader.startPings()
    leader.sendViews()
    return leader
  }

  /** Starts one attempt's ranks on every node (a new generation each time). */
  readonly startGroup: StartRankGroup = (spec, on) => this.startAttempt(spec, on)

  /** Tell every node the run is over (they exit with `code`), and close. */
  async finish(code: number): Promise<void> {
    this.finishing = true
    if (this.pinger) clearInterval(this.pinger)
    const minority = this.minority
    for (const a of this.agents) if (!a.lost) a.wire.send(minority === undefined ? { t: 'finish', code } : { t: 'stand-down', why: minority })
    await this.ownHosts?.close()
    // Give them a moment to read it and hang up; a node that does not is on its own.
    const until = performance.now() + 2000
    while (this.agents.some((a) => !a.wire.isClosed) && performance.now() < until) await sleep(20)
    this.closeAll()
  }

  private closeAll(): void {
    if (this.pinger) clearInterval(this.pinger)
    for (const a of this.agents) a.wire.socket.destroy()
    this.server?.close()
    if (this.rendezvousFile) rmSync(this.rendezvousFile, { force: true })
  }

  /**
   * Admit the nodes `expected` (every other node at the start; a successor: the
   * other members). At the start a node missing after the node timeout fails
   * the run; a successor (`lenient`) goes on without it.
   */
  private admit(server: Server, expected: readonly number[], lenient: boolean, standby?: StandbyListener): Promise<void> {
    this.rendezvousFile = (server as Server & { rendezvousFile?: string }).rendezvousFile
    let refused = 0
    return new Promise<void>((resolve, reject) => {
      if (expected.length === 0) {
        standby?.take((late) => late.destroy())
        return resolve()
      }
      const timer = setTimeout(() => {
        if (lenient) return done()
        const joined = new Set(this.agents.map((a) => a.node))
        const missing = expected.filter((n) => !joined.has(n))
        const why = refused > 0 ? `; ${refused} connection${refused > 1 ? 's' : ''} failed the handshake (a node given another secret?)` : ''
        reject(
          new CommunicationError(
            `node 0: node${missing.length > 1 ? 's' : ''} ${missing.join(', ')} did not join the rendezvous within ${(this.opts.nodeTimeoutMs / 1000).toFixed(1)} s (--node-timeout)${why}`,
          ),
        )
      }, lenient ? electionWaitMs(this.opts) : this.opts.nodeTimeoutMs)
      const fail = (e: Error) => {
        clearTimeout(timer)
        reject(e)
      }
      // Once admission closed, a late node is refused: a successor already counted it as lost.
      let open = true
      const done = (): void => {
        open = false
        clearTimeout(timer)
        resolve()
      }
      const onConnection = async (socket: Socket, proven: boolean) => {
        if (!proven && !(await admitConnection(socket, this.opts.secret?.key, this.opts.log ?? (() => {}), this.self))) return void refused++
        let link: AgentLink | undefined
        const wire: Wire<AgentMessage, LeaderMessage> = new Wire<AgentMessage, LeaderMessage>(
          socket,
          (m) => {
            if (link) return this.fromAgent(link, m)
            if (m.t !== 'join') return socket.destroy()
            const member = open && expected.includes(m.node)
            const refusal = this.check(m) ?? (member ? undefined : new NodeLostError(m.node, `node ${m.node} is not a member of this run's membership any more (node ${this.self} counted it as lost)`))
            if (refusal) {
              wire.send({ t: 'refused', error: errorRecord(refusal) })
              wire.close()
              // A successor refuses a stray node (one dropped earlier) without failing the run.
              return lenient ? undefined : fail(refusal)
            }
            link = { node: m.node, wire, lost: false, takeover: m.takeover, acked: -1, reached: m.reached }
            this.agents.push(link)
            // The address the other nodes reach us on: our ranks listen there (a successor knows its own).
            if (!lenient) this.host = unmapped(socket.localAddress) ?? this.host
            wire.send({ t: 'welcome' })
            if (this.agents.length === expected.length) done()
          },
          (why) => {
            if (link) this.lose(link, why)
          },
        )
      }
      server.on('connection', (socket: Socket) => void onConnection(socket, false))
      // A successor: the connections that proved the secret at its standby listener, and those still proving it.
      for (const socket of standby?.take((late) => void onConnection(late, true)) ?? []) void onConnection(socket, true)
    })
  }

  /** Why a joining node is refused, or undefined. */
  private check(m: JoinRequest): Error | undefined {
    const { nodes } = this.opts.place
    if (m.nodes !== nodes) {
      return new ConfigError(`inconsistent launcher sizes: node 0 was started as one of ${nodes} nodes, node ${m.node} as one of ${m.nodes}`)
    }
    if (!Number.isInteger(m.node) || m.node < 0 || m.node >= nodes || m.node === this.self) return new ConfigError(`a node supervisor joined as node ${m.node}, outside 0..${nodes - 1} or this node's own number`)
    if (this.agents.some((a) => a.node === m.node)) return new ConfigError(`two node supervisors joined as node ${m.node}: the launcher's ranks are not unique`)
    const differences: SettingDifference[] = []
    const mine = this.opts.identity
    for (const key of new Set([...Object.keys(mine), ...Object.keys(m.identity)])) {
      if (mine[key] !== m.identity[key]) differences.push({ name: key, old: mine[key], new: m.identity[key] })
    }
    if (differences.length > 0) return new NodeMismatchError(m.node, differences)
    const template = this.opts.identity['checkpoint directory'] ?? ''
    if (m.machine === machineId() && m.dir === this.opts.dir && !template.includes('{node}') && !template.includes('{rank}')) {
      return new ConfigError(
        `nodes ${this.self} and ${m.node} run on one machine with one checkpoint directory ${m.dir}: their files would collide. ` +
          'Put {node} in --checkpoint-dir (e.g. /local/ckpt-{node}) so that each node has its own.',
      )
    }
    return undefined
  }

  private startPings(): void {
    this.pinger = setInterval(() => {
      const now = performance.now()
      for (const a of this.agents) {
        if (a.lost) continue
        a.wire.send({ t: 'ping' })
        if (now - a.wire.lastHeard > this.opts.nodeTimeoutMs) {
          // Said first: a node that was only stopped reads it when it wakes up, and leaves the run's outcome to the others.
          a.wire.send({ t: 'dropped', why: `silent for ${((now - a.wire.lastHeard) / 1000).toFixed(1)} s` })
          a.wire.close()
          a.wire.socket.destroySoon()
          // A link that is down never acknowledges it: do not keep the socket for TCP's retransmissions.
          setTimeout(() => a.wire.socket.destroy(), SAY_DROPPED_MS).unref()
          this.lose(a, `silent for ${((now - a.wire.lastHeard) / 1000).toFixed(1)} s (--node-timeout ${(this.opts.nodeTimeoutMs / 1000).toFixed(1)} s)`)
        }
      }
    }, this.opts.beatMs)
    this.pinger.unref()
  }

  private lose(a: AgentLink, why: string): void {
    if (a.lost) return
    a.lost = true
    // Nodes hang up once told the run is over: no loss.
    if (this.finishing || this.minority !== undefined) return
    const live = new Set([this.self, ...this.agents.filter((x) => !x.lost).map((x) => x.node)])
    if (!decideSide(this.settled, live).goesOn) {
      // Perhaps a partition: the other side may hold the majority and go on. This one stops before it starts an attempt.
      this.minority = minorityText(this.self, `node ${a.node} was lost (${why})`, this.settled, live)
      this.onMinority()
      this.current?.stopAsMinority(a.node, this.minority)
      return
    }
    const change = this.membership.lose(a.node)
    if (!change) return
    const cur = this.current
    const first = change.kind === 'spare-lost' ? undefined : change.ranks[0]
    const where = (first !== undefined ? cur?.whereOf(first) : undefined) ?? { skeleton: -1, step: -1 }
    const loss: NodeLoss = { change, why, skeleton: where.skeleton, step: where.step }
    this.losses.push(loss)
    if (change.kind === 'unrecoverable') {
      this.onNodeLost(loss)
      cur?.nodeLost(a.node, why, change.why)
      return
    }
    if (change.kind !== 'spare-lost') this.changedFor = this.generation + 1
    // Reported and acted on once every live member holds the new membership (within a round trip): a change
    // that a partition keeps from settling is never reported, and that side stops as a minority instead.
    this.unsettled.push({ loss, attempt: cur })
    this.sendViews()
    this.settle()
  }

  /** A rank's large buffers: when the largest set changes, the spare nodes touch that much memory ahead. */
  private noteBuffers(rank: number, sizes: number[]): void {
    this.buffers.set(rank, sizes)
    const warm = warmSizes(this.buffers)
    if (warm.length === this.warm.length && warm.every((n, i) => n === this.warm[i])) return
    this.warm = warm
    for (const node of this.membership.spares) this.agents.find((a) => a.node === node && !a.lost)?.wire.send({ t: 'warm', sizes: warm })
  }

  private fromAgent(a: AgentLink, m: AgentMessage): void {
    if (m.t === 'preempt') return this.onPreempt(`${m.why} on node ${a.node}`)
    if (m.t === 'join') return
    if (m.t === 'view-ack') {
      a.acked = m.epoch
      return this.settle()
    }
    const cur = this.current
    if (m.t === 'origin' && cur && m.gen === cur.generation) return void addOrigin(this.lastOrigin, m.origin)
    if (!cur || m.gen !== cur.generation) {
      // A straggler of an earlier attempt: never let it touch this one.
      if (m.t !== 'beats' && m.t !== 'stopped') this.opts.log?.(`warning: node ${this.self}: dropped a ${m.t} message of attempt ${m.gen} from node ${a.node} (this is attempt ${cur?.generation ?? 'none'})`)
      return
    }
    cur.fromAgent(a.node, m)
  }

  /** The view every node is told now (see ClusterView). */
  private view(): ClusterView {
    const endpoints: Record<number, HostPort> = {}
    for (const a of this.agents) if (!a.lost && a.takeover) endpoints[a.node] = a.takeover
    return { membership: this.membership.view(), settled: [...this.settled], coordinator: this.self, endpoints, generation: this.generation, run: { ...this.runState(), losses: this.lossCount } }
  }

  private sendViews(): void {
    const view = this.view()
    for (const a of this.agents) if (!a.lost) a.wire.send({ t: 'view', view })
  }

  /** Once every live member holds the current membership, a later partition's majority is counted among its members. */
  private settle(): void {
    const epoch = this.membership.epoch
    const members = this.membership.members()
    if (this.minority !== undefined) return
    if (!members.every((n) => n === this.self || this.agents.some((a) => a.node === n && !a.lost && a.acked === epoch))) return
    const changed = members.length !== this.settled.length || members.some((n, i) => n !== this.settled[i])
    this.settled = members
    for (const { loss, attempt } of this.unsettled.splice(0)) {
      this.onNodeLost(loss)
      const c = loss.change
      if (c.kind === 'replaced' || c.kind === 'shrunk') attempt?.nodeReplaced(c, loss.why)
    }
    if (changed) this.sendViews()
  }

  private startAttempt(spec: RankGroupSpec, on: RankGroupEvents): RankGroup {
    const generation = ++this.generation
    const placement = this.membership.placement()
    spec = withMembership(spec, this.membership) // each checkpoint records the membership it was written under
    // By slot; undefined for this node's own slot.
    const working = placement.map((node) => (node === this.self ? undefined : this.agents.find((a) => a.node === node)!))
    const events: RankGroupEvents = {
      message: (m) => {
        if (m.type === 'buffers') this.noteBuffers(m.rank, m.sizes)
        on.message(m)
      },
      exit: on.exit,
    }
    const changed = generation === this.changedFor ? this.losses[this.losses.length - 1] : undefined
    this.ownHosts ??= new NodeHosts(this.opts.ranksPerNode, { programFile: spec.programFile, tsconfig: spec.tsconfig, compiled: spec.compiled, size: spec.size, heartbeatMs: spec.heartbeatMs, key: this.opts.secret?.key, keep: this.opts.keepSurvivors }, false)
    const attempt = new LeaderAttempt(spec, events, generation, this.opts, this.host, this.self, working, placement, changed, this.ownHosts)
    this.current = attempt
    // This node's now; each other node says how it got its ranks (`origin`) when it starts them.
    this.lastOrigin = { ...this.ownHosts.lastOrigin }
    this.sendViews()
    const minority = this.minority
    // Deferred: the attempt must have its group before it can end.
    if (minority !== undefined) setImmediate(() => attempt.stopAsMinority(this.self, minority))
    working.forEach((a, slot) => {
      if (!a) return
      // Deferred: the attempt must have its group before it can end.
      if (a.lost) {
        setImmediate(() => attempt.nodeLost(a.node, 'lost before the attempt started'))
        return
      }
      a.wire.send({ t: 'start', gen: generation, spec, ranks: this.membership.ranksOfSlot(slot) })
    })
    return attempt.group
  }
}

/** One attempt seen from the coordinator: its own ranks, and the other nodes' through their supervisors. */
class LeaderAttempt {
  readonly group: RankGroup
  private readonly local: NodeRanks
  /** The other working nodes of this attempt. */
  private readonly agents: readonly AgentLink[]
  /** The first of the coordinator's own ranks (its slot's). */
  private readonly ownFirst: number
  private readonly table: EndpointTable
  private readonly remote = new Map<number, { where: RankWhere; lastAt: number }>()
  private readonly stopped = new Set<number>()
  private ended = false

  constructor(
    spec: RankGroupSpec,
    private readonly on: RankGroupEvents,
    readonly generation: number,
    private readonly opts: ClusterOptions,
    host: string,
    self: number,
    /** Slot → the node's link for the nodes working in this attempt (undefined: the coordinator's own slot). */
    bySlot: readonly (AgentLink | undefined)[],
    /** Slot → node for this attempt. */
    private readonly placement: readonly number[],
    /** The loss this attempt runs after (a spare took its ranks, or the run shrank): until it has resumed, a refusal ends the run as that loss (exit 76). */
    private afterLoss: NodeLoss | undefined,
    /** The coordinator's rank processes, kept across attempts. */
    own: NodeHosts,
  ) {
    const rpn = opts.ranksPerNode
    this.agents = bySlot.filter((a): a is AgentLink => a !== undefined)
    const ownFirst = placement.indexOf(self) * rpn
    this.ownFirst = ownFirst
    this.table = new EndpointTable(spec.size, generation)
    const started = performance.now()
    for (let r = 0; r < spec.size; r++) if (r < ownFirst || r >= ownFirst + rpn) this.remote.set(r, { where: { skeleton: -1, step: -1, phase: 'start' }, lastAt: started })
    // After a loss, a refusal before the restore ended (an array that cannot be re-sliced, no copy of a file) is the loss's: exit 76.
    const events: RankGroupEvents = { message: (m) => this.message(m), exit: on.exit }
    this.local = own.start(spec, { ranks: ranksOfNode(ownFirst / rpn, rpn), node: self, host, generation, key: opts.secret?.key, onListening: (m) => this.listening(m) }, events)
    const isOwn = (rank: number): boolean => rank >= ownFirst && rank < ownFirst + rpn
    const agentOf = (rank: number): AgentLink | undefined => bySlot[Math.floor(rank / rpn)]
    this.group = {
      size: spec.size,
      transport: 'tcp',
      where: (rank) => (isOwn(rank) ? this.local.where(rank) : this.remote.get(rank)!.where),
      lastHeartbeat: (rank) => {
        if (isOwn(rank)) return this.local.lastHeartbeat(rank)
        // While a node is silent its ranks' beats are unknown: the node timeout judges it, not the hang timeout.
        const a = agentOf(rank)
        if (!a || a.lost || performance.now() - a.wire.lastHeard > 2 * opts.beatMs + 100) return undefined
        return this.remote.get(rank)!.lastAt
      },
      pid: (rank) => (isOwn(rank) ? this.local.pid(rank) : undefined),
      send: (rank, m) => {
        if (isOwn(rank)) this.local.send(rank, m)
        else agentOf(rank)?.wire.send({ t: 'to-rank', gen: generation, rank, m })
      },
      kill: (rank, signal = 'SIGKILL') => {
        if (isOwn(rank)) this.local.kill(rank, signal)
        else agentOf(rank)?.wire.send({ t: 'kill', gen: generation, rank, signal })
      },
      terminate: () => this.terminate(),
    }
  }

  fromAgent(node: number, m: AgentMessage): void {
    switch (m.t) {
      case 'rank':
        if (m.m.type === 'listening') this.listening(m.m)
        else this.message(m.m)
        return
      case 'exit': {
        const r = this.remote.get(m.rank)
        if (r) r.where = m.where
        return this.on.exit(m.rank, m.how)
      }
      case 'beats': {
        const now = performance.now()
        for (const [rank, ago, where] of m.beats as RemoteBeat[]) {
          const r = this.remote.get(rank)
          if (r) Object.assign(r, { where, lastAt: now - ago })
        }
        return
      }
      case 'stopped':
        this.stopped.add(node)
        return
    }
  }

  private message(m: RankToLauncher): void {
    const loss = this.afterLoss
    if (loss) {
      if (m.type === 'resumed') this.afterLoss = undefined
      const refused = m.type === 'config-error' || (m.type === 'error' && !restartable(m))
      if (refused) {
        const c = loss.change
        const how = c.kind === 'replaced' ? `spare node ${c.spare} could not take ${ranksText(c.ranks)} over` : `no spare node is left; the run cannot go on with ${this.group.size} ranks`
        const e = new NodeLostError(c.node, `node ${c.node} was lost (${loss.why}) and ${how}: ${m.message}; run the launcher again with --resume to continue from the last checkpoint`)
        const where = m.type === 'error' ? m : { skeleton: -1, step: -1, phase: 'start' as const }
        this.on.message({ type: 'error', rank: m.rank, skeleton: where.skeleton, step: where.step, phase: where.phase, ...errorRecord(e) })
        return
      }
    }
    this.on.message(m)
  }

  /** Where rank `rank` was at its last heartbeat (undefined before it said). */
  whereOf(rank: number): RankWhere | undefined {
    return this.remote.get(rank)?.where ?? (rank >= this.ownFirst && rank < this.ownFirst + this.opts.ranksPerNode ? this.local.where(rank) : undefined)
  }

  /** The first rank of the slot `node` carries in this attempt. */
  private firstRankOf(node: number): number {
    return Math.max(0, this.placement.indexOf(node)) * this.opts.ranksPerNode
  }

  /** A node was lost and nothing replaces it: the attempt ends as refused with NodeLostError (resumable by relaunching). */
  nodeLost(node: number, why: string, cannot?: string): void {
    if (this.ended) return
    const rank = this.firstRankOf(node)
    const where = this.remote.get(rank)?.where ?? { skeleton: -1, step: -1, phase: 'start' }
    const goOn = cannot === undefined ? '' : `, and the run cannot go on without it: ${cannot}`
    const e = new NodeLostError(node, `node ${node} was lost (${why})${goOn}; run the launcher again with --resume to continue from the last checkpoint`)
    this.on.message({ type: 'error', rank, skeleton: where.skeleton, step: where.step, phase: where.phase, ...errorRecord(e) })
  }

  /** This side lost the majority (see decideSide): the attempt ends as refused with NodeLostError, and no other starts. */
  stopAsMinority(node: number, why: string): void {
    if (this.ended) return
    const rank = this.firstRankOf(node)
    const where = this.remote.get(rank)?.where ?? { skeleton: -1, step: -1, phase: 'start' }
    this.on.message({ type: 'error', rank, skeleton: where.skeleton, step: where.step, phase: where.phase, ...errorRecord(new NodeLostError(node, why)) })
  }

  /** A node was lost and a spare node takes its ranks, or the run shrinks: the attempt fails as a rank does, and the next one runs on the new membership. */
  nodeReplaced(change: Extract<MembershipChange, { kind: 'replaced' | 'shrunk' }>, why: string): void {
    if (this.ended) return
    const rank = change.ranks[0]
    const where = this.remote.get(rank)?.where ?? { skeleton: -1, step: -1, phase: 'start' }
    const next = change.kind === 'replaced' ? `spare node ${change.spare} takes ${ranksText(change.ranks)}` : `no spare node is left: the run goes on with ${change.size} ranks`
    const e = new CommunicationError(`node ${change.node} was lost (${why}); ${next}`)
    this.on.message({ type: 'error', rank, skeleton: where.skeleton, step: where.step, phase: where.phase, ...errorRecord(e) })
  }

  private listening(m: Listening): void {
    const all = this.table.add(m)
    if (!all) return
    for (const r of this.local.ranks) this.local.send(r, { type: 'peers', generation: this.generation, endpoints: all })
    for (const a of this.agents) if (!a.lost) a.wire.send({ t: 'peers', gen: this.generation, endpoints: all })
  }

  private async terminate(): Promise<void> {
    this.ended = true
    for (const a of this.agents) if (!a.lost) a.wire.send({ t: 'stop', gen: this.generation })
    await this.local.terminate()
    const until = performance.now() + this.opts.nodeTimeoutMs
    while (this.agents.some((a) => !a.lost && !this.stopped.has(a.node)) && performance.now() < until) await sleep(10)
  }
}

/** Listen at the rendezvous: the given address, else any interface on a free port, written to the shared directory. */
async function listenRendezvous(opts: ClusterOptions): Promise<Server> {
  const server = createServer({ noDelay: true })
  const at = opts.rendezvous
  const listen = (port: number, host: string | undefined) =>
    new Promise<void>((resolve, reject) => {
      const onError = (e: NodeJS.ErrnoException) => reject(e)
      server.once('error', onError)
      server.listen(port, host, () => {
        server.off('error', onError)
        resolve()
      })
    })
  if (at) {
    try {
      await listen(at.port, at.host)
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code
      if (code === 'EADDRINUSE') {
        throw new ConfigError(`node 0 cannot listen at the rendezvous ${at.host}:${at.port}: the port is in use (another run?); choose another port in --rendezvous`)
      }
      if (code !== 'EADDRNOTAVAIL' && code !== 'ENOTFOUND' && code !== 'EAI_AGAIN') {
        throw new ConfigError(`node 0 cannot listen at the rendezvous ${at.host}:${at.port}: ${(e as Error).message}`)
      }
      // The name is this node's but resolves to no local interface (NAT, aliases): listen on every interface.
      try {
        await listen(at.port, undefined)
      } catch (e2) {
        const inUse = (e2 as NodeJS.ErrnoException).code === 'EADDRINUSE'
        throw new ConfigError(`node 0 cannot listen at the rendezvous port ${at.port}: ${inUse ? 'the port is in use (another run?); choose another port in --rendezvous' : (e2 as Error).message}`)
      }
    }
    return server
  }
  if (!opts.sharedDir) {
    throw new ConfigError(
      `a cluster run of ${opts.place.nodes} nodes needs node 0's address: give --rendezvous host:port, set MOLOTOF_RENDEZVOUS=host:port, or give --shared-dir DIR (a directory every node sees)`,
    )
  }
  await listen(0, undefined)
  const port = (server.address() as { port: number }).port
  const file = join(opts.sharedDir, RENDEZVOUS_FILE)
  const record = { launch: opts.place.launchId ?? null, hosts: [hostname(), ...ownAddresses()], port }
  try {
    writeFileSync(`${file}.tmp`, JSON.stringify(record))
    renameSync(`${file}.tmp`, file)
  } catch (e) {
    server.close()
    throw new ConfigError(`node 0 cannot write the rendezvous file ${file}: ${(e as Error).message}`)
  }
  ;(server as Server & { rendezvousFile?: string }).rendezvousFile = file
  return server
}

/** This host's non-loopback IPv4 addresses, then IPv6 ones. */
function ownAddresses(): string[] {
  const v4: string[] = []
  const v6: string[] = []
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) {
      if (a.internal) continue
      if (a.family === 'IPv4') v4.push(a.address)
      else if (!a.address.startsWith('fe80')) v6.push(a.address)
    }
  }
  return [...v4, ...v6]
}

/** Whether a rank's error is one a restart may fix (as attempt.ts decides). */
function restartable(m: Extract<RankToLauncher, { type: 'error' }>): boolean {
  const e = reviveError(m)
  return !(e instanceof MolotofError) || e.restartable
}

function unmapped(address: string | undefined): string | undefined {
  return address?.startsWith('::ffff:') ? address.slice(7) : address
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms))
}

/**
 * The coordinator was lost and this node takes its role over (see
 * ClusterLeader.succeed): the CLI runs the run's supervisor here, from the
 * state the lost coordinator last sent (`view.run`).
 */
export interface Succession {
  leader: ClusterLeader
  view: ClusterView
  /** The lost coordinator, and why it counts as lost. */
  lost: number
  why: string
  /** performance.now() when the loss was noticed. */
  lostAt: number
}

/**
 * The supervisor of a node other than 0: joins node 0 at the rendezvous, then
 * starts and stops this node's ranks as the coordinator says, forwarding their
 * messages, exits and heartbeats (tagged with the attempt's generation), and
 * beating itself so the coordinator can tell a lost node. Resolves with the
 * exit code the coordinator decided. When the coordinator is lost (its
 * connection closed, or silent past the node timeout), the members of the last
 * membership it sent elect its successor: each asks every member below it
 * at once and joins the lowest-numbered that answers at its own listener; the
 * one that none below itself answers takes the role over and resolves with a
 * `Succession`. Rejects when this node cannot go on (NodeLostError: dropped,
 * or its side of a partition is a minority).
 *
 * ```ts
 * const end = await runClusterAgent(options, { programFile, tsconfig })
 * if (typeof end === 'number') process.exitCode = end   // else: coordinate the run (end.leader)
 * ```
 */
export async function runClusterAgent(
  opts: ClusterOptions,
  own: { programFile: string; tsconfig: string | undefined; compiled?: CompiledProgram },
  onDropped: (how: StandDown) => void = () => {},
): Promise<number | Succession> {
  const socket = await reachRendezvous(opts)
  await proveToLeader(socket, opts.secret?.key, opts.place.node, `${unmapped(socket.remoteAddress)}:${socket.remotePort}`)
  const standby = await StandbyListener.open(opts, unmapped(socket.localAddress) ?? '127.0.0.1')
  const agent = new ClusterAgent(opts, own, onDropped, standby)
  let succeeded = false
  try {
    let end = await agent.follow(socket, 0)
    for (;;) {
      if (end.kind === 'finished') return end.code
      if (end.kind === 'unadmitted') throw new CommunicationError(`node ${opts.place.node}: node 0 closed the connection before admitting this node (${end.why})`)
      const next = await agent.elect(end)
      if ('leader' in next) {
        succeeded = true
        return next
      }
      end = next
    }
  } finally {
    agent.close()
    // A successor's listener is its rendezvous now: the leader closes it.
    if (!succeeded) standby.close()
  }
}

/**
 * How a node leaves a run that goes on, or may go on, without it: `dropped`
 * (counted as lost: the run's outcome is the others' to write) or `minority`
 * (its side of a partition holds no majority: it writes an outcome only
 * where none was written, see StatusFile.yieldToOthers).
 */
export type StandDown = 'dropped' | 'minority'

/** The program as this node loads it: every attempt's ranks run it. */
type OwnProgram = { programFile: string; tsconfig: string | undefined; compiled?: CompiledProgram }

/**
 * How following one coordinator ended: the run's exit code, the coordinator
 * lost (with the furthest step this node's ranks had `reached`, and their
 * stop under way: `stopped`), or never admitted.
 */
type FollowEnd =
  | { kind: 'finished'; code: number }
  | { kind: 'coordinator-lost'; coordinator: number; why: string; at: number; reached: Reached; stopped: Promise<void> }
  | { kind: 'unadmitted'; why: string }

/**
 * Where a node other than the coordinator listens, from the start, should it
 * become the coordinator: connections that prove the run's secret wait there
 * until it leads (they are the successor's followers) or follows another
 * (they are closed, and try the next member).
 */
class StandbyListener {
  private waiting: Socket[] = []
  private queueing = true
  /** Once this node leads: where a connection that finishes the handshake goes. */
  private late: ((socket: Socket) => void) | undefined
  private onConnection: (socket: Socket) => Promise<void> = async () => {}

  private constructor(
    readonly server: Server,
    readonly at: HostPort,
  ) {}

  static async open(opts: ClusterOptions, host: string): Promise<StandbyListener> {
    const server = createServer({ noDelay: true })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(0, host, () => resolve())
    })
    const l = new StandbyListener(server, { host, port: (server.address() as { port: number }).port })
    l.onConnection = async (socket: Socket) => {
      if (!l.queueing) return
      if (!(await admitConnection(socket, opts.secret?.key, opts.log ?? (() => {}), opts.place.node))) return
      if (l.queueing) l.waiting.push(socket)
      else if (l.late) l.late(socket)
      else socket.destroy()
    }
    server.on('connection', l.onConnection)
    return l
  }

  /** This node leads: the connections waiting so far; those still in their handshake go to `late` (the leader's `admit` takes new ones). */
  take(late: (socket: Socket) => void): Socket[] {
    this.queueing = false
    this.late = late
    // Its own listener only: the leader's `admit` has registered its own.
    this.server.off('connection', this.onConnection)
    const waiting = this.waiting.filter((s) => !s.destroyed)
    this.waiting = []
    return waiting
  }

  /** This node follows another: those who came here try the next member. */
  turnAway(): void {
    for (const s of this.waiting) s.destroy()
    this.waiting = []
  }

  close(): void {
    this.queueing = false
    this.late = undefined
    this.turnAway()
    this.server.close()
  }
}

/** A node other than the coordinator once admitted (see runClusterAgent): its state and one method per step of the protocol. */
class ClusterAgent {
  private readonly node: number
  /** This node's address as the others reach it: where its ranks listen. */
  private readonly host: string
  /** The control connection to the coordinator, opened by `follow`. */
  private wire!: Wire<LeaderMessage, AgentMessage>
  /** The node it follows. */
  private coordinator = 0
  /** A working node's ranks until the coordinator says otherwise; a spare node has none until it replaces a lost node. */
  private ranks: number[]
  /** This node's rank processes, kept across attempts; a spare node's start ahead with the program loaded and compute nothing until given ranks. */
  private readonly hosts: NodeHosts
  private local: NodeRanks | undefined
  private generation = -1
  private beats: NodeJS.Timeout | undefined
  private joinTimer: NodeJS.Timeout | undefined
  private welcomed = false
  private finished = false
  /** This node became the coordinator: its rank processes are the leader's now (see handOver). */
  private handedOver = false
  /** Why the coordinator counts as lost when this node stopped hearing it (set before the connection is closed). */
  private silence: string | undefined
  /** The last view the coordinator sent: what a successor goes on from. */
  private view: ClusterView | undefined
  private settle: { resolve: (end: FollowEnd) => void; reject: (e: Error) => void } = { resolve: () => {}, reject: () => {} }
  /** A stop asked of this node is the run's: the coordinator stops every node with a checkpoint. */
  private readonly forward = (sig: NodeJS.Signals): void => this.wire?.send({ t: 'preempt', why: sig })

  constructor(
    private readonly opts: ClusterOptions,
    private readonly own: OwnProgram,
    private readonly onDropped: (how: StandDown) => void,
    private readonly standby: StandbyListener,
  ) {
    this.node = opts.place.node
    this.host = standby.at.host
    const workingNodes = opts.place.nodes - (opts.spareNodes ?? 0)
    this.ranks = this.node < workingNodes ? ranksOfNode(this.node, opts.ranksPerNode) : []
    const hostsOptions = { ...own, size: workingNodes * opts.ranksPerNode, heartbeatMs: opts.rankHeartbeatMs ?? opts.beatMs, key: opts.secret?.key, keep: opts.keepSurvivors }
    this.hosts = new NodeHosts(opts.ranksPerNode, hostsOptions, this.node >= workingNodes)
    process.on('SIGTERM', this.forward)
    process.on('SIGINT', this.forward)
  }

  /** Join the coordinator `coordinator` on `socket`, then follow it until it says the run's exit code, is lost, or never admits this node. */
  follow(socket: Socket, coordinator: number, joinWithinMs = this.opts.nodeTimeoutMs, reached?: Reached): Promise<FollowEnd> {
    this.coordinator = coordinator
    this.welcomed = false
    this.silence = undefined
    return new Promise<FollowEnd>((resolve, reject) => {
      this.settle = { resolve, reject }
      this.wire = new Wire<LeaderMessage, AgentMessage>(
        socket,
        (m) => this.onMessage(m),
        (why) => this.onClosed(why),
      )
      this.joinTimer = setTimeout(() => {
        this.wire.socket.destroy()
        if (coordinator === 0) reject(new CommunicationError(`node ${this.node}: node 0 did not answer the join within ${(this.opts.nodeTimeoutMs / 1000).toFixed(1)} s (--node-timeout)`))
      }, joinWithinMs)
      const { opts, node } = this
      const join: JoinRequest = { t: 'join', node, nodes: opts.place.nodes, identity: opts.identity, machine: machineId(), dir: opts.dir, takeover: this.standby.at, reached }
      this.wire.send(join)
    })
  }

  /**
   * The coordinator is lost: find its successor among the members of the last
   * view. Every member below this node is asked at once (`reachLowest`); this
   * node follows the lowest-numbered one that answers, and takes the role over
   * when none below answers. A member that answered but turned it away
   * (it follows one lower still) is passed over for the next one up.
   */
  async elect(lost: Extract<FollowEnd, { kind: 'coordinator-lost' }>): Promise<Succession | FollowEnd> {
    const { node, view } = this
    const what = `lost node ${lost.coordinator}, the coordinator (${lost.why})`
    if (!view) throw new NodeLostError(lost.coordinator, `node ${node}: ${what} before it said the membership; run the launcher again with --resume`)
    const members = membersOf(view.membership)
    if (!members.includes(node)) {
      this.onDropped('dropped')
      throw new NodeLostError(node, `node ${node}: ${what}, and this node is not a member of the last membership; the run's outcome is the other nodes' to report`)
    }
    this.opts.log?.(`node ${node}: ${what}; looking for its successor among nodes ${members.filter((n) => n !== lost.coordinator).join(', ')}`)
    let below = members.filter((n) => n < node && n !== lost.coordinator && view.endpoints[n] !== undefined)
    for (;;) {
      // This node's ranks stop while the candidates are asked: the search does not wait for them.
      const [found] = await Promise.all([reachLowest(below.map((c) => ({ node: c, at: view.endpoints[c] })), this.opts, node), lost.stopped])
      if (!found) break
      this.standby.turnAway()
      // The candidate leads once its own search ended (at most one election wait after this node's).
      const end = await this.follow(found.socket, found.node, this.opts.nodeTimeoutMs + electionWaitMs(this.opts), lost.reached)
      if (end.kind !== 'unadmitted') return end
      below = below.filter((n) => n > found.node)
    }
    const leader = await ClusterLeader.succeed(this.opts, this.standby, this.host, view, lost.coordinator, lost.why, this.hosts, lost.reached).catch((e: unknown) => {
      // A minority stops without speaking for the run; a majority that cannot go on reports its 76.
      if (e instanceof NodeLostError && / not a majority /.test(e.message)) this.onDropped('minority')
      throw e
    })
    this.handOver()
    return { leader, view, lost: lost.coordinator, why: lost.why, lostAt: lost.at }
  }

  private onMessage(m: LeaderMessage): void {
    const { generation } = this
    switch (m.t) {
      case 'welcome':
        return this.welcome()
      case 'refused':
        // A successor refuses a node it already counted as lost: this node is out of the run.
        if (this.coordinator !== 0) this.onDropped('dropped')
        return this.end(reviveError(m.error))
      case 'start':
        return this.startAttempt(m.gen, m.spec, m.ranks)
      case 'view':
        this.view = m.view
        this.wire.send({ t: 'view-ack', epoch: m.view.membership.epoch })
        return
      case 'peers':
        if (m.gen === generation && this.local) for (const r of this.ranks) this.local.send(r, { type: 'peers', generation: m.gen, endpoints: m.endpoints })
        return
      case 'to-rank':
        if (m.gen === generation) this.local?.send(m.rank, m.m)
        return
      case 'kill':
        if (m.gen === generation) this.local?.kill(m.rank, m.signal)
        return
      case 'stop':
        if (m.gen === generation) void this.stopLocal().then(() => this.wire.send({ t: 'stopped', gen: m.gen }))
        return
      case 'warm':
        this.hosts.warm(m.sizes)
        return
      case 'ping':
        return
      case 'dropped':
        this.onDropped('dropped')
        return this.end(new NodeLostError(this.node, `node ${this.node}: node ${this.coordinator} counted this node as lost (${m.why}, past --node-timeout); the run's outcome is the other nodes' to report`))
      case 'stand-down':
        this.onDropped('minority')
        return this.end(new NodeLostError(this.node, `node ${this.node}: stopped by node ${this.coordinator}: ${m.why}`))
      case 'finish':
        return this.end(m.code)
    }
  }

  /** Admitted: beat from now on, so that the coordinator can tell a lost node, and judge the coordinator by its silence. */
  private welcome(): void {
    this.welcomed = true
    clearTimeout(this.joinTimer)
    if (this.beats) clearInterval(this.beats)
    this.beats = setInterval(() => this.beat(), this.opts.beatMs)
  }

  private beat(): void {
    const { wire, opts } = this
    if (performance.now() - wire.lastHeard > opts.nodeTimeoutMs) {
      // Judged once what has arrived is read (after this turn's I/O): a node that was itself stopped wakes up
      // here first, and the coordinator's last words (`dropped`) may be waiting in the socket.
      setImmediate(() => {
        if (this.finished || wire !== this.wire || performance.now() - wire.lastHeard <= opts.nodeTimeoutMs) return
        this.silence = `silent for more than ${(opts.nodeTimeoutMs / 1000).toFixed(1)} s (--node-timeout)`
        wire.socket.destroy()
      })
      return
    }
    const now = performance.now()
    const l = this.local
    const list: RemoteBeat[] = l ? this.ranks.map((r) => [r, now - (l.lastHeartbeat(r) ?? now), l.where(r)]) : []
    wire.send({ t: 'beats', gen: this.generation, beats: list })
  }

  /** An attempt's ranks on this node: in its kept processes (a spare node's started ahead), else started now. */
  private startAttempt(gen: number, given: RankGroupSpec, ranks: number[]): void {
    void this.stopLocal()
    this.generation = gen
    this.ranks = ranks
    const { wire, own } = this
    const spec: RankGroupSpec = { ...given, programFile: own.programFile, tsconfig: own.tsconfig, compiled: own.compiled }
    const where: NodeRanksOptions = { ranks, node: this.node, host: this.host, generation: gen, key: this.opts.secret?.key, onListening: (l) => wire.send({ t: 'rank', gen, m: l }) }
    const events: RankGroupEvents = {
      message: (rm) => wire.send({ t: 'rank', gen, m: rm }),
      exit: (rank, how) => wire.send({ t: 'exit', gen, rank, how, where: nodeRanks.where(rank) }),
    }
    const nodeRanks: NodeRanks = this.hosts.start(spec, where, events)
    this.local = nodeRanks
    wire.send({ t: 'origin', gen, origin: this.hosts.lastOrigin })
  }

  private onClosed(why: string): void {
    if (this.finished) return
    clearTimeout(this.joinTimer)
    if (!this.welcomed) return this.settle.resolve({ kind: 'unadmitted', why })
    // The coordinator is lost: this node's ranks (their attempt cannot go on) stop, in processes kept for the next coordinator's attempts (or its own, see handOver).
    if (this.beats) clearInterval(this.beats)
    this.beats = undefined
    const at = performance.now()
    const l = this.local
    const reached = furthest(l ? this.ranks.map((r) => l.where(r)) : [])
    this.settle.resolve({ kind: 'coordinator-lost', coordinator: this.coordinator, why: this.silence ?? why, at, reached, stopped: this.stopLocal() })
  }

  private async stopLocal(): Promise<void> {
    const l = this.local
    this.local = undefined
    if (l) await l.terminate()
  }

  /** This node coordinates from now on: the leader runs its ranks in this node's rank processes (given to succeed) and closes them. */
  private handOver(): void {
    this.finished = true
    this.handedOver = true
  }

  /** The signal handlers removed (the CLI's own take over); the rank processes killed unless the leader took them over. */
  close(): void {
    process.off('SIGTERM', this.forward)
    process.off('SIGINT', this.forward)
    if (!this.handedOver) void this.hosts.close()
  }

  /** The end, once: this node's rank processes killed, the connection closed, then the code (or why not). */
  private end(code: number | Error): void {
    if (this.finished) return
    this.finished = true
    clearTimeout(this.joinTimer)
    if (this.beats) clearInterval(this.beats)
    // Closed first: the ranks are killed, not told to stop and kept.
    void Promise.all([this.hosts.close(), this.stopLocal()]).then(() => {
      this.wire.close()
      if (code instanceof Error) this.settle.reject(code)
      else this.settle.resolve({ kind: 'finished', code })
    })
  }
}

/**
 * Reach every candidate successor at once and prove the run's secret there,
 * each within the election wait: the lowest-numbered that answers, once every
 * one below it has not; undefined when none does. The connections that lose
 * are closed (a successor counts only the nodes that join it).
 */
async function reachLowest(candidates: readonly { node: number; at: HostPort }[], opts: ClusterOptions, self: number): Promise<{ node: number; socket: Socket } | undefined> {
  const tries = candidates.map((c) => reachMember(c.at, opts, self))
  for (let i = 0; i < tries.length; i++) {
    const socket = await tries[i]
    if (!socket) continue
    for (const later of tries.slice(i + 1)) void later.then((s) => s?.destroy())
    return { node: candidates[i].node, socket }
  }
  return undefined
}

/**
 * Reach member `at` (a candidate successor: connected within
 * candidateConnectMs) and prove the run's secret there (within the election
 * wait); undefined when it does not answer (lost too).
 */
async function reachMember(at: HostPort, opts: ClusterOptions, node: number): Promise<Socket | undefined> {
  const s = await tryConnect(at, candidateConnectMs(opts))
  if (typeof s === 'string') return undefined
  try {
    await proveToLeader(s, opts.secret?.key, node, `${at.host}:${at.port}`, electionWaitMs(opts))
    return s
  } catch {
    // Not answering the handshake: counted as lost like a refused connection.
    s.destroy()
    return undefined
  }
}

/** Connect to node 0, retrying until the node timeout: it may not be listening yet. */
async function reachRendezvous(opts: ClusterOptions): Promise<Socket> {
  const { node } = opts.place
  const deadline = performance.now() + opts.nodeTimeoutMs
  let lastProblem = 'nothing tried yet'
  for (let delay = 20; ; delay = Math.min(500, delay * 2)) {
    const targets = opts.rendezvous ? [opts.rendezvous] : readRendezvousFile(opts, (p) => (lastProblem = p))
    for (const t of targets) {
      const s = await tryConnect(t, Math.max(100, Math.min(2000, deadline - performance.now())))
      if (typeof s !== 'string') return s
      lastProblem = `${t.host}:${t.port}: ${s}`
    }
    if (performance.now() + delay > deadline) {
      const where = opts.rendezvous ? `${opts.rendezvous.host}:${opts.rendezvous.port}` : `the address in ${join(opts.sharedDir ?? '', RENDEZVOUS_FILE)}`
      throw new CommunicationError(
        `node ${node}: cannot reach node 0's rendezvous at ${where} within ${(opts.nodeTimeoutMs / 1000).toFixed(1)} s (--node-timeout); last problem: ${lastProblem}`,
      )
    }
    await sleep(delay)
  }
}

function readRendezvousFile(opts: ClusterOptions, problem: (p: string) => void): HostPort[] {
  if (!opts.sharedDir) {
    throw new ConfigError(
      `a cluster run of ${opts.place.nodes} nodes needs node 0's address: give --rendezvous host:port, set MOLOTOF_RENDEZVOUS=host:port, or give --shared-dir DIR (a directory every node sees)`,
    )
  }
  const file = join(opts.sharedDir, RENDEZVOUS_FILE)
  let record: { launch: string | null; hosts: string[]; port: number }
  try {
    record = JSON.parse(readFileSync(file, 'utf8')) as typeof record
  } catch (e) {
    problem(`${file}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'not written yet' : (e as Error).message}`)
    return []
  }
  if (record.launch !== (opts.place.launchId ?? null)) {
    problem(`${file} belongs to another launch (${record.launch}); waiting for node 0 of this one`)
    return []
  }
  return record.hosts.map((host) => ({ host, port: record.port }))
}

function tryConnect(at: HostPort, timeoutMs: number): Promise<Socket | string> {
  return new Promise((resolve) => {
    const s = createConnection({ host: at.host, port: at.port, noDelay: true })
    const timer = setTimeout(() => {
      s.destroy()
      resolve('no answer')
    }, timeoutMs)
    s.once('connect', () => {
      clearTimeout(timer)
      s.removeAllListeners('error')
      resolve(s)
    })
    s.once('error', (e) => {
      clearTimeout(timer)
      s.destroy()
      resolve(e.message)
    })
  })
}
