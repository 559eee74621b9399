import type { FaultToleranceConfig } from '../checkpoint/config.js'
import type { CompiledProgram } from './compiled-program.js'
import type { Injection, RandomInjection } from './inject.js'
import type { LauncherToRank, RankToLauncher } from './protocol.js'
import type { Phase } from '../skeletons/phase.js'

/** What every rank of one attempt is started with, whatever the transport. */
export interface RankGroupSpec {
  /** Absolute path of the program file. */
  programFile: string
  /** tsconfig.json for a TypeScript program (decides what `molotof` resolves to). */
  tsconfig: string | undefined
  /** The program compiled at run start (ranks load it instead of the sources through tsx), when it was. */
  compiled?: CompiledProgram
  size: number
  /** The program's own options, as command-line words. */
  argv: string[]
  ft: FaultToleranceConfig | undefined
  /** Failures to inject in this attempt (each fires once per run: fired ones are left out). */
  inject: Injection[]
  /** Random failure points, drawn by the ranks once the first skeleton's step count is known. */
  injectRandom?: RandomInjection
  /** Points that already fired in an earlier attempt. */
  injectFired?: Injection[]
  /** Heartbeat period of rank processes (ms). */
  heartbeatMs: number
  /** Which transport starts the ranks (threads when absent). */
  transport?: Transport
}

/** Where a rank was when last seen. */
export interface RankWhere {
  skeleton: number
  step: number
  phase: Phase
}

/** How a rank ended, as the transport saw it. */
export interface RankExit {
  code: number | null
  signal: NodeJS.Signals | null
}

export interface RankGroupEvents {
  message(m: RankToLauncher): void
  /** A rank's thread or process ended (expected or not). */
  exit(rank: number, how: RankExit): void
}

/** The ranks of a running attempt as `launch`'s `onGroup` hands them out: to watch or kill them (demonstrations, benchmarks). */
export interface RunningRanks {
  readonly size: number
  readonly transport: Transport
  /** The operating-system process of a rank (processes transport), for /proc figures. */
  pid?(rank: number): number | undefined
  /** Kill one rank abruptly (processes: the signal; threads: terminate). */
  kill(rank: number, signal?: NodeJS.Signals): void
  /** Stop every rank and wait until they are gone. */
  terminate(): Promise<void>
}

/**
 * The ranks of one attempt, started by a transport. The launcher and the
 * supervisor only use this interface, so threads and processes behave alike.
 */
export interface RankGroup extends RunningRanks {
  /** Where a rank was at its last status update (threads: now; processes: last heartbeat). */
  where(rank: number): RankWhere
  /** performance.now() of the rank's last heartbeat; undefined where the transport has none. */
  lastHeartbeat(rank: number): number | undefined
  send(rank: number, m: LauncherToRank): void
}

/** `tcp`: one process per rank, TCP between them (the transport between nodes; on one host, over loopback). */
export type Transport = 'threads' | 'processes' | 'tcp'
export const TRANSPORTS: readonly Transport[] = ['threads', 'processes', 'tcp']

export type StartRankGroup = (spec: RankGroupSpec, on: RankGroupEvents) => RankGroup
