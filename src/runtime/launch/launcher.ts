import { existsSync, statSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { Worker } from 'node:worker_threads'
import { bootUrl } from '../boot-files.js'
import { frozenConfig, type FaultToleranceConfig } from '../../checkpoint/config.js'
import type { CheckpointEvent, ResumedFigures } from '../../checkpoint/events.js'
import { checkRedundancy } from '../../checkpoint/redundancy/sets.js'
import { ConfigError, PreemptedError, ProgramLoadError, RunStoppedError } from '../../errors.js'
import { findUp } from '../../util/find-up.js'
import { runAttempt, type AttemptCallbacks } from './attempt.js'
import { compileProgram } from '../compiled-program.js'
import type { RankGroupSpec, RunningRanks, StartRankGroup, Transport } from '../group.js'
import type { Injection, RandomInjection } from '../inject.js'
import { startTcpGroup } from '../cluster/node-group.js'
import { startProcessGroup } from '../groups/process-group.js'
import type { RankToLauncher } from '../protocol.js'
import { createStatusBuffer } from '../status.js'
import { startThreadGroup } from '../groups/thread-group.js'
import { resolveRunOptions, type RunSettings } from './run-options.js'

/** Options of `launch` (one run, no restarts) and, extended, of `Supervisor`. */
export interface LaunchOptions {
  /** Number of ranks (SPMD copies of the program). */
  ranks: number
  /** The program's own options, as on the command line (`['--n', '512']`). */
  argv?: readonly string[]
  /** `threads` (default): worker threads of this process; `processes`: one child process per rank. */
  transport?: Transport
  /**
   * Receives every line a rank logs (default: print to stdout), with what it tells when it is more than
   * information: `warning` (something passed over or going wrong), `notice` (a choice the run made on its
   * own, such as starting afresh on `resumeRequest: 'or-start'`). `molotof run --log events` prints those two.
   */
  onLog?: (rank: number, text: string, kind?: 'warning' | 'notice') => void
  /** Checkpointing and recovery (off when absent). */
  checkpoint?: FaultToleranceConfig
  /** Called on rank 0's report of each committed checkpoint. */
  onCheckpoint?: (e: CheckpointEvent) => void
  /** Rank 0's progress (throttled to ~4 per second, always the first and last step). */
  onProgress?: (skeleton: number, step: number, total: number | undefined) => void
  /** Called with the ranks of each attempt once started (pids, kill, where). */
  onGroup?: (group: RunningRanks) => void
  /** Failures to inject (tests, demonstrations). */
  inject?: Injection[]
  /** Random failure points (drawn by the ranks from the seed). */
  injectRandom?: RandomInjection
  /** Heartbeat period of rank processes in ms (default 200). */
  heartbeatMs?: number
  /** A rank process silent this long is hung (default 10 × heartbeatMs, at least 2 s). */
  hangTimeoutMs?: number
}

/** What a finished run returns. */
export interface RunResult<R = unknown> {
  /** Rank 0's return value of `main`. */
  value: R
  /** Every rank's return value, in rank order. */
  values: R[]
  /** Rank 0's formatted result, when the program defines `format`. */
  text: string | undefined
  ranks: number
  wallMs: number
}

export interface ProgramDescription {
  name: string
  description: string
  optionsHelp: string
}

export const GROUP_STARTERS: Record<Transport, StartRankGroup> = {
  threads: startThreadGroup,
  processes: startProcessGroup,
  tcp: startTcpGroup,
}

/**
 * Internal, not in the public options: rank 0's report of a finished recovery
 * (tests of `launch` with `resume`; the supervisor reports it as events).
 */
export interface ResumeListenerOption {
  onResumed?: (r: ResumedFigures) => void
}

/**
 * Validate launch options and build the spec every rank of an attempt starts
 * from; `injectFired` are the injection points that fired in an earlier
 * attempt (the supervisor's; left out). `settings`: the options resolved
 * (see run-options.ts), when the caller already has them.
 */
export function groupSpec(programFile: string, opts: LaunchOptions, injectFired?: Injection[], settings: RunSettings = resolveRunOptions(opts)): RankGroupSpec {
  const { ranks, transport, heartbeatMs } = settings
  const file = checkProgramFile(programFile)
  if (opts.checkpoint) checkRedundancy(ranks, opts.checkpoint)
  for (const i of opts.inject ?? []) {
    if (i.rank >= ranks) throw new ConfigError(`--inject rank=${i.rank}: there are only ${ranks} ranks (0..${ranks - 1})`)
  }
  return { programFile: file, tsconfig: findTsconfig(file), size: ranks, argv: [...(opts.argv ?? [])], ft: opts.checkpoint && frozenConfig(opts.checkpoint), inject: opts.inject ?? [], injectRandom: opts.injectRandom, injectFired, heartbeatMs, transport }
}

/**
 * Run a program file once on N ranks and wait for all of them. Any rank that
 * throws, exits, is killed or hangs stops every rank and rejects with an error
 * naming the rank, skeleton, step and phase. (`Supervisor` adds
 * automatic restarts.)
 *
 * ```ts
 * const { value } = await launch('examples/jacobi/jacobi.ts', { ranks: 4, argv: ['--n', '512'] })
 * ```
 */
export async function launch<R = unknown>(programFile: string, opts: LaunchOptions): Promise<RunResult<R>> {
  const settings = resolveRunOptions(opts)
  const spec = groupSpec(programFile, opts, undefined, settings)
  const started = performance.now()
  spec.compiled = (await compileProgram(spec.programFile, spec.tsconfig)).compiled
  const callbacks: AttemptCallbacks = {
    onLog: opts.onLog ?? ((_r: number, text: string) => console.log(text)),
    onCheckpoint: opts.onCheckpoint,
    onResumed: (opts as LaunchOptions & ResumeListenerOption).onResumed,
    onProgress: (rank, skeleton, step, total) => {
      if (rank === 0) opts.onProgress?.(skeleton, step, total)
    },
    onStarted: opts.onGroup,
  }
  const outcome = await runAttempt(GROUP_STARTERS[settings.transport], spec, { ...callbacks, hangTimeoutMs: settings.hangTimeoutMs })
  switch (outcome.kind) {
    case 'done':
      return { value: outcome.values[0] as R, values: outcome.values as R[], text: outcome.text, ranks: spec.size, wallMs: performance.now() - started }
    case 'failed':
      throw outcome.error
    case 'refused':
      throw outcome.error
    case 'preempted':
      throw new PreemptedError(outcome.seq)
    case 'stopped':
      throw new RunStoppedError(`${outcome.signal} received by rank ${outcome.rank}`)
  }
}

const BOOT = bootUrl('rank-boot.mjs')

/** Load a program file in one thread just to read its name and options (for `--help`). */
export async function describe(programFile: string): Promise<ProgramDescription> {
  const file = checkProgramFile(programFile)
  const init = { mode: 'describe', rank: 0, size: 1, argv: [], transport: { kind: 'threads', ports: [undefined], channels: [undefined] }, status: createStatusBuffer(1), inject: [] }
  const w = new Worker(BOOT, { workerData: { programFile: file, tsconfig: findTsconfig(file), init } })
  try {
    return await new Promise<ProgramDescription>((res, rej) => {
      w.on('message', (m: RankToLauncher) => {
        if (m.type === 'describe') res(m)
        else if (m.type === 'load-error') rej(new ProgramLoadError(m.message))
      })
      w.on('error', rej)
      w.on('exit', () => rej(new ProgramLoadError(`${file}: the program thread exited before describing itself`)))
    })
  } finally {
    await w.terminate()
  }
}

const PROGRAM_EXTENSION = /\.(?:[mc]?tsx?|[mc]?jsx?)$/

function checkProgramFile(programFile: string): string {
  const file = resolve(programFile)
  if (!existsSync(file) || !statSync(file).isFile()) throw new ProgramLoadError(`program file not found: ${programFile}`)
  if (!PROGRAM_EXTENSION.test(file)) {
    throw new ProgramLoadError(
      `${programFile} is not a program: molotof runs TypeScript or JavaScript modules (.ts, .mts, .cts, .js, .mjs, .cjs) whose default export is defineProgram({ ... })`,
    )
  }
  return file
}

/** The tsconfig.json nearest to a TypeScript program (its `paths` decide what `molotof` resolves to). */
export function findTsconfig(file: string): string | undefined {
  if (!/\.[mc]?tsx?$/.test(file)) return undefined
  return findUp(dirname(file), (dir) => (existsSync(join(dir, 'tsconfig.json')) ? join(dir, 'tsconfig.json') : undefined))
}
