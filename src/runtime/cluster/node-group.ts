import { randomBytes } from 'node:crypto'
import { InternalError } from '../../errors.js'
import type { CompiledProgram } from '../compiled-program.js'
import type { RankGroup, RankGroupEvents, RankGroupSpec, RankWhere, StartRankGroup } from '../group.js'
import { startRank, type RankProcess } from '../groups/process-group.js'
import { startRankHost, type RankHost } from '../groups/rank-host.js'
import type { LauncherToRank, RankToLauncher } from '../protocol.js'
import type { RanksOrigin } from '../groups/spares.js'
import { rankEnvironment } from './secret.js'

/** A rank's TCP endpoint as it announced it. */
export type Listening = Extract<RankToLauncher, { type: 'listening' }>

/** The rank processes of one node for one attempt, addressed by global rank. */
export interface NodeRanks {
  readonly ranks: readonly number[]
  where(rank: number): RankWhere
  lastHeartbeat(rank: number): number | undefined
  pid(rank: number): number | undefined
  send(rank: number, m: LauncherToRank): void
  kill(rank: number, signal?: NodeJS.Signals): void
  terminate(): Promise<void>
}

export interface NodeRanksOptions {
  /** Global ranks started here. */
  ranks: readonly number[]
  /** This node's index (fills `{node}` in the checkpoint directory). */
  node: number
  /** The address the ranks listen on for TCP. */
  host: string
  /** The attempt's generation: ranks refuse connections of any other. */
  generation: number
  /** A rank announced its endpoint (these messages do not reach `on.message`). */
  onListening: (m: Listening) => void
  /** The run's secret: the ranks' connections start with a handshake on it (none: --insecure-cluster). Reaches them in their environment. */
  key: Uint8Array | undefined
}

/**
 * Start a node's share of an attempt's ranks as processes on the TCP
 * transport (process-boot.mjs with `tcp` set). Used by the one-host TCP group
 * below and by every node of a cluster run.
 *
 * ```ts
 * const local = startNodeRanks(spec, { ranks: [2, 3], node: 1, host: '10.0.0.2', generation: 4, onListening }, events)
 * ```
 */
export function startNodeRanks(spec: RankGroupSpec, opts: NodeRanksOptions, on: RankGroupEvents): NodeRanks {
  const events: RankGroupEvents = {
    message: (m) => {
      if (m.type === 'listening') opts.onListening(m)
      else on.message(m)
    },
    exit: on.exit,
  }
  const procs = new Map<number, RankProcess>()
  const env = rankEnvironment(opts.key)
  for (const rank of opts.ranks) {
    procs.set(rank, startRank(spec, rank, [], events, { tcp: { host: opts.host, generation: opts.generation }, node: opts.node }, env))
  }
  return nodeRanksOver(opts, procs, killAll([...procs.values()]))
}

/** A node's share of an attempt's ranks, run by `byRank`'s processes; `terminate` ends them (`stop`). */
function nodeRanksOver(opts: NodeRanksOptions, byRank: ReadonlyMap<number, RankHost>, stop: () => Promise<void>): NodeRanks {
  const of = (rank: number): RankHost => {
    const p = byRank.get(rank)
    if (!p) throw new InternalError(`rank ${rank} was addressed on node ${opts.node}, which does not run it`)
    return p
  }
  let terminating: Promise<void> | undefined
  return {
    ranks: opts.ranks,
    where: (rank) => of(rank).heartbeat.where,
    lastHeartbeat: (rank) => of(rank).heartbeat.lastAt,
    pid: (rank) => (of(rank).alive ? of(rank).child.pid : undefined),
    send: (rank, m) => of(rank).send(m),
    kill: (rank, signal) => of(rank).kill(signal),
    terminate: () => (terminating ??= stop()),
  }
}

/** Ends every process of `all` (one-shot rank processes). */
function killAll(all: readonly RankHost[]): () => Promise<void> {
  return async () => {
    for (const p of all) p.kill()
    await Promise.all(all.map((p) => p.exited))
  }
}

/** Add `more` into `to` (the ranks of an attempt, counted node by node). */
export function addOrigin(to: RanksOrigin | undefined, more: RanksOrigin): void {
  if (!to) return
  to.kept += more.kept
  to.spares += more.spares
  to.spawned += more.spawned
}

/** What a node's rank processes load: the program, for a run of at most `size` ranks. */
export interface NodeHostsOptions {
  programFile: string
  tsconfig: string | undefined
  compiled?: CompiledProgram
  /** The run's largest rank count (the status slots of a process's heartbeat thread): a run only shrinks. */
  size: number
  heartbeatMs: number
  /** The run's secret, for the handshakes of the ranks they run: in their environment from the start, as every rank's. */
  key: Uint8Array | undefined
  /** Hosts that stop in time run the next attempt (default true); false (`--no-keep-survivors`): each attempt's are killed after it. */
  keep?: boolean
  /** A rank told to stop that has not stopped after this long (ms) is killed (default 1000, as with `--spares`). */
  abortTimeoutMs?: number
}

/** Messages of a host besides its rank's (spare-host.mjs). */
type HostMessage = RankToLauncher | { type: 'host-ready' } | { type: 'host-idle' }

/** One attempt's use of a host: its rank, and where its messages and exit go until the attempt stops it. */
interface Binding {
  readonly rank: number
  readonly opts: NodeRanksOptions
  readonly on: RankGroupEvents
  /** Set when the attempt ends: nothing of the host reaches the attempt from then on. */
  stopping: boolean
}

/** One rank process of a node (spare-boot.mjs): it loads the program once and runs it for each attempt it is given. */
interface NodeHost {
  readonly process: RankHost
  /** Its heartbeat thread's status slots: it may run any rank below this. */
  readonly size: number
  /** It ran a rank of an earlier attempt (a survivor); false: started ahead or cold. */
  ran: boolean
  /** No run going (never assigned, or it said `host-idle`). */
  idle: boolean
  /** Its rank failed by itself: its state is not trusted for another run (its writes may still be going). */
  tainted: boolean
  bound: Binding | undefined
  /** Set while an attempt stops it: not given to another attempt before that ends. */
  stopping: Promise<void> | undefined
  idleWaiters: Array<() => void>
}

/**
 * A node's rank processes across the attempts of a cluster run (node 0's and
 * every other node's supervisor own one). Each is a `spare-boot.mjs` host, as
 * with `--spares` on one host: it loads the program and the rank runtime once
 * and runs the program for each rank it is assigned. An attempt's ranks on
 * this node are its hosts in slot order (host i runs the slot's i-th rank,
 * whatever global number the membership gives it: a shrink renumbers). When
 * an attempt ends, a healthy host is told to `abort` and, once its run has
 * unwound and settled its background writes (`host-idle`), kept for the next
 * attempt with its program loaded and its last run's large buffers reused;
 * one that failed by itself, stopped beating or does not stop within
 * `abortTimeoutMs` is killed, and the next attempt starts a new one. A
 * spare node's hosts start ahead (`ahead`) and touch the buffers they are
 * told of (`warm`) until they get ranks.
 *
 * Nothing of an earlier attempt reaches a later one: a host is assigned again
 * only once idle (its IPC is ordered: nothing of the stopped run comes after
 * `host-idle`), an attempt's messages are dropped once it stops, and the new
 * run's TCP transport carries the new generation (a straggler's connection is
 * refused).
 *
 * ```ts
 * const hosts = new NodeHosts(2, { programFile, tsconfig, compiled, size: 6, heartbeatMs: 200, key }, false)
 * const local = hosts.start(spec, { ranks: [2, 3], node: 1, host, generation, key, onListening }, events)
 * await local.terminate()                                   // survivors kept, idle
 * const next = hosts.start(spec2, { ranks: [2, 3], node: 1, host, generation: generation + 1, key, onListening }, events2)
 * await hosts.close()
 * ```
 */
export class NodeHosts {
  /** How the ranks of the last `start` were obtained. */
  lastOrigin: RanksOrigin = { kept: 0, spares: 0, spawned: 0 }
  private readonly hosts: Array<NodeHost | undefined>
  private sizes: number[] = []
  private closed = false

  constructor(
    count: number,
    private readonly o: NodeHostsOptions,
    ahead: boolean,
  ) {
    this.hosts = new Array<NodeHost | undefined>(count).fill(undefined)
    if (ahead) for (let i = 0; i < count; i++) this.spawn(i, o.size)
  }

  /** Touch buffers of these sizes ahead (the largest set a rank reported) in the hosts that never ran a rank. */
  warm(sizes: number[]): void {
    this.sizes = sizes
    for (const h of this.hosts) if (h && !h.ran && h.idle && !h.bound) h.process.send({ type: 'warm', sizes })
  }

  /** An attempt's ranks on this node: kept hosts first (same slot position), else new ones. */
  start(spec: RankGroupSpec, opts: NodeRanksOptions, on: RankGroupEvents): NodeRanks {
    if (this.closed) throw new InternalError(`node ${opts.node}: ranks started after its processes were closed`)
    const { transport: _t, programFile: _p, tsconfig: _c, compiled: _x, heartbeatMs: _h, ...common } = spec
    const origin: RanksOrigin = { kept: 0, spares: 0, spawned: 0 }
    const byRank = new Map<number, RankHost>()
    const used: Array<{ h: NodeHost; b: Binding }> = []
    opts.ranks.forEach((rank, i) => {
      let h = this.hosts[i]
      if (h && this.reusable(h, spec.size)) {
        if (h.ran) origin.kept++
        else origin.spares++
      } else {
        h?.process.kill()
        h = this.spawn(i, Math.max(this.o.size, spec.size))
        origin.spawned++
      }
      const b: Binding = { rank, opts, on, stopping: false }
      h.bound = b
      h.idle = false
      byRank.set(rank, h.process)
      used.push({ h, b })
      const init = { ...common, rank, inject: spec.inject.filter((x) => x.rank === rank), injectFired: spec.injectFired ?? [], endpoints: [], node: opts.node, tcp: { host: opts.host, generation: opts.generation } }
      h.process.send({ type: 'assign', init })
    })
    // A slot has as many ranks as the node has hosts; any more are not needed.
    for (let i = opts.ranks.length; i < this.hosts.length; i++) this.hosts[i]?.process.kill()
    this.lastOrigin = origin
    return nodeRanksOver(opts, byRank, () => Promise.all(used.map(({ h, b }) => this.stop(h, b))).then(() => undefined))
  }

  /** Kill every host (the run is over). */
  async close(): Promise<void> {
    this.closed = true
    const all = this.hosts.filter((h): h is NodeHost => h !== undefined)
    for (const h of all) h.process.kill()
    await Promise.all(all.map((h) => h.process.exited))
  }

  private reusable(h: NodeHost, size: number): boolean {
    return h.process.alive && h.idle && !h.tainted && h.stopping === undefined && h.size >= size && (h.bound === undefined || h.bound.stopping)
  }

  /** End a host's run of one attempt: kept when it stops in time and its state is trusted, else killed. */
  private stop(h: NodeHost, b: Binding): Promise<void> {
    b.stopping = true
    const done = (async () => {
      const p = h.process
      if (!p.alive) return
      const kill = async () => {
        p.kill()
        await p.exited
      }
      if (this.closed || h.tainted || this.o.keep === false) return kill()
      // A process silent longer than an abort may take (hung, stopped) cannot read one: kill it at once. A
      // shorter silence is a busy rank on a loaded host (a long step): asked, it stops, and is kept, sparing a
      // new process's start, which costs more than the wait.
      const abortTimeoutMs = this.o.abortTimeoutMs ?? 1000
      if (performance.now() - p.heartbeat.lastAt > Math.max(3 * this.o.heartbeatMs, abortTimeoutMs)) return kill()
      if (!h.idle) {
        p.send({ type: 'abort' })
        let timer: NodeJS.Timeout | undefined
        const stoppedInTime = await Promise.race([
          new Promise<boolean>((resolve) => h.idleWaiters.push(() => resolve(true))),
          p.exited.then(() => false),
          new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), abortTimeoutMs))),
        ])
        clearTimeout(timer)
        if (!stoppedInTime || h.tainted) return kill()
      }
      h.ran = true
    })()
    h.stopping = done
    return done.finally(() => {
      if (h.stopping === done) h.stopping = undefined
      if (h.bound === b) h.bound = undefined
    })
  }

  private spawn(i: number, size: number): NodeHost {
    const { programFile, tsconfig, compiled, heartbeatMs, key } = this.o
    // `process` is filled in next: the host's handlers read the record it belongs to.
    const h: NodeHost = { process: undefined as unknown as RankHost, size, ran: false, idle: true, tainted: false, bound: undefined, stopping: undefined, idleWaiters: [] }
    const proc = startRankHost<HostMessage>(
      'spare-boot.mjs',
      { programFile, tsconfig, compiled, size, heartbeatMs, id: i },
      {
        message: (m) => this.onMessage(h, m),
        startFailed: (e, reportExit) => {
          const b = h.bound
          if (b && !b.stopping) b.on.message({ type: 'load-error', rank: b.rank, message: `cannot start a rank process: ${e.message}` })
          reportExit({ code: null, signal: null })
        },
        exit: (how) => {
          const b = h.bound
          if (b && !b.stopping) b.on.exit(b.rank, how)
        },
      },
      rankEnvironment(key),
    )
    Object.assign(h, { process: proc })
    this.hosts[i] = h
    return h
  }

  private onMessage(h: NodeHost, m: HostMessage): void {
    if (m.type === 'host-ready') {
      if (this.sizes.length > 0 && !h.ran && !h.bound) h.process.send({ type: 'warm', sizes: this.sizes })
      return
    }
    if (m.type === 'host-idle') {
      h.idle = true
      for (const w of h.idleWaiters.splice(0)) w()
      return
    }
    const b = h.bound
    if (!b || b.stopping) return // a message of a run already stopped
    // A rank that failed leaves its process to the kill: its state is not trusted again.
    if (m.type === 'error' || m.type === 'load-error') h.tainted = true
    if (m.type === 'listening') b.opts.onListening(m)
    else b.on.message(m)
  }
}

/** Gathers every rank's endpoint of one generation and says when the table is complete. */
export class EndpointTable {
  private readonly endpoints: Array<{ host: string; port: number } | undefined>
  private count = 0

  constructor(
    readonly size: number,
    readonly generation: number,
  ) {
    this.endpoints = new Array(size).fill(undefined)
  }

  /** Record one rank's endpoint; returns the full table once every rank has announced, else undefined. Other generations are ignored. */
  add(m: Listening): Array<{ host: string; port: number }> | undefined {
    if (m.generation !== this.generation || m.rank < 0 || m.rank >= this.size || this.endpoints[m.rank]) return undefined
    this.endpoints[m.rank] = { host: m.host, port: m.port }
    return ++this.count === this.size ? (this.endpoints as Array<{ host: string; port: number }>) : undefined
  }
}

/** Generation numbers of the one-host TCP groups this process starts (each attempt a new one). */
let generations = 0

/**
 * `--transport tcp` on one host: one process per rank, TCP over loopback
 * between them (to test the transport, or compare it with Unix sockets).
 * Each attempt's ranks get a fresh random key: another user's process on
 * this host cannot join them.
 *
 * ```ts
 * const group = startTcpGroup(spec, { message, exit })
 * ```
 */
export const startTcpGroup: StartRankGroup = (spec, on) => {
  const generation = ++generations
  const table = new EndpointTable(spec.size, generation)
  const ranks = Array.from({ length: spec.size }, (_, r) => r)
  const local = startNodeRanks(
    spec,
    {
      ranks,
      node: 0,
      host: '127.0.0.1',
      generation,
      key: randomBytes(32),
      onListening: (m) => {
        const all = table.add(m)
        if (all) for (const r of ranks) local.send(r, { type: 'peers', generation, endpoints: all })
      },
    },
    on,
  )
  const group: RankGroup = {
    size: spec.size,
    transport: 'tcp',
    where: (rank) => local.where(rank),
    lastHeartbeat: (rank) => local.lastHeartbeat(rank),
    pid: (rank) => local.pid(rank),
    send: (rank, m) => local.send(rank, m),
    kill: (rank, signal) => local.kill(rank, signal),
    terminate: () => local.terminate(),
  }
  return group
}
