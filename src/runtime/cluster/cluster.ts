import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { hostname, networkInterfaces } from 'node:os'
import { join } from 'node:path'
import { CommunicationError, ConfigError, errorRecord, MolotofError, NodeLostError, NodeMismatchError, reviveError, type SettingDifference } from '../../errors.js'
import type { RankToLauncher } from '../protocol.js'
import { RENDEZVOUS_FILE, type ClusterPlace, type HostPort } from '../cluster-env.js'
import type { CompiledProgram } from '../compiled-program.js'
import { admitConnection, proveToLeader, Wire, type AgentMessage, type JoinRequest, type LeaderMessage, type RemoteBeat } from './cluster-wire.js'
import type { ClusterSecret } from './secret.js'
import type { RankGroup, RankGroupEvents, RankGroupSpec, RankWhere, StartRankGroup } from '../group.js'
import { EndpointTable, startNodeRanks, startWarmHosts, type Listening, type NodeRanks, type NodeRanksOptions, type WarmHosts } from './node-group.js'
import { Membership, ranksText, type MembershipChange } from './membership.js'
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
}

/**
 * Node 0's supervisor in a cluster run: listens at the rendezvous, admits one
 * supervisor per other node (after the handshake on the run's secret, see
 * `admitConnection`; refusing any started differently), and then
 * provides `startGroup`: the ranks of every node as one `RankGroup`, so the
 * ordinary `Supervisor` runs the whole cluster. Each attempt has a generation
 * number; messages of another generation are dropped. A node whose
 * connection closes, or silent past the node timeout, is lost: the membership
 * decides (a spare node takes its ranks, the run shrinks, or the attempt ends
 * with NodeLostError).
 *
 * ```ts
 * const leader = await ClusterLeader.open(options)
 * const sup = new Supervisor(file, { ranks: leader.size, startGroup: leader.startGroup, … })
 * try { … } finally { await leader.finish(code) }
 * ```
 */
export class ClusterLeader {
  private readonly agents: AgentLink[] = []
  private generation = 0
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
  /** Nodes that have run ranks (a spare node's first start uses its warm processes). */
  private readonly started = new Set<number>([0])
  /** Told of every node lost during the run, once the membership decided (events, log line). */
  onNodeLost: (loss: NodeLoss) => void = () => {}

  private constructor(
    private readonly opts: ClusterOptions,
    private readonly server: Server | undefined,
  ) {
    this.membership = new Membership(opts.place.nodes, opts.spareNodes ?? 0, opts.ranksPerNode)
  }

  /** The run's ranks: working nodes × ranks per node (spare nodes carry none until they replace one). */
  get size(): number {
    return this.membership.slotCount * this.opts.ranksPerNode
  }

  /** Listen at the rendezvous and wait until every other node has joined (or fail within the node timeout). */
  static async open(opts: ClusterOptions): Promise<ClusterLeader> {
    const { nodes } = opts.place
    if (nodes === 1) return new ClusterLeader(opts, undefined)
    const server = await listenRendezvous(opts)
    const leader = new ClusterLeader(opts, server)
    try {
      await leader.admit(server)
    } catch (e) {
      leader.closeAll()
      throw e
    }
    leader.startPings()
    return leader
  }

  /** Starts one attempt's ranks on every node (a new generation each time). */
  readonly startGroup: StartRankGroup = (spec, on) => this.startAttempt(spec, on)

  /** Tell every node the run is over (they exit with `code`), and close. */
  async finish(code: number): Promise<void> {
    this.finishing = true
    if (this.pinger) clearInterval(this.pinger)
    for (const a of this.agents) if (!a.lost) a.wire.send({ t: 'finish', code })
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

  private admit(server: Server): Promise<void> {
    const { nodes } = this.opts.place
    this.rendezvousFile = (server as Server & { rendezvousFile?: string }).rendezvousFile
    let refused = 0
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        const joined = new Set(this.agents.map((a) => a.node))
        const missing = Array.from({ length: nodes - 1 }, (_, i) => i + 1).filter((n) => !joined.has(n))
        const why = refused > 0 ? `; ${refused} connection${refused > 1 ? 's' : ''} failed the handshake (a node given another secret?)` : ''
        reject(
          new CommunicationError(
            `node 0: node${missing.length > 1 ? 's' : ''} ${missing.join(', ')} did not join the rendezvous within ${(this.opts.nodeTimeoutMs / 1000).toFixed(1)} s (--node-timeout)${why}`,
          ),
        )
      }, this.opts.nodeTimeoutMs)
      const fail = (e: Error) => {
        clearTimeout(timer)
        reject(e)
      }
      server.on('connection', async (socket: Socket) => {
        if (!(await admitConnection(socket, this.opts.secret?.key, this.opts.log ?? (() => {})))) return void refused++
        let link: AgentLink | undefined
        const wire: Wire<AgentMessage, LeaderMessage> = new Wire<AgentMessage, LeaderMessage>(
          socket,
          (m) => {
            if (link) return this.fromAgent(link, m)
            if (m.t !== 'join') return socket.destroy()
            const refusal = this.check(m)
            if (refusal) {
              wire.send({ t: 'refused', error: errorRecord(refusal) })
              wire.close()
              return fail(refusal)
            }
            link = { node: m.node, wire, lost: false }
            this.agents.push(link)
            // The address the other nodes reach us on: our ranks listen there.
            this.host = unmapped(socket.localAddress) ?? this.host
            wire.send({ t: 'welcome' })
            if (this.agents.length === nodes - 1) {
              clearTimeout(timer)
              resolve()
            }
          },
          (why) => {
            if (link) this.lose(link, why)
          },
        )
      })
    })
  }

  /** Why a joining node is refused, or undefined. */
  private check(m: JoinRequest): Error | undefined {
    const { nodes } = this.opts.place
    if (m.nodes !== nodes) {
      return new ConfigError(`inconsistent launcher sizes: node 0 was started as one of ${nodes} nodes, node ${m.node} as one of ${m.nodes}`)
    }
    if (!Number.isInteger(m.node) || m.node < 1 || m.node >= nodes) return new ConfigError(`a node supervisor joined as node ${m.node}, outside 1..${nodes - 1}`)
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
        `nodes 0 and ${m.node} run on one machine with one checkpoint directory ${m.dir}: their files would collide. ` +
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
    if (this.finishing) return
    const change = this.membership.lose(a.node)
    if (!change) return
    const cur = this.current
    const first = change.kind === 'spare-lost' ? undefined : change.ranks[0]
    const where = (first !== undefined ? cur?.whereOf(first) : undefined) ?? { skeleton: -1, step: -1 }
    const loss: NodeLoss = { change, why, skeleton: where.skeleton, step: where.step }
    this.losses.push(loss)
    this.onNodeLost(loss)
    if (change.kind === 'replaced' || change.kind === 'shrunk') {
      this.changedFor = this.generation + 1
      cur?.nodeReplaced(change, why)
    } else if (change.kind === 'unrecoverable') cur?.nodeLost(a.node, why, change.why)
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
    const cur = this.current
    if (!cur || m.gen !== cur.generation) {
      // A straggler of an earlier attempt: never let it touch this one.
      if (m.t !== 'beats' && m.t !== 'stopped') this.opts.log?.(`warning: node 0: dropped a ${m.t} message of attempt ${m.gen} from node ${a.node} (this is attempt ${cur?.generation ?? 'none'})`)
      return
    }
    cur.fromAgent(a.node, m)
  }

  private startAttempt(spec: RankGroupSpec, on: RankGroupEvents): RankGroup {
    const generation = ++this.generation
    const placement = this.membership.placement()
    spec = withMembership(spec, this.membership) // each checkpoint records the membership it was written under
    const working = placement.slice(1).map((node) => this.agents.find((a) => a.node === node)!)
    const events: RankGroupEvents = {
      message: (m) => {
        if (m.type === 'buffers') this.noteBuffers(m.rank, m.sizes)
        on.message(m)
      },
      exit: on.exit,
    }
    const changed = generation === this.changedFor ? this.losses[this.losses.length - 1] : undefined
    const attempt = new LeaderAttempt(spec, events, generation, this.opts, this.host, working, placement, changed)
    this.current = attempt
    const origin: RanksOrigin = { kept: 0, spares: 0, spawned: this.opts.ranksPerNode }
    working.forEach((a, i) => {
      // Deferred: the attempt must have its group before it can end.
      if (a.lost) {
        setImmediate(() => attempt.nodeLost(a.node, 'lost before the attempt started'))
        return
      }
      a.wire.send({ t: 'start', gen: generation, spec, ranks: this.membership.ranksOfSlot(i + 1) })
      const warm = !this.started.has(a.node) && a.node >= this.membership.nodes - this.membership.spareNodes
      this.started.add(a.node)
      if (warm) origin.spares += this.opts.ranksPerNode
      else origin.spawned += this.opts.ranksPerNode
    })
    this.lastOrigin = origin
    return attempt.group
  }
}

/** One attempt seen from node 0: its own ranks, and the other nodes' through their supervisors. */
class LeaderAttempt {
  readonly group: RankGroup
  private readonly local: NodeRanks
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
    /** The nodes working in this attempt, other than node 0, in slot order (slot 1 first). */
    private readonly agents: readonly AgentLink[],
    /** Slot → node for this attempt. */
    private readonly placement: readonly number[],
    /** The loss this attempt runs after (a spare took its ranks, or the run shrank): until it has resumed, a refusal ends the run as that loss (exit 76). */
    private afterLoss?: NodeLoss,
  ) {
    const rpn = opts.ranksPerNode
    this.table = new EndpointTable(spec.size, generation)
    const started = performance.now()
    for (let r = rpn; r < spec.size; r++) this.remote.set(r, { where: { skeleton: -1, step: -1, phase: 'start' }, lastAt: started })
    // After a loss, a refusal before the restore ended (an array that cannot be re-sliced, no copy of a file) is the loss's: exit 76.
    const events: RankGroupEvents = { message: (m) => this.message(m), exit: on.exit }
    this.local = startNodeRanks(spec, { ranks: ranksOfNode(0, rpn), node: 0, host, generation, key: opts.secret?.key, onListening: (m) => this.listening(m) }, events)
    const agentOf = (rank: number): AgentLink | undefined => this.agents[Math.floor(rank / rpn) - 1]
    this.group = {
      size: spec.size,
      transport: 'tcp',
      where: (rank) => (rank < rpn ? this.local.where(rank) : this.remote.get(rank)!.where),
      lastHeartbeat: (rank) => {
        if (rank < rpn) return this.local.lastHeartbeat(rank)
        // While a node is silent its ranks' beats are unknown: the node timeout judges it, not the hang timeout.
        const a = agentOf(rank)
        if (!a || a.lost || performance.now() - a.wire.lastHeard > 2 * opts.beatMs + 100) return undefined
        return this.remote.get(rank)!.lastAt
      },
      pid: (rank) => (rank < rpn ? this.local.pid(rank) : undefined),
      send: (rank, m) => {
        if (rank < rpn) this.local.send(rank, m)
        else agentOf(rank)?.wire.send({ t: 'to-rank', gen: generation, rank, m })
      },
      kill: (rank, signal = 'SIGKILL') => {
        if (rank < rpn) this.local.kill(rank, signal)
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
    return rank < this.opts.ranksPerNode ? this.local.where(rank) : this.remote.get(rank)?.where
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
 * The supervisor of a node other than 0: joins node 0 at the rendezvous, then
 * starts and stops this node's ranks as node 0 says, forwarding their
 * messages, exits and heartbeats (tagged with the attempt's generation), and
 * beating itself so node 0 can tell a lost node. Resolves with the exit code
 * node 0 decided; rejects when node 0 is unreachable or lost.
 *
 * ```ts
 * const code = await runClusterAgent(options, { programFile, tsconfig })
 * ```
 */
export async function runClusterAgent(
  opts: ClusterOptions,
  own: { programFile: string; tsconfig: string | undefined; compiled?: CompiledProgram },
  onDropped: () => void = () => {},
): Promise<number> {
  const socket = await reachRendezvous(opts)
  await proveToLeader(socket, opts.secret?.key, opts.place.node, `${unmapped(socket.remoteAddress)}:${socket.remotePort}`)
  return new ClusterAgent(opts, own, onDropped, socket).run()
}

/** The program as this node loads it: every attempt's ranks run it. */
type OwnProgram = { programFile: string; tsconfig: string | undefined; compiled?: CompiledProgram }

/** A node other than 0 once admitted to the rendezvous (see runClusterAgent): its state and one method per step of the protocol. */
class ClusterAgent {
  private readonly node: number
  /** This node's address as node 0 reaches it: where its ranks listen. */
  private readonly host: string
  /** The control connection to node 0, opened by `run`. */
  private wire!: Wire<LeaderMessage, AgentMessage>
  /** A working node's ranks until node 0 says otherwise; a spare node has none until it replaces a lost node. */
  private ranks: number[]
  /** A spare node's rank processes, started ahead with the program loaded, computing nothing until given ranks. */
  private warmHosts: WarmHosts | undefined
  private local: NodeRanks | undefined
  private generation = -1
  private beats: NodeJS.Timeout | undefined
  private joinTimer: NodeJS.Timeout | undefined
  private welcomed = false
  private finished = false
  private settle: { resolve: (code: number) => void; reject: (e: Error) => void } = { resolve: () => {}, reject: () => {} }

  constructor(
    private readonly opts: ClusterOptions,
    private readonly own: OwnProgram,
    private readonly onDropped: () => void,
    private readonly socket: Socket,
  ) {
    this.node = opts.place.node
    this.host = unmapped(socket.localAddress) ?? '127.0.0.1'
    const workingNodes = opts.place.nodes - (opts.spareNodes ?? 0)
    this.ranks = this.node < workingNodes ? ranksOfNode(this.node, opts.ranksPerNode) : []
    this.warmHosts =
      this.node < workingNodes
        ? undefined
        : startWarmHosts(opts.ranksPerNode, {
            programFile: own.programFile,
            tsconfig: own.tsconfig,
            compiled: own.compiled,
            size: workingNodes * opts.ranksPerNode,
            heartbeatMs: opts.rankHeartbeatMs ?? opts.beatMs,
            key: opts.secret?.key,
          })
  }

  /** Join, then follow node 0 until it says the run's exit code (or this node loses it). */
  run(): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      this.settle = { resolve, reject }
      this.wire = new Wire<LeaderMessage, AgentMessage>(
        this.socket,
        (m) => this.onMessage(m),
        (why) => this.onClosed(why),
      )
      this.joinTimer = setTimeout(() => {
        this.wire.socket.destroy()
        reject(new CommunicationError(`node ${this.node}: node 0 did not answer the join within ${(this.opts.nodeTimeoutMs / 1000).toFixed(1)} s (--node-timeout)`))
      }, this.opts.nodeTimeoutMs)
      const { opts, node } = this
      const join: JoinRequest = { t: 'join', node, nodes: opts.place.nodes, identity: opts.identity, machine: machineId(), dir: opts.dir }
      this.wire.send(join)
      // A stop asked of this node is the run's: node 0 stops every node with a checkpoint.
      const forward = (sig: NodeJS.Signals) => this.wire.send({ t: 'preempt', why: sig })
      process.on('SIGTERM', forward)
      process.on('SIGINT', forward)
    })
  }

  private onMessage(m: LeaderMessage): void {
    const { generation } = this
    switch (m.t) {
      case 'welcome':
        return this.welcome()
      case 'refused':
        return this.end(reviveError(m.error))
      case 'start':
        return this.startAttempt(m.gen, m.spec, m.ranks)
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
        this.warmHosts?.warm(m.sizes)
        return
      case 'ping':
        return
      case 'dropped':
        this.onDropped()
        return this.end(new NodeLostError(this.node, `node ${this.node}: node 0 counted this node as lost (${m.why}, past --node-timeout); the run's outcome is the other nodes' to report`))
      case 'finish':
        return this.end(m.code)
    }
  }

  /** Admitted: beat from now on, so that node 0 can tell a lost node, and judge node 0 by its silence. */
  private welcome(): void {
    this.welcomed = true
    clearTimeout(this.joinTimer)
    this.beats = setInterval(() => this.beat(), this.opts.beatMs)
  }

  private beat(): void {
    const { wire, opts, node } = this
    if (performance.now() - wire.lastHeard > opts.nodeTimeoutMs) {
      // Judged once what has arrived is read (after this turn's I/O): a node that was itself stopped wakes up
      // here first, and node 0's last words (`dropped`) may be waiting in the socket.
      setImmediate(() => {
        if (this.finished || performance.now() - wire.lastHeard <= opts.nodeTimeoutMs) return
        wire.socket.destroy()
        this.end(new NodeLostError(0, `node ${node}: node 0 fell silent for more than ${(opts.nodeTimeoutMs / 1000).toFixed(1)} s (--node-timeout); run the launcher again with --resume`))
      })
      return
    }
    const now = performance.now()
    const l = this.local
    const list: RemoteBeat[] = l ? this.ranks.map((r) => [r, now - (l.lastHeartbeat(r) ?? now), l.where(r)]) : []
    wire.send({ t: 'beats', gen: this.generation, beats: list })
  }

  /** An attempt's ranks on this node: in the warm processes of a spare node given a lost node's ranks, else started now. */
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
    // The warm processes serve one attempt: every later attempt starts its own.
    const warm = this.warmHosts
    this.warmHosts = undefined
    const taken = warm?.take(spec, where, events)
    if (!taken) void warm?.close()
    const nodeRanks: NodeRanks = taken ?? startNodeRanks(spec, where, events)
    this.local = nodeRanks
  }

  private onClosed(why: string): void {
    const { node } = this
    if (!this.welcomed) this.end(new CommunicationError(`node ${node}: node 0 closed the connection before admitting this node (${why})`))
    else this.end(new NodeLostError(0, `node ${node}: lost node 0 (${why}); run the launcher again with --resume`))
  }

  private async stopLocal(): Promise<void> {
    const l = this.local
    this.local = undefined
    if (l) await l.terminate()
  }

  /** The end, once: this node's ranks and warm processes stopped, the connection closed, then the code (or why not). */
  private end(code: number | Error): void {
    if (this.finished) return
    this.finished = true
    clearTimeout(this.joinTimer)
    if (this.beats) clearInterval(this.beats)
    const warm = this.warmHosts
    this.warmHosts = undefined
    void Promise.all([this.stopLocal(), warm?.close()]).then(() => {
      this.wire.close()
      if (code instanceof Error) this.settle.reject(code)
      else this.settle.resolve(code)
    })
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
