import { join } from 'node:path'
import { Worker, type MessagePort } from 'node:worker_threads'
import { bootUrl } from '../boot-files.js'
import { ConfigError, InternalError } from '../../errors.js'
import type { CompiledProgram } from '../compiled-program.js'
import type { RankExit, RankGroup, RankGroupEvents, RankGroupSpec, RankWhere, StartRankGroup, Transport } from '../group.js'
import type { HeartbeatMonitor } from './heartbeat.js'
import { startRankHost } from './rank-host.js'
import { createSocketDirectory, removeSocketDirectory } from './socket-dir.js'
import type { LauncherToRank, RankToLauncher } from '../protocol.js'
import { createStatusBuffer, readStatus } from '../status.js'
import { threadRankInit, wire } from './thread-group.js'
import { channelHeaders } from '../transport/threads.js'
import { warmSizes } from '../rank/warm-memory.js'

const THREAD_BOOT = bootUrl('spare-thread-boot.mjs')
/** New spares start at an attempt's first progress, or this long after it started (a program without skeletons). */
const REFILL_AFTER_MS = 5000

/** How the ranks of an attempt were obtained. */
export interface RanksOrigin {
  /** Survivors of the previous attempt, run again in their own process or thread. */
  kept: number
  /** Warm spares: the program was loaded ahead. */
  spares: number
  /** Started cold (the first attempt, or no spare left). */
  spawned: number
}

export interface SparePoolOptions {
  programFile: string
  tsconfig: string | undefined
  /** The program compiled at run start, when it was (compiled-program.ts). */
  compiled?: CompiledProgram
  /** Ranks of the run (every attempt has as many). */
  size: number
  transport: Transport
  heartbeatMs: number
  /** Warm spares kept ready beside the running ranks. */
  spares: number
  /**
   * After a failure, survivors stop their run and run the program again in
   * the same process or thread (true), or are killed and replaced by spares
   * like the failed rank (false).
   */
  keepSurvivors: boolean
  /** A rank told to stop that has not stopped after this long (ms) is killed. */
  abortTimeoutMs?: number
}

/** Messages a host sends besides its rank's (spare-host.mjs). */
type HostMessage = RankToLauncher | { type: 'host-ready' } | { type: 'host-idle' }
/** Messages to a host besides its rank's: touch buffers of these sizes ahead (warm-memory.ts). */
type ToHost = LauncherToRank | { type: 'warm'; sizes: number[] }

/** One warm process or thread: loads the program once and runs it for each rank it is given. */
interface Host {
  readonly id: number
  /** The program is loaded (a spare that is not ready yet still beats a cold start). */
  ready: boolean
  /** An assignment was sent and its run has not ended. */
  running: boolean
  alive: boolean
  /** Its rank failed: its process is not trusted for another run. */
  tainted: boolean
  /** The rank it holds in a running attempt. */
  assigned: { group: GroupState; rank: number } | undefined
  /** The rank it held in the last attempt (a survivor keeps its number, and its warm heap and code). */
  lastRank: number
  readonly exited: Promise<void>
  idle: Array<() => void>
  heartbeat: HeartbeatMonitor | undefined
  pid: number | undefined
  assign(init: Record<string, unknown>, transfer: MessagePort[]): void
  send(m: ToHost): void
  kill(signal?: NodeJS.Signals): void
}

interface GroupState {
  on: RankGroupEvents
  stopping: boolean
  status: Int32Array | undefined
}

/**
 * Warm spares: rank processes (or threads) started ahead with the program
 * loaded, waiting for a rank number. An attempt's ranks come from survivors
 * of the previous attempt (kept in their process: they stop their run and
 * run `main` again from the top in recovery mode), then from spares, then
 * from cold starts. The first spares start with the run's ranks; after a
 * recovery, new spares are started in the background once the new attempt
 * has computed its first superstep (or after 5 s), so that loading them does
 * not slow the recovery down.
 *
 * ```ts
 * const pool = new SparePool({ programFile, tsconfig, size: 2, transport: 'processes', heartbeatMs: 200, spares: 1, keepSurvivors: true })
 * const outcome = await runAttempt(pool.start, spec, callbacks)   // again after a failure
 * await pool.close()
 * ```
 */
export class SparePool {
  /** How the ranks of the last attempt were obtained. */
  lastOrigin: RanksOrigin = { kept: 0, spares: 0, spawned: 0 }
  private readonly hosts = new Set<Host>()
  private nextId = 0
  private groups = 0
  private closed = false
  private refillTimer: NodeJS.Timeout | undefined
  private readonly abortTimeoutMs: number
  /** The large buffers each running rank reported, and what a spare process touches ahead from them. */
  private readonly buffers = new Map<number, number[]>()
  private warm: number[] = []

  constructor(private readonly o: SparePoolOptions) {
    checkSpareCount(o.spares, o.size)
    this.abortTimeoutMs = o.abortTimeoutMs ?? 1000
  }

  /** Starts an attempt's ranks on the pool's hosts (a `StartRankGroup`). */
  readonly start: StartRankGroup = (spec, on) => this.startGroup(spec, on)

  /** Hosts neither running a rank nor about to be killed, the ready ones first. */
  get available(): number {
    return this.free().length
  }

  /** Kill every host (the run is over). */
  async close(): Promise<void> {
    this.closed = true
    if (this.refillTimer) clearTimeout(this.refillTimer)
    const all = [...this.hosts]
    for (const h of all) h.kill()
    await Promise.all(all.map((h) => h.exited))
  }

  /**
   * Kill every host and start afresh: a stop signal sent to the process group
   * may be killing a host that was starting (before its handler), its death
   * not seen yet; a host started after the signal can only die of a later one.
   */
  async renew(): Promise<void> {
    const all = [...this.hosts]
    for (const h of all) h.kill()
    await Promise.all(all.map((h) => h.exited))
  }

  private free(): Host[] {
    return [...this.hosts].filter((h) => h.alive && !h.assigned && !h.tainted).sort((a, b) => Number(b.ready) - Number(a.ready) || a.id - b.id)
  }

  private startGroup(spec: RankGroupSpec, on: RankGroupEvents): RankGroup {
    if (spec.size !== this.o.size) throw new InternalError(`spares were started for ${this.o.size} ranks, not ${spec.size}`)
    const state: GroupState = { on, stopping: false, status: undefined }
    const chosen: Host[] = new Array(spec.size)
    const origin: RanksOrigin = { kept: 0, spares: 0, spawned: 0 }
    const free = this.free()
    const take = (h: Host, rank: number) => {
      chosen[rank] = h
      free.splice(free.indexOf(h), 1)
    }
    // Survivors keep their number: their heap and compiled kernel fit that rank's boxes.
    for (const h of [...free]) {
      if (h.lastRank >= 0 && h.lastRank < spec.size && !chosen[h.lastRank]) {
        take(h, h.lastRank)
        origin.kept++
      }
    }
    for (let r = 0; r < spec.size; r++) {
      if (chosen[r]) continue
      const h = free[0]
      if (h) {
        take(h, r)
        if (h.lastRank >= 0) origin.kept++
        else origin.spares++
      } else {
        chosen[r] = this.spawnHost()
        origin.spawned++
      }
    }
    this.lastOrigin = origin

    let where: (rank: number) => RankWhere
    let cleanup = () => {}
    if (this.o.transport === 'processes') {
      const dir = createSocketDirectory(spec.size)
      cleanup = () => removeSocketDirectory(dir)
      const endpoints = chosen.map((_, r) => join(dir, `${r}.sock`))
      const { transport: _t, programFile: _p, tsconfig: _c, compiled: _x, heartbeatMs: _h, ...common } = spec
      chosen.forEach((h, rank) => {
        this.bind(h, state, rank)
        h.assign({ ...common, rank, inject: spec.inject.filter((i) => i.rank === rank), injectFired: spec.injectFired ?? [], endpoints }, [])
      })
      where = (rank) => chosen[rank].heartbeat!.where
    } else {
      const status = createStatusBuffer(spec.size)
      state.status = status
      const ports = wire(spec.size)
      const headers = channelHeaders(spec.size)
      chosen.forEach((h, rank) => {
        this.bind(h, state, rank)
        const init = threadRankInit(spec, rank, ports, headers, status)
        h.assign(init, ports[rank].filter((p): p is MessagePort => p !== undefined))
      })
      where = (rank) => {
        const s = readStatus(status, rank)
        return { skeleton: s.skeleton, step: s.step, phase: s.phase }
      }
    }
    // The run's first spares start with its ranks (ready for an early failure);
    // after a recovery, once the attempt computes (its first progress), or after a few seconds.
    if (this.refillTimer) clearTimeout(this.refillTimer)
    if (this.groups++ === 0) this.refill()
    else {
      this.refillTimer = setTimeout(() => this.refill(), REFILL_AFTER_MS)
      this.refillTimer.unref()
    }

    let stopped: Promise<void> | undefined
    return {
      size: spec.size,
      transport: this.o.transport,
      where,
      lastHeartbeat: (rank) => chosen[rank].heartbeat?.lastAt,
      pid: (rank) => (chosen[rank].alive ? chosen[rank].pid : undefined),
      send: (rank, m) => chosen[rank].send(m),
      kill: (rank, signal) => chosen[rank].kill(signal),
      terminate: () => (stopped ??= this.stopGroup(state, chosen).finally(cleanup)),
    }
  }

  private bind(h: Host, group: GroupState, rank: number): void {
    h.assigned = { group, rank }
    h.running = true
  }

  /** End an attempt: survivors stop their run and become free (or are killed); failed ranks are killed. */
  private async stopGroup(state: GroupState, chosen: Host[]): Promise<void> {
    state.stopping = true
    await Promise.all(
      chosen.map(async (h, rank) => {
        if (!h.alive) return
        if (this.closed || h.tainted || !this.o.keepSurvivors) return this.killAndWait(h)
        // A process that stopped beating (hung, stopped) cannot read an abort: kill it at once.
        if (h.heartbeat && performance.now() - h.heartbeat.lastAt > 3 * this.o.heartbeatMs) return this.killAndWait(h)
        if (h.running) {
          h.send({ type: 'abort' })
          let timer: NodeJS.Timeout | undefined
          const stoppedInTime = await Promise.race([
            new Promise<boolean>((resolve) => h.idle.push(() => resolve(true))),
            h.exited.then(() => false),
            new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), this.abortTimeoutMs))),
          ])
          clearTimeout(timer)
          if (!stoppedInTime) return this.killAndWait(h)
        }
        h.lastRank = rank
      }),
    )
    for (const h of chosen) h.assigned = undefined
  }

  private async killAndWait(h: Host): Promise<void> {
    h.kill()
    await h.exited
  }

  /** Start spares until `spares` hosts are free. */
  private refill(): void {
    if (this.refillTimer) clearTimeout(this.refillTimer)
    this.refillTimer = undefined
    if (this.closed) return
    for (let n = this.free().length; n < this.o.spares; n++) this.spawnHost()
  }

  private onMessage(h: Host, m: HostMessage): void {
    switch (m.type) {
      case 'host-ready':
        h.ready = true
        if (this.warm.length > 0) h.send({ type: 'warm', sizes: this.warm })
        return
      case 'buffers':
        this.noteBuffers(m.rank, m.sizes)
        return
      case 'host-idle': {
        h.running = false
        const waiting = h.idle.splice(0)
        for (const w of waiting) w()
        return
      }
    }
    const a = h.assigned
    if (!a || a.group.stopping) return // a message of a run already stopped
    // A rank that failed leaves its process to the kill: its state is not trusted again.
    if (m.type === 'error' || m.type === 'load-error') h.tainted = true
    if (m.type === 'progress' && this.refillTimer) this.refill()
    a.group.on.message(m)
  }

  /**
   * A rank's large buffers: when they change what a spare should hold, the
   * free spare processes touch that much memory ahead (spare-host.mjs), so
   * that the rank one of them becomes does not fault its pages in during its
   * recovery. Thread spares share their launcher's memory: not warmed.
   */
  private noteBuffers(rank: number, sizes: number[]): void {
    if (this.o.transport !== 'processes') return
    this.buffers.set(rank, sizes)
    const warm = warmSizes(this.buffers)
    if (warm.length === this.warm.length && warm.every((n, i) => n === this.warm[i])) return
    this.warm = warm
    for (const h of this.free()) if (h.ready && h.lastRank < 0) h.send({ type: 'warm', sizes: warm })
  }

  private onExit(h: Host, how: RankExit): void {
    h.alive = false
    this.hosts.delete(h)
    const a = h.assigned
    if (a && !a.group.stopping) a.group.on.exit(a.rank, how)
  }

  private spawnHost(): Host {
    const id = this.nextId++
    const h = this.o.transport === 'processes' ? this.spawnProcess(id) : this.spawnThread(id)
    this.hosts.add(h)
    return h
  }

  private spawnProcess(id: number): Host {
    const { programFile, tsconfig, compiled, size, heartbeatMs } = this.o
    const { h, markExited } = newHost(id, (h) => {
      const proc = startRankHost<HostMessage>('spare-boot.mjs', { programFile, tsconfig, compiled, size, heartbeatMs, id }, {
        message: (m) => this.onMessage(h, m),
        startFailed: (e, reportExit) => {
          const a = h.assigned
          if (a && !a.group.stopping) a.group.on.message({ type: 'load-error', rank: a.rank, message: `cannot start a rank process: ${e.message}` })
          reportExit({ code: null, signal: null })
        },
        exited: () => {
          h.alive = false
        },
        exit: (how) => {
          this.onExit(h, how)
          markExited()
        },
      })
      return {
        heartbeat: proc.heartbeat,
        pid: proc.child.pid,
        assign: (init) => proc.send({ type: 'assign', init }),
        send: (m) => proc.send(m),
        kill: (signal = 'SIGKILL') => {
          if (h.alive) proc.child.kill(signal)
        },
      }
    })
    return h
  }

  private spawnThread(id: number): Host {
    const w = new Worker(THREAD_BOOT, { workerData: { programFile: this.o.programFile, tsconfig: this.o.tsconfig, compiled: this.o.compiled, id } })
    const { h, markExited } = newHost(id, (h) => ({
      heartbeat: undefined,
      pid: undefined,
      assign: (init, transfer) => w.postMessage({ type: 'assign', init }, transfer),
      send: (m) => {
        if (h.alive) w.postMessage(m)
      },
      kill: () => {
        // Stopping is all that is asked: a terminate() that reports a problem leaves nothing more to do.
        if (h.alive) w.terminate().catch(() => undefined)
      },
    }))
    w.on('message', (m: HostMessage) => this.onMessage(h, m))
    w.on('error', (e) => {
      const a = h.assigned
      if (!a || a.group.stopping || !a.group.status) return
      const s = readStatus(a.group.status, a.rank)
      this.onMessage(h, { type: 'error', rank: a.rank, skeleton: s.skeleton, step: s.step, phase: s.phase, name: e.name, code: undefined, message: `uncaught ${e.message}`, stack: e.stack })
    })
    w.on('exit', (code) => {
      this.onExit(h, { code, signal: null })
      markExited()
    })
    return h
  }
}

/** What reaches a host: its heartbeat and pid (processes), and how to assign, message and kill it. */
type HostIo = Pick<Host, 'heartbeat' | 'pid' | 'assign' | 'send' | 'kill'>

/** A host in its starting state (alive, loading, unassigned); `io` may read the record it belongs to (`alive`). */
function newHost(id: number, io: (h: Host) => HostIo): { h: Host; markExited: () => void } {
  let markExited = () => {}
  const exited = new Promise<void>((resolve) => (markExited = resolve))
  // Every field but the I/O ones, type-checked; the I/O ones are filled in next (they may read the record).
  const state: Omit<Host, keyof HostIo> = { id, ready: false, running: false, alive: true, tainted: false, assigned: undefined, lastRank: -1, exited, idle: [] }
  const h = state as Host
  Object.assign(h, io(h))
  return { h, markExited }
}

/** More spares than ranks can never be used: one failure replaces at most every rank. */
export function checkSpareCount(spares: number, ranks: number): void {
  if (!Number.isInteger(spares) || spares < 0) throw new ConfigError(`--spares must be a non-negative whole number (got ${spares})`)
  if (spares > ranks) {
    throw new ConfigError(`--spares ${spares} is more than the ${ranks} rank(s): a failure replaces at most every rank, so at most ${ranks} spare(s) can ever be used`)
  }
}
