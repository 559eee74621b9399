import { randomBytes } from 'node:crypto'
import { InternalError } from '../../errors.js'
import type { CompiledProgram } from '../compiled-program.js'
import type { RankGroup, RankGroupEvents, RankGroupSpec, RankWhere, StartRankGroup } from '../group.js'
import { startRank, type RankProcess } from '../groups/process-group.js'
import { startRankHost, type RankHost } from '../groups/rank-host.js'
import type { LauncherToRank, RankToLauncher } from '../protocol.js'
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
  return nodeRanksOver(opts, procs, [...procs.values()])
}

/**
 * A node's share of an attempt's ranks, run by `byRank`'s processes; `terminate` ends every one of `all`
 * (the warm processes of a spare node include those it did not need).
 */
function nodeRanksOver(opts: NodeRanksOptions, byRank: ReadonlyMap<number, RankHost>, all: readonly RankHost[]): NodeRanks {
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
    terminate: () => {
      terminating ??= (async () => {
        for (const p of all) p.kill()
        await Promise.all(all.map((p) => p.exited))
      })()
      return terminating
    },
  }
}

/** What a spare node's warm rank processes load ahead: the program, for a run of `size` ranks. */
export interface WarmHostsOptions {
  programFile: string
  tsconfig: string | undefined
  compiled?: CompiledProgram
  /** The run's rank count (the status slots of its heartbeat thread). */
  size: number
  heartbeatMs: number
  /** The run's secret, for the handshakes of the ranks they become: in their environment from the start, as every rank's. */
  key: Uint8Array | undefined
}

/**
 * A spare node's rank processes, started ahead (spare-boot.mjs, as `--spares`
 * does on one host): each loads the program and the rank runtime, touches
 * the buffers it is told of (`warm`) and waits. `take` makes them an
 * attempt's ranks on this node (TCP transport) without a process start; once
 * taken they are that attempt's, and later attempts start their own.
 *
 * ```ts
 * const warm = startWarmHosts(2, { programFile, tsconfig, compiled, size: 6, heartbeatMs: 200, key })
 * warm.warm([16 << 20])
 * const local = warm.take(spec, { ranks: [2, 3], node: 3, host, generation, onListening }, events)
 * ```
 */
export interface WarmHosts {
  /** Touch buffers of these sizes ahead (the largest set a rank reported). */
  warm(sizes: number[]): void
  /** The hosts as this attempt's ranks, or undefined when there are too few or they are taken already. */
  take(spec: RankGroupSpec, opts: NodeRanksOptions, on: RankGroupEvents): NodeRanks | undefined
  /** Kill those not taken. */
  close(): Promise<void>
}

/** Messages of a warm host besides its rank's (spare-host.mjs). */
type WarmHostMessage = RankToLauncher | { type: 'host-ready' } | { type: 'host-idle' }

export function startWarmHosts(count: number, o: WarmHostsOptions): WarmHosts {
  let sizes: number[] = []
  let taken = false
  let route: ((m: RankToLauncher) => void)[] = []
  let exits: ((how: { code: number | null; signal: NodeJS.Signals | null }) => void)[] = []
  const hosts: RankHost[] = Array.from({ length: count }, (_, id) =>
    startRankHost<WarmHostMessage>('spare-boot.mjs', { programFile: o.programFile, tsconfig: o.tsconfig, compiled: o.compiled, size: o.size, heartbeatMs: o.heartbeatMs, id }, {
      message: (m) => {
        if (m.type === 'host-ready') {
          if (sizes.length > 0) hosts[id].send({ type: 'warm', sizes })
          return
        }
        if (m.type === 'host-idle') return
        route[id]?.(m)
      },
      startFailed: (_e, reportExit) => reportExit({ code: null, signal: null }),
      exit: (how) => exits[id]?.(how),
    }, rankEnvironment(o.key)),
  )
  return {
    warm: (s) => {
      sizes = s
      if (!taken) for (const h of hosts) h.send({ type: 'warm', sizes })
    },
    take: (spec, opts, on) => {
      if (taken || opts.ranks.length > hosts.length || hosts.some((h) => !h.alive)) return undefined
      taken = true
      const { transport: _t, programFile: _p, tsconfig: _c, compiled: _x, heartbeatMs: _h, ...common } = spec
      const byRank = new Map<number, RankHost>()
      route = []
      exits = []
      opts.ranks.forEach((rank, i) => {
        const h = hosts[i]
        byRank.set(rank, h)
        route[i] = (m) => (m.type === 'listening' ? opts.onListening(m) : on.message(m))
        exits[i] = (how) => on.exit(rank, how)
        const init = { ...common, rank, inject: spec.inject.filter((x) => x.rank === rank), injectFired: spec.injectFired ?? [], endpoints: [], node: opts.node, tcp: { host: opts.host, generation: opts.generation } }
        h.send({ type: 'assign', init })
      })
      for (const h of hosts.slice(opts.ranks.length)) h.kill()
      // A warm host serves one attempt: the next one starts rank processes of its own, as on every node.
      return nodeRanksOver(opts, byRank, hosts)
    },
    close: async () => {
      if (taken) return
      for (const h of hosts) h.kill()
      await Promise.all(hosts.map((h) => h.exited))
    },
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
