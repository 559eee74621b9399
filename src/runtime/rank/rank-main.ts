import { existsSync } from 'node:fs'
import type { MessagePort } from 'node:worker_threads'
import type { FaultToleranceConfig } from '../../checkpoint/config.js'
import type { CheckpointControl } from '../../checkpoint/control.js'
import type { CodeIdentity } from '../../checkpoint/identity/code.js'
import { errorRecord, PreemptedError } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import { formatOptions, parseOptions, type OptionSpecs, type OptionValues } from '../../skeletons/options.js'
import { PHASES } from '../../skeletons/phase.js'
import type { Program } from '../../skeletons/program.js'
import type { Injection, RandomInjection } from '../inject.js'
import type { ControlPort } from '../protocol.js'
import { RankInjections } from './rank-injections.js'
import { runSession } from './rank-session.js'
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
  const { control, rank } = init
  if (init.mode === 'describe') {
    control.postMessage({
      type: 'describe',
      name: program.name,
      description: program.description ?? '',
      optionsHelp: formatOptions(program.options),
    })
    return
  }
  let options: OptionValues<OptionSpecs>
  try {
    options = parseOptions(program.options, init.argv)
  } catch (e) {
    control.postMessage({ type: 'config-error', rank, message: (e as Error).message })
    return
  }
  const status = new RankStatus(init.status, rank)
  const injections = new RankInjections(init, status)
  const session: CheckpointControl = { preemptRequested: false, preemptible: true, faults: injections }
  let comm: Communicator | undefined
  let aborted = false
  // A rank process's large buffers: from warm memory if its host has some; their sizes go to the launcher.
  const allocations = new RankAllocations(init.warm)
  // Taken when the run is told to stop, while its domains are certainly alive: a collection during the
  // unwinding could otherwise drop them before they are handed to the next run.
  let stoppedBuffers: SharedArrayBuffer[] = []
  control.onMessage((m) => {
    if (m.type === 'preempt') session.preemptRequested = true
    if (m.type === 'checkpoint') session.checkpointRequested = true
    // Closing fails every wait for a peer, so `main` unwinds at its next one.
    if (m.type === 'abort') {
      aborted = true
      session.stopped = true
      stoppedBuffers = allocations.liveBuffers()
      comm?.close()
    }
  })
  try {
    comm =
      init.transport.kind === 'threads'
        ? new ThreadCommunicator(rank, init.size, init.transport.ports, init.transport.channels)
        : init.transport.kind === 'tcp'
          ? await connectTcpCommunicator(rank, init.size, tcpOptions(init.transport, init))
          : await connectSocketCommunicator(rank, init.size, init.transport.endpoints)
    if (aborted) comm.close()
    // Rank processes only: thread ranks share their launcher's memory.
    const warmable = comm instanceof StreamCommunicator ? comm : undefined
    if (warmable) warmable.allocator = allocations.allocate
    let reported = ''
    const value = await runSession({
      program,
      comm,
      status,
      options,
      // `{node}` and `{rank}` in the directories name this rank's own (disk and memory level).
      ft: init.ft && ranksOwnDirs(init.ft, init.node ?? 0, rank),
      code: init.code,
      control: session,
      log: (text, once) => control.postMessage(once === undefined ? { type: 'log', rank, text } : { type: 'log', rank, text, once }),
      onCheckpoint: (e) => {
        control.postMessage({ type: 'checkpoint', rank, ...e })
        allocations.release()
        if (!warmable) return
        // What a recovery at this checkpoint allocates: the live large buffers and the read buffer of this
        // file (its size on any level). Sent when it changed (a domain grew), not at every checkpoint.
        const sizes = allocations.report([readBufferBytes(e.bytes)])
        const key = sizes.join(',')
        if (key === reported) return
        reported = key
        control.postMessage({ type: 'buffers', rank, sizes })
      },
      onResumed: (r) => {
        control.postMessage({ type: 'resumed', rank, ...r })
        allocations.release()
        if (allocations.warmBytes > 0) {
          const size = formatSize(allocations.warmBytes)
          const text = allocations.warmFrom === 'touched' ? `warm spare: ${size} of memory touched ahead` : `kept process: ${size} of its last run's memory reused`
          control.postMessage({ type: 'log', rank, text })
        }
      },
      onStep: rank === 0 ? progressReporter(control) : undefined,
      onSkeletonStart: (skeleton, total, name) => injections.skeletonStarts(skeleton, total, name),
    })
    // Errors scheduled by the program (timers, setImmediate) fire before the result counts:
    // supersteps that never wait may not have let the event loop run them yet.
    await new Promise<void>((resolve) => setImmediate(resolve))
    status.phase('done')
    const text = rank === 0 && program.format ? program.format(value, options) : undefined
    control.postMessage({ type: 'result', rank, value, text })
  } catch (e) {
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
  } finally {
    comm?.close()
    allocations.release()
    // Stopped from outside, the run has waited for its background writes (runSession): its buffers are free.
    if (aborted) init.recycle?.(stoppedBuffers)
  }
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
    onRefused: (why) => control.postMessage({ type: 'log', rank, text: `warning: ${why}` }),
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
