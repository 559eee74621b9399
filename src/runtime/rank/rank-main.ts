import { existsSync } from 'node:fs'
import type { MessagePort } from 'node:worker_threads'
import type { FaultToleranceConfig } from '../../checkpoint/config.js'
import type { CheckpointControl } from '../../checkpoint/control.js'
import type { CheckpointEvent } from '../../checkpoint/events.js'
import type { CodeIdentity } from '../../checkpoint/identity/code.js'
import { errorRecord, PreemptedError } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import { formatOptions, parseOptions, type OptionSpecs, type OptionValues } from '../../skeletons/options.js'
import { PHASES } from '../../skeletons/phase.js'
import type { Program } from '../../skeletons/program.js'
import type { Injection, RandomInjection } from '../inject.js'
import type { ControlPort, LauncherToRank, LogKind } from '../protocol.js'
import { RankInjections } from './rank-injections.js'
import { runSession, type RankSession } from './rank-session.js'
import { expandDir, matchingDirectories } from '../cluster-env.js'
import { connectSocketCommunicator } from '../transport/sockets.js'
import { StreamCommunicator } from '../transport/stream-communicator.js'
import { RankAllocations, type RecycleBuffers, type WarmMemory } from './warm-memory.js'
import { readBufferBytes } from '../../checkpoint/store/checkpoint-store.js'
import { memoryLevelDirectoryIn } from '../../checkpoint/store/memory-level.js'
import { formatSize } from '../../domains/memory.js'
import { connectTcpCommunicator, type TcpConnectOptions } from '../transport/tcp.js'
import { RankStatus, readStatus } from '../status.js'
import { SparseClock } from '../../skeletons/sparse-clock.js'
import { withSourceLocations } from '../boot/source-locations.mjs'
import { ThreadCommunicator, type ChannelHeaders } from '../transport/threads.js'

/** How this rank reaches its peers. */
export type RankTransportInit =
  | { kind: 'threads'; ports: Array<MessagePort | undefined>; channels: Array<ChannelHeaders | undefined> }
  | { kind: 'processes'; endpoints: string[] }
  /** TCP: listen on `host`, learn every rank's endpoint from the launcher (generation of this attempt); `key`: the run's secret (none: no handshake). */
  | { kind: 'tcp'; host: string; generation: number; key?: Uint8Array }

/** What the launcher hands to each rank (through the boot file of its transport). */
export interface RankInit {
  mode: 'run' | 'describe'
  rank: number
  size: number
  argv: string[]
  transport: RankTransportInit
  /** This rank's status slot array (threads: shared with the launcher; processes: with the heartbeat thread). */
  status: Int32Array
  control: ControlPort
  ft: FaultToleranceConfig | undefined
  /** Failures to inject on this rank. */
  inject: Injection[]
  injectRandom?: RandomInjection
  injectFired?: Injection[]
  /** End this rank abruptly (SIGKILL for a process). */
  die: () => never
  /** The program file and every module URL loaded with it (load-program.mjs): the code identity checkpoints carry. */
  code?: { programFile: string; modules: string[]; identity?: CodeIdentity }
  /** This rank's node (cluster runs; 0 otherwise): fills `{node}` in the checkpoint directory. */
  node?: number
  /** Memory a warm spare touched ahead for this rank, or a survivor's from its last run (spare-host.mjs; rank processes only). */
  warm?: WarmMemory
  /** Where a run stopped from outside leaves its large buffers for the next run in this process. */
  recycle?: RecycleBuffers
}

/** Run `program` as one rank; every outcome is reported on the control port. */
export async function runRank(program: Program, init: RankInit): Promise<void> {
  if (init.mode === 'describe') return describeProgram(program, init.control)
  const options = readProgramOptions(program, init)
  if (options === undefined) return
  const run = new RankRun(init)
  try {
    const comm = await run.connect()
    const value = await runSession(sessionOf(program, options, comm, run))
    // Errors scheduled by the program (timers, setImmediate) fire before the result counts:
    // supersteps that never wait may not have let the event loop run them yet.
    await new Promise<void>((resolve) => setImmediate(resolve))
    run.status.phase('done')
    const text = init.rank === 0 && program.format ? program.format(value, options) : undefined
    init.control.postMessage({ type: 'result', rank: init.rank, value, text })
  } catch (e) {
    reportEnd(init, e, run.aborted)
  } finally {
    run.close()
  }
}

/** `molotof run --help <program>`: the launcher asks a rank for the program's name and options, nothing runs. */
function describeProgram(program: Program, control: ControlPort): void {
  control.postMessage({ type: 'describe', name: program.name, description: program.description ?? '', optionsHelp: formatOptions(program.options) })
}

/** The program's own options, or none when they are refused (a `config-error` told the launcher: bad input, no restart). */
function readProgramOptions(program: Program, init: RankInit): OptionValues<OptionSpecs> | undefined {
  try {
    return parseOptions(program.options, init.argv)
  } catch (e) {
    init.control.postMessage({ type: 'config-error', rank: init.rank, message: (e as Error).message })
    return undefined
  }
}

/**
 * One run of the program on this rank, as the launcher sees it: its status slot, injections, the requests the
 * launcher sends (preempt, checkpoint, abort) and its large buffers, kept for the next run when stopped from outside.
 */
class RankRun {
  readonly status: RankStatus
  readonly injections: RankInjections
  /** What the checkpoint code reads at its checkpoint points: the launcher's requests. */
  readonly control: CheckpointControl
  /** A rank process's large buffers: from warm memory if its host has some; their sizes go to the launcher. */
  readonly allocations: RankAllocations
  private comm: Communicator | undefined
  /** Told to stop from outside (warm spares: a survivor of a failure): its error is the stop's echo. */
  aborted = false
  // Taken when the run is told to stop, while its domains are certainly alive: a collection during the
  // unwinding could otherwise drop them before they are handed to the next run.
  private stoppedBuffers: SharedArrayBuffer[] = []

  constructor(readonly init: RankInit) {
    this.status = new RankStatus(init.status, init.rank)
    this.injections = new RankInjections(init, this.status)
    this.control = { preemptRequested: false, preemptible: true, faults: this.injections }
    this.allocations = new RankAllocations(init.warm)
    init.control.onMessage((m) => this.onLauncherMessage(m))
  }

  /** The launcher's requests, applied at the run's next checkpoint point or wait for a peer. */
  private onLauncherMessage(m: LauncherToRank): void {
    if (m.type === 'preempt') this.control.preemptRequested = true
    if (m.type === 'checkpoint') this.control.checkpointRequested = true
    // Closing fails every wait for a peer, so `main` unwinds at its next one.
    if (m.type === 'abort') {
      this.aborted = true
      this.control.stopped = true
      this.stoppedBuffers = this.allocations.liveBuffers()
      this.comm?.close()
    }
  }

  /** The communicator of the transport; closed at once when an abort came while it connected. */
  async connect(): Promise<Communicator> {
    const { init } = this
    const t = init.transport
    const comm =
      t.kind === 'threads'
        ? new ThreadCommunicator(init.rank, init.size, t.ports, t.channels)
        : t.kind === 'tcp'
          ? await connectTcpCommunicator(init.rank, init.size, tcpOptions(t, init))
          : await connectSocketCommunicator(init.rank, init.size, t.endpoints)
    this.comm = comm
    if (this.aborted) comm.close()
    // Rank processes only: thread ranks share their launcher's memory.
    if (comm instanceof StreamCommunicator) comm.allocator = this.allocations.allocate
    return comm
  }

  close(): void {
    this.comm?.close()
    this.allocations.release()
    // Stopped from outside, the run has waited for its background writes (runSession): its buffers are free.
    if (this.aborted) this.init.recycle?.(this.stoppedBuffers)
  }
}

/** What `runSession` needs, with every report of the run going to the launcher on the control port. */
function sessionOf(program: Program, options: OptionValues<OptionSpecs>, comm: Communicator, run: RankRun): RankSession {
  const { init } = run
  const { control, rank } = init
  return {
    program,
    comm,
    status: run.status,
    options,
    // `{node}` and `{rank}` in the directories name this rank's own (disk and memory level).
    ft: init.ft && ranksOwnDirs(init.ft, init.node ?? 0, rank),
    code: init.code,
    control: run.control,
    log: logTo(control, rank),
    onCheckpoint: checkpointReporter(control, rank, run.allocations, comm instanceof StreamCommunicator),
    onResumed: (r) => {
      control.postMessage({ type: 'resumed', rank, ...r })
      reportWarmMemory(control, rank, run.allocations)
    },
    onStep: rank === 0 ? progressReporter(control) : undefined,
    onSkeletonStart: (skeleton, total, name) => run.injections.skeletonStarts(skeleton, total, name),
  }
}
/** A log line to the launcher, with its kind (see LogKind): said by this layer, or told by its first word (see kindOfUntaggedLine). */
function logTo(control: ControlPort, rank: number): (text: string, once?: string, kind?: LogKind) => void {
  return (text, once, kind = kindOfUntaggedLine(text)) =>
    control.postMessage({ type: 'log', rank, text, ...(once === undefined ? {} : { once }), ...(kind === undefined ? {} : { kind }) })
}

/**
 * The kind of a line given none: the program's own `ctx.log` lines (the checkpoint code says the kind of its
 * warnings and notices). A program line starting `warning:` is kept by `--log events` as a warning; the one
 * place a line's text decides its kind, so the launcher and the CLI decide on the kind alone.
 */
function kindOfUntaggedLine(text: string): LogKind | undefined {
  if (text.startsWith('warning:')) return 'warning'
  return undefined
}

/**
 * Each committed checkpoint to the launcher; a rank process also sends what a recovery at this checkpoint
 * allocates (its live large buffers and the read buffer of this file, its size on any level), for spares to
 * touch ahead: when it changed (a domain grew), not at every checkpoint.
 */
function checkpointReporter(control: ControlPort, rank: number, allocations: RankAllocations, warmable: boolean): (e: CheckpointEvent) => void {
  let reported = ''
  return (e) => {
    control.postMessage({ type: 'checkpoint', rank, ...e })
    allocations.release()
    if (!warmable) return
    const sizes = allocations.report([readBufferBytes(e.bytes)])
    const key = sizes.join(',')
    if (key === reported) return
    reported = key
    control.postMessage({ type: 'buffers', rank, sizes })
  }
}

/** After a recovery: how much memory a warm spare or a kept process had ready (what made the restart fast). */
function reportWarmMemory(control: ControlPort, rank: number, allocations: RankAllocations): void {
  allocations.release()
  if (allocations.warmBytes === 0) return
  const size = formatSize(allocations.warmBytes)
  const text = allocations.warmFrom === 'touched' ? `warm spare: ${size} of memory touched ahead` : `kept process: ${size} of its last run's memory reused`
  control.postMessage({ type: 'log', rank, text })
}

/** A run that did not finish: preempted after its checkpoint, or an error, with where the rank was. */
function reportEnd(init: RankInit, e: unknown, aborted: boolean): void {
  const { control, rank } = init
  const where = readStatus(init.status, rank)
  if (e instanceof PreemptedError) {
    control.postMessage({ type: 'preempted', rank, seq: e.seq, skeleton: where.skeleton, step: where.step })
    return
  }
  control.postMessage({
    type: 'error',
    rank,
    skeleton: where.skeleton,
    step: where.step,
    phase: PHASES.includes(where.phase) ? where.phase : 'light',
    // Stopped from outside, the error is the stop's own echo: its stack would only delay the recovery.
    ...errorRecord(aborted ? e : withSourceLocations(e), !aborted),
  })
}

/** The TCP transport's options: endpoints are exchanged through the launcher on the control port. */
function tcpOptions(t: { host: string; generation: number; key?: Uint8Array }, init: RankInit): TcpConnectOptions {
  const { control, rank } = init
  return {
    host: t.host,
    generation: t.generation,
    key: t.key,
    exchange: (mine) =>
      new Promise((resolve) => {
        control.onMessage((m) => {
          if (m.type === 'peers' && m.generation === t.generation) resolve(m.endpoints)
        })
        control.postMessage({ type: 'listening', rank, generation: t.generation, host: mine.host, port: mine.port })
      }),
    onRefused: (why) => control.postMessage({ type: 'log', rank, text: `warning: ${why}`, kind: 'warning' }),
  }
}

/** Rank 0 reports its progress about every 250 ms (and at the last step), without reading the clock every step. */
function progressReporter(control: ControlPort): (skeleton: number, step: number, total: number | undefined) => void {
  const clock = new SparseClock(250)
  let first = true
  return (skeleton, step, total) => {
    if (!clock.due() && !first && (total === undefined || step < total - 1)) return
    first = false
    control.postMessage({ type: 'progress', rank: 0, skeleton, step, total })
  }
}

/**
 * The configuration with `{node}` and `{rank}` filled in, in the disk and the memory level's directory; on a resume,
 * also the other directories of the run on this host (see FaultToleranceConfig.resumeSearch).
 */
function ranksOwnDirs(ft: FaultToleranceConfig, node: number, rank: number): FaultToleranceConfig {
  const dir = expandDir(ft.dir, node, rank)
  const memory = ft.memory?.dir === undefined ? ft.memory : { ...ft.memory, dir: expandDir(ft.memory.dir, node, rank) }
  const own = memory ? { ...ft, dir, memory } : { ...ft, dir }
  if (!ft.resume) return own
  // The memory level this run keeps and the earlier run's: every directory of the run on this host but this rank's own.
  const memoryTemplates = [...(ft.memory?.dir !== undefined ? [ft.memory.dir] : []), ...(ft.resumeMemoryDirs ?? [])]
  // A memory directory that is not there stays: it is named among the places a refusal says it looked.
  // Each as the level really is: a directory that held the user's files keeps it in its sub-directory (memoryLevelDirectoryIn).
  const ownMemory = memory?.dir === undefined ? undefined : memoryLevelDirectoryIn(memory.dir)
  const memoryDirs = [...new Set(memoryTemplates.flatMap((t) => matchingDirectories(t)).map(memoryLevelDirectoryIn))].filter((d) => d !== ownMemory)
  const diskDirs = matchingDirectories(ft.dir).filter((d) => d !== dir && existsSync(d))
  return { ...own, resumeSearch: { memory: memoryDirs, disk: diskDirs } }
}
