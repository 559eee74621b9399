import { frozenConfig, type FaultToleranceConfig } from '../../checkpoint/config.js'
import { openRunDirectory, type RunDirectory } from '../../checkpoint/identity/run-directory.js'
import { ConfigError, NothingToResumeError, RestartBudgetExhaustedError, RunStoppedError, type FailureRecord } from '../../errors.js'
import { runAttempt, type AttemptOutcome } from './attempt.js'
import { expandDir, matchingDirectories } from '../cluster-env.js'
import { compileProgram, type CompiledProgram } from '../compiled-program.js'
import { partnerDirOf } from '../../checkpoint/store/partner.js'
import { xorForRanks } from '../../checkpoint/redundancy/sets.js'
import type { RankGroup, RankGroupSpec, StartRankGroup } from '../group.js'
import { GROUP_STARTERS, groupSpec, type LaunchOptions, type ResumeListenerOption, type RunResult } from './launcher.js'
import type { CheckpointEvent, ResumedFigures } from '../../checkpoint/events.js'
import type { LogKind } from '../protocol.js'
import type { Injection } from '../inject.js'
import { SparePool, type RanksOrigin } from '../groups/spares.js'
import { resolveRunOptions, type RunSettings } from './run-options.js'

/** Every event of a supervised run, as written to `--events` (JSON lines). */
export type SupervisorEvent =
  | {
      event: 'start'
      attempt: number
      ranks: number
      transport: string
      resume: boolean
      /** The compiled module the ranks load (see compiled-program.ts); absent when they load the sources through tsx. */
      compiled?: string
      /** Why the ranks load the program's sources through tsx, when they do (a CommonJS program, MOLOTOF_PRECOMPILE=0, …). */
      loadedFromSources?: string
      /** True when the ranks start again only to checkpoint and stop: the stop signal ended one of them as it started. */
      stopping?: boolean
    }
  | { event: 'checkpoint'; attempt: number; seq: number; skeleton: number; step: number; bytes: number; totalBytes: number; ms: number; level: 'memory' | 'disk' | 'partner' | 'shared' | 'xor'; stallMs: number; votes?: number; voteMs?: number }
  | ({ event: 'failure'; attempt: number } & Omit<FailureRecord, 'attempt'>)
  | { event: 'recovery-line'; attempt: number; seq: number; skeleton: number; step: number; negotiateMs: number; level: string }
  | { event: 'replay-done'; attempt: number; replayMs: number }
  | { event: 'restore-done'; attempt: number; loadMs: number; restoreMs: number }
  | {
      event: 'resume'
      attempt: number
      /** True when the run was started with `resume` and nothing failed: a resume asked for, not a recovery. */
      requested: boolean
      seq: number
      skeleton: number
      step: number
      spawnMs: number
      negotiateMs: number
      loadMs: number
      replayMs: number
      restoreMs: number
      totalMs: number
      /** The level the recovery line was read from: memory, disk, or memory+disk when ranks read from different levels. */
      level: string
      /** How many ranks were kept survivors, warm spares, or started cold; absent without spares. */
      ranksFrom?: { kept: number; spares: number; spawned: number }
    }
  /**
   * The first superstep after a failure has ended (rank 0): the recovery
   * from end to end. `stopMs` runs from the failure's detection to the start
   * of the new attempt (stopping the survivors), `startMs` the rest of the
   * time until the restore ends (spawn or spare, linking the ranks, opening
   * the checkpoint store, the program's light code and `initialize`), the
   * phases of the `resume` event, then `firstStepMs` (the first superstep
   * computed again).
   */
  | {
      event: 'recovered'
      attempt: number
      failureToFirstStepMs: number
      stopMs: number
      startMs: number
      negotiateMs: number
      loadMs: number
      replayMs: number
      restoreMs: number
      firstStepMs: number
      /** How many ranks were kept survivors, warm spares, or started cold. */
      ranksFrom: { kept: number; spares: number; spawned: number }
    }
  | { event: 'progress'; attempt: number; skeleton: number; step: number; total: number | undefined; stepsPerSecond: number }
  | { event: 'preempt-requested'; attempt: number; why: string }
  | { event: 'preempted'; attempt: number; seq: number | undefined; skeleton: number; step: number }
  | { event: 'finish'; attempt: number; wallMs: number; restarts: number }
  | ClusterEvent
  | { event: 'gave-up'; attempt: number; failures: number }

/** The run's directory, opened once before the first attempt, and the earlier run's memory directories a resume reads. */
interface OpenedRun {
  dir: RunDirectory
  resumeMemoryDirs: string[] | undefined
}

/** The program as every attempt loads it: compiled once (or why its sources are loaded instead), and the first attempt's spec. */
interface CompiledRun {
  first: RankGroupSpec
  compiled: CompiledProgram | undefined
  loadedFromSources: string | undefined
}

/** One attempt's clock: when it started, the failure it recovers from, rank 0's last progress and the resume's figures. */
interface AttemptTimes {
  attempt: number
  size: number
  started: number
  failedAt: number | undefined
  last: { step: number; at: number }
  resumed: { at: number; r: ResumedFigures; origin: RanksOrigin } | undefined
}

/**
 * What node 0 of a cluster run reports about its membership. `node-lost`: a
 * node was lost (`why`: its connection closed, or silent past --node-timeout)
 * while its first rank was at (`skeleton`, `step`); `outcome` says what the
 * run did: a spare node took its ranks (`spare`), the others went on with
 * fewer ranks (`shrunk`, `size`), an idle spare was lost, or nothing could
 * replace it (`unrecoverable`: the run ends with exit 76).
 * `membership`: the new placement (slot i carries ranks i·rpn…, on node
 * `working[i]`) and the spare nodes left, numbered by `epoch`.
 */
export type ClusterEvent = NodeLostEvent | MembershipEvent
/** See ClusterEvent. */
export interface NodeLostEvent {
  event: 'node-lost'
  attempt: number
  node: number
  why: string
  skeleton: number
  step: number
  /** The global ranks it carried (none for a spare node). */
  ranks: number[]
  outcome: 'replaced' | 'shrunk' | 'spare-lost' | 'unrecoverable'
  /** The spare node that took its ranks (`replaced`). */
  spare?: number
  sparesLeft?: number
  /** The rank count the run goes on with (`shrunk`). */
  size?: number
}
/** See ClusterEvent. */
export interface MembershipEvent {
  event: 'membership'
  attempt: number
  epoch: number
  /** Slot → node: slot i carries ranks i·rpn … i·rpn+rpn−1. */
  working: number[]
  spares: number[]
}

/** Options of `Supervisor`: those of `launch`, plus restarts, a time limit, events and warm spares. */
export interface SuperviseOptions extends LaunchOptions {
  /** Restarts allowed after failures (default 3). */
  restarts?: number
  /** Checkpoint and stop before this much wall time has passed (ms), keeping room for one checkpoint. */
  timeLimitMs?: number
  /** Receives every event (the CLI writes them as JSON lines and draws progress). */
  onEvent?: (e: SupervisorEvent & { t: number }) => void
  /**
   * Warm spares (default 0): rank processes or threads started ahead with the
   * program loaded; a failed rank is replaced by one, and survivors run the
   * program again in their own process (see `SparePool`).
   */
  spares?: number
  /** With spares: survivors of a failure are kept (default) or replaced by spares too. */
  keepSurvivors?: boolean
}

/**
 * Internal, not in the public options: starts each attempt's ranks instead of
 * the transport's own starter (a cluster run's ranks on every node; the CLI
 * spreads it into the options).
 */
export interface GroupStarterOption {
  startGroup?: StartRankGroup
  /** The rank count of the next attempt, when it may change during the run (a cluster run that shrank). */
  groupSize?: () => number
  /** How the last attempt's ranks were obtained, when the starter knows (a spare node's warm processes). */
  origin?: () => RanksOrigin | undefined
  /** A cluster run's coordinator was lost and this process takes the run's supervisor over (see Takeover). */
  takeover?: Takeover
}

/**
 * Where a lost coordinator left the run (its last `handover()`, sent to every
 * node), for the successor's supervisor: it goes on with the next attempt,
 * resuming this run's checkpoints (or starting afresh when none is
 * complete yet), the loss counted as one failure of the restart budget, a
 * stop asked for before still under way. The run's directory record (lock,
 * `RUN`) moves to this node's own directory (`home`: its `{node}` and the
 * first rank it carries).
 */
export interface Takeover {
  attempt: number
  failures: number
  preempt: string | undefined
  /** Injected failures that fired already: they do not fire again. */
  fired: Injection[]
  /** The coordinator's loss as a failure of the attempt it ended; `lostAt` is performance.now() when it was noticed. */
  loss: { rank: number; message: string; lostAt: number }
  home: { node: number; rank: number }
}

/** How a supervised run ended: `done` with the result, or `preempted` after a checkpoint (resume from it). */
export type SuperviseResult<R = unknown> =
  | ({ kind: 'done'; failures: FailureRecord[]; restarts: number } & RunResult<R>)
  | { kind: 'preempted'; seq: number | undefined; skeleton: number; step: number; failures: FailureRecord[]; checkpointDir: string }

/**
 * Run a program under supervision: detect a rank that exits, is killed, throws
 * or hangs; stop the survivors; start all ranks again in recovery mode from
 * the recovery line, up to a restart budget. SIGTERM/SIGINT-like requests
 * (`preempt()`) and a time limit make the ranks checkpoint and stop cleanly.
 *
 * ```ts
 * const sup = new Supervisor('examples/jacobi/jacobi.ts', { ranks: 2, transport: 'processes', checkpoint, restarts: 3 })
 * process.on('SIGTERM', () => sup.preempt('SIGTERM'))
 * const r = await sup.run()
 * ```
 */
export class Supervisor<R = unknown> {
  private group: RankGroup | undefined
  private preemptWhy: string | undefined
  /** Who asked for the stop under way: only a second request of the supervisor's own stops at once. */
  private preemptBy: 'supervisor' | 'rank' | undefined
  private attempt = 0
  private readonly t0 = performance.now()
  private readonly ft: FaultToleranceConfig
  private readonly settings: RunSettings
  private lastCheckpointMs = 0
  /** Failure points already seen: injections there do not fire again. */
  private readonly fired: Injection[] = []
  /** Keys of the rank lines said once per run (a warning every restart would repeat). */
  private readonly saidOnce = new Set<string>()
  private pool: SparePool | undefined
  /** performance.now() at which the last failure was seen, until the recovery's first superstep. */
  private failedAt: number | undefined
  /** Every failure of the run, in order (the restart budget counts them). */
  private readonly failures: FailureRecord[] = []
  /** Attempts ended by a stop signal as their ranks started (a second one is a second signal). */
  private stoppedStarts = 0
  /** Failures an earlier coordinator counted (a successor's supervisor: see Takeover). */
  private readonly earlierFailures: number
  private readonly takeover: Takeover | undefined

  constructor(
    private readonly programFile: string,
    private readonly opts: SuperviseOptions,
  ) {
    // Every default applied and every setting checked once, before the first rank starts.
    this.settings = resolveRunOptions(opts)
    if (!opts.checkpoint) throw new ConfigError('a supervised run needs a checkpoint configuration (directory and policy)')
    this.takeover = (opts as SuperviseOptions & GroupStarterOption).takeover
    // A successor resumes the run's own checkpoints, or starts afresh when none is complete yet.
    this.ft = frozenConfig(this.takeover ? { ...opts.checkpoint, resume: true, fresh: false, resumeRequest: undefined } : opts.checkpoint)
    this.earlierFailures = this.takeover?.failures ?? 0
    if (this.takeover) {
      this.attempt = this.takeover.attempt
      this.fired.push(...this.takeover.fired)
    }
    groupSpec(programFile, opts, undefined, this.settings) // the program file and the injections
  }

  /** Ask the ranks to checkpoint at the next checkpoint point they agree on (their next vote) and stop. A second call stops at once. */
  preempt(why: string): 'graceful' | 'immediate' {
    if (this.preemptBy === 'rank') {
      // A signal to the whole process group reaches the ranks too, which forward it, possibly before
      // the supervisor's own copy is handled: that copy is the same request, not a second one.
      this.preemptBy = 'supervisor'
      return 'graceful'
    }
    if (this.preemptWhy !== undefined) {
      void this.group?.terminate()
      return 'immediate'
    }
    this.preemptBy = 'supervisor'
    this.startPreemption(why)
    return 'graceful'
  }

  /**
   * A stop signal a rank process received and forwarded (sent to the process
   * group, or to that rank alone): the first request of a run starts the
   * graceful stop; forwarded copies never escalate it (every rank forwards
   * the same group signal, a busy rank late).
   */
  private forwardedSignal(rank: number, signal: string): void {
    if (this.preemptWhy !== undefined) return
    this.preemptBy = 'rank'
    this.startPreemption(`${signal} (received by rank ${rank})`)
  }

  private startPreemption(why: string): void {
    this.preemptWhy = why
    this.emit({ event: 'preempt-requested', attempt: this.attempt, why })
    const g = this.group
    if (g) for (let r = 0; r < g.size; r++) g.send(r, { type: 'preempt' })
  }

  /** Where the run is, for a successor should this process's node be lost (a cluster run's coordinator sends it to every node). */
  handover(): { attempt: number; failures: number; preempt: string | undefined; fired: Injection[] } {
    return { attempt: this.attempt, failures: this.earlierFailures + this.failures.length, preempt: this.preemptWhy, fired: [...this.fired] }
  }

  /** Report a cluster membership event (node 0 of a cluster run) with the run's others; `attempt` is filled in. */
  reportClusterEvent(e: Omit<NodeLostEvent, 'attempt'> | Omit<MembershipEvent, 'attempt'>): void {
    this.emit({ ...e, attempt: this.attempt } as ClusterEvent)
  }

  /** Ask the ranks for a checkpoint at their next vote (they go on afterwards). */
  requestCheckpoint(): void {
    const g = this.group
    if (g) for (let r = 0; r < g.size; r++) g.send(r, { type: 'checkpoint' })
  }

  /** Runs the program to its end, restarting after failures; rejects when the restart budget is spent or the run fails otherwise. */
  async run(): Promise<SuperviseResult<R>> {
    const run = await this.openRun()
    let forgotten: Promise<void> | undefined
    const timer = this.startTimeLimit()
    const program = await this.compileOnce()
    this.startSpares(program)
    try {
      this.takeOver()
      for (;;) {
        const spec = this.nextAttempt(run, program)
        const outcome = await this.runOne(spec)
        const ended = await this.afterAttempt(outcome, spec, run)
        if (ended) return ended
      }
    } catch (e) {
      // A first resume refused with nothing to resume never started: it leaves the directory as it found it.
      if (e instanceof NothingToResumeError && this.attempt === 0) forgotten = run.dir.forget()
      throw e
    } finally {
      if (timer) clearInterval(timer)
      await this.pool?.close()
      await (forgotten ?? run.dir.release())
    }
  }

  /** A successor's supervisor: the lost coordinator's last attempt failed (the loss), the next one resumes; a stop asked for goes on. */
  private takeOver(): void {
    const t = this.takeover
    if (!t) return
    const record: FailureRecord = { attempt: t.attempt, rank: t.loss.rank, skeleton: -1, step: -1, phase: 'start', reason: 'error', message: t.loss.message, detectionMs: 0 }
    this.failures.push(record)
    this.failedAt = t.loss.lostAt
    const { attempt, ...rest } = record
    this.emit({ event: 'failure', attempt, ...rest })
    this.decideRestart()
    if (t.preempt !== undefined) this.startPreemption(t.preempt)
  }

  /**
   * Before any rank starts: the directory's lock, the run's lineage and the refusals that need no rank (see
   * run-directory.ts), and the earlier run's memory directories a resume reads.
   */
  private async openRun(): Promise<OpenedRun> {
    // With `{node}` or `{rank}` in its name the lock, the run record and the lineage live in node 0's (rank 0's)
    // directory; the other directories follow the run id the ranks write into every file.
    const at = this.takeover?.home ?? { node: 0, rank: 0 }
    const home = expandDir(this.ft.dir, at.node, at.rank)
    // Partner copies are read on resume also by a run that keeps none (fewer nodes): their lineage counts too
    // (a directory that is not there lists no checkpoint).
    const sharedDir = this.ft.shared?.dir ?? (this.ft.resume ? this.ft.resumeSharedDir : undefined)
    const copies = [partnerDirOf(home), ...(sharedDir !== undefined ? [sharedDir] : [])]
    const earlierMemoryDirs = this.ft.resumeMemoryDirs ?? []
    const dir = await openRunDirectory({ ...this.ft, dir: home, copies, memoryDir: this.ft.memory?.dir, earlierMemoryDirs, matchingDirectories }, this.programFile)
    // A resume reads the earlier run's memory level too (the default one, and the one on record), whatever this run keeps.
    const resumeMemoryDirs = this.ft.resume ? [...new Set([...(this.ft.resumeMemoryDirs ?? []), ...(dir.memoryDir ? [dir.memoryDir] : [])])] : undefined
    for (const note of dir.notes) this.opts.onLog?.(0, `note: ${note}`)
    return { dir, resumeMemoryDirs }
  }

  /** Once per run: every attempt and every spare loads the same compiled program (and so the same code). */
  private async compileOnce(): Promise<CompiledRun> {
    const first = groupSpec(this.programFile, this.opts, undefined, this.settings)
    const { compiled, why: loadedFromSources, note } = await compileProgram(first.programFile, first.tsconfig)
    if (note) this.opts.onLog?.(0, `note: each rank compiles the program itself (${loadedFromSources}), about 0.25 s more per rank start`)
    return { first, compiled, loadedFromSources }
  }

  /** With warm spares: the pool, started before the first attempt so that its spares load while the ranks run. */
  private startSpares({ first, compiled }: CompiledRun): void {
    const spares = this.settings.spares
    if (spares === 0) return
    this.pool = new SparePool({
      programFile: first.programFile,
      tsconfig: first.tsconfig,
      compiled,
      size: first.size,
      transport: this.settings.transport,
      heartbeatMs: first.heartbeatMs,
      spares,
      // A survivor's background checkpoint writes (memory level, flush, copies) end before it reports idle
      // (see runSession): it is kept with every level.
      keepSurvivors: this.settings.keepSurvivors,
    })
  }

  /** The next attempt's ranks: the first as asked, every later one resuming this run's own checkpoints. */
  private nextAttempt(run: OpenedRun, { compiled, loadedFromSources }: CompiledRun): RankGroupSpec {
    const resume = this.attempt > 0 || this.ft.resume
    // A cluster run that shrank (a node lost, no spare left) runs on fewer ranks: injections at the others cannot fire.
    const ranks = (this.opts as SuperviseOptions & GroupStarterOption).groupSize?.() ?? this.settings.ranks
    const spec = groupSpec(this.programFile, {
      ...this.opts,
      ...(ranks < this.settings.ranks ? { inject: (this.opts.inject ?? []).filter((i) => i.rank < ranks) } : {}),
      // Restarts resume from this run's own checkpoints only: its run id is in every one it writes.
      // A resume whose lineage was not in node 0's directory (lost with its node): the ranks find it in theirs.
      // Only the user's first resume refuses to start afresh (see FaultToleranceConfig.resumeRequest): a restart
      // before the first checkpoint starts from the beginning.
      checkpoint: {
        ...(ranks < this.settings.ranks ? onFewerRanks(this.ft, ranks) : this.ft),
        resume,
        runId: run.dir.runId,
        resumeRequest: this.attempt === 0 ? this.ft.resumeRequest : undefined,
        ...(run.resumeMemoryDirs ? { resumeMemoryDirs: run.resumeMemoryDirs } : {}),
        ...(run.dir.lineageUnknown ? { adoptLineage: true } : {}),
      },
      // Each injected failure fires once per run (this.fired: left out), so a restarted run completes.
    }, this.fired, { ...this.settings, ranks })
    spec.compiled = compiled
    const stopping = this.stoppedStarts > 0 ? { stopping: true } : {}
    this.emit({ event: 'start', attempt: this.attempt, ranks: spec.size, transport: this.settings.transport, resume, ...(compiled ? { compiled: compiled.file } : { loadedFromSources }), ...stopping })
    return spec
  }

  /** What an attempt's outcome means for the run: its end (a result, a throw) or, undefined, one more attempt. */
  private async afterAttempt(outcome: AttemptOutcome, spec: RankGroupSpec, run: OpenedRun): Promise<SuperviseResult<R> | undefined> {
    const attempt = this.attempt
    switch (outcome.kind) {
      case 'done': {
        const wallMs = performance.now() - this.t0
        await run.dir.finish().catch(() => undefined) // unrecorded, a later fresh run asks instead of discarding
        this.emit({ event: 'finish', attempt, wallMs, restarts: attempt })
        return { kind: 'done', value: outcome.values[0] as R, values: outcome.values as R[], text: outcome.text, ranks: spec.size, wallMs, failures: this.failures, restarts: attempt }
      }
      case 'refused':
        throw outcome.error
      case 'stopped':
        await this.restartToStop(outcome.signal)
        return undefined
      case 'preempted':
        this.emit({ event: 'preempted', attempt, seq: outcome.seq, skeleton: outcome.skeleton, step: outcome.step })
        return { kind: 'preempted', seq: outcome.seq, skeleton: outcome.skeleton, step: outcome.step, failures: this.failures, checkpointDir: this.ft.dir }
      case 'failed':
        this.recordFailure(outcome)
        this.decideRestart()
        return undefined
    }
  }

  /**
   * A rank killed by the stop signal while it started had no checkpoint to write: the ranks start again with the
   * stop pending, checkpoint at their first checkpoint point and stop (exit 75 with a checkpoint to resume from).
   * New rank processes can only be ended so by a signal sent after the first: at once.
   */
  private async restartToStop(signal: NodeJS.Signals): Promise<void> {
    if (++this.stoppedStarts > 1) throw new RunStoppedError(this.preemptWhy ?? signal)
    // Spares started before the signal may be dying of it too: the ranks start in new processes.
    await this.pool?.renew()
    this.attempt++
  }

  /** A failure, reported and remembered: its injection point (if one) does not fire again. */
  private recordFailure(outcome: Extract<AttemptOutcome, { kind: 'failed' }>): void {
    const e = outcome.error
    const record: FailureRecord = {
      attempt: this.attempt,
      rank: e.rank,
      skeleton: e.skeleton,
      step: e.step,
      phase: e.phase,
      reason: outcome.reason,
      message: e.message,
      detectionMs: outcome.detectedAt - outcome.failedAt,
    }
    this.failures.push(record)
    this.failedAt = outcome.failedAt
    if (record.phase === 'calculate' || record.phase === 'route' || record.phase === 'checkpoint') {
      this.fired.push({ rank: record.rank, skeleton: record.skeleton, step: record.step, phase: record.phase })
    }
    const { attempt, ...rest } = record
    this.emit({ event: 'failure', attempt, ...rest })
  }

  /** After a failure: restart, unless the run is being stopped or the restart budget is spent. */
  private decideRestart(): void {
    if (this.preemptWhy !== undefined) {
      // Stopped by a second signal, or a rank died while stopping: do not restart.
      throw new RunStoppedError(this.preemptWhy)
    }
    const budget = this.settings.restarts
    if (this.earlierFailures + this.failures.length > budget) {
      this.emit({ event: 'gave-up', attempt: this.attempt, failures: this.earlierFailures + this.failures.length })
      throw new RestartBudgetExhaustedError(this.failures, budget)
    }
    this.attempt++
  }

  /** One attempt: its ranks started (by the cluster, the spare pool or the transport) and their reports turned into events. */
  private runOne(spec: RankGroupSpec): Promise<AttemptOutcome> {
    const times: AttemptTimes = { attempt: this.attempt, size: spec.size, started: performance.now(), failedAt: this.failedAt, last: { step: -1, at: 0 }, resumed: undefined }
    times.last.at = times.started
    this.failedAt = undefined
    // A cluster run's group spans the nodes (see cluster.ts); otherwise the spare pool's, or one started per attempt.
    const startGroup = (this.opts as SuperviseOptions & GroupStarterOption).startGroup
    const start = startGroup ?? this.pool?.start ?? GROUP_STARTERS[this.settings.transport]
    return runAttempt(start, spec, {
      hangTimeoutMs: this.settings.hangTimeoutMs,
      onLog: (rank, text, kind, once) => this.sayLine(rank, text, kind, once),
      onSignal: (rank, signal) => this.forwardedSignal(rank, signal),
      onStarted: (g) => this.attemptStarted(g),
      onCheckpoint: (c) => this.checkpointCommitted(times.attempt, c),
      onResumed: (r) => this.resumed(times, r),
      onProgress: (rank, skeleton, step, total) => {
        if (rank === 0) this.progressed(times, skeleton, step, total)
      },
    })
  }

  /** A rank's line to `onLog`; one said once per run (its key) only the first time, however many restarts. */
  private sayLine(rank: number, text: string, kind: LogKind | undefined, once: string | undefined): void {
    if (once !== undefined) {
      if (this.saidOnce.has(once)) return
      this.saidOnce.add(once)
    }
    this.opts.onLog?.(rank, text, kind)
  }

  private attemptStarted(g: RankGroup): void {
    this.group = g
    this.opts.onGroup?.(g)
    // A preemption asked for while no ranks were running applies to the new ones.
    if (this.preemptWhy !== undefined) for (let r = 0; r < g.size; r++) g.send(r, { type: 'preempt' })
  }

  private checkpointCommitted(attempt: number, c: CheckpointEvent): void {
    // The time limit leaves room for the checkpoint a preemption writes: a disk one.
    if (c.level === 'disk') this.lastCheckpointMs = c.ms
    const { seq, skeleton, step, bytes, totalBytes, ms, level, stallMs, votes, voteMs } = c
    this.emit({ event: 'checkpoint', attempt, seq, skeleton, step, bytes, totalBytes, ms, level, stallMs, ...(votes === undefined ? {} : { votes, voteMs }) })
    this.opts.onCheckpoint?.(c)
  }

  /** The ranks restored a checkpoint: the recovery's phases as events (spawn is what the ranks' own figures leave). */
  private resumed(times: AttemptTimes, r: ResumedFigures): void {
    const { attempt, started } = times
    const totalMs = performance.now() - started
    const spawnMs = Math.max(0, totalMs - r.negotiateMs - r.loadMs - r.replayMs - r.restoreMs)
    this.emit({ event: 'recovery-line', attempt, seq: r.seq, skeleton: r.skeleton, step: r.step, negotiateMs: r.negotiateMs, level: r.level })
    this.emit({ event: 'replay-done', attempt, replayMs: r.replayMs })
    this.emit({ event: 'restore-done', attempt, loadMs: r.loadMs, restoreMs: r.restoreMs })
    const { seq, skeleton, step, negotiateMs, loadMs, replayMs, restoreMs, level } = r
    const requested = attempt === 0
    const ranksFrom = this.pool?.lastOrigin ?? (this.opts as SuperviseOptions & GroupStarterOption).origin?.()
    this.emit({ event: 'resume', attempt, requested, seq, skeleton, step, spawnMs, negotiateMs, loadMs, replayMs, restoreMs, totalMs, level, ...(ranksFrom ? { ranksFrom } : {}) })
    times.resumed = { at: performance.now(), r, origin: ranksFrom ?? { kept: 0, spares: 0, spawned: times.size } }
    ;(this.opts as SuperviseOptions & ResumeListenerOption).onResumed?.(r)
  }

  /** Rank 0's progress, with its rate; the first progress after a failure's recovery ends the recovery (`recovered`). */
  private progressed(times: AttemptTimes, skeleton: number, step: number, total: number | undefined): void {
    const now = performance.now()
    const { last } = times
    if (times.failedAt !== undefined && times.resumed && last.step < 0) this.emitRecovered(times, now)
    const stepsPerSecond = last.step >= 0 && step > last.step ? ((step - last.step) * 1000) / (now - last.at) : 0
    times.last = { step, at: now }
    this.emit({ event: 'progress', attempt: times.attempt, skeleton, step, total, stepsPerSecond })
    this.opts.onProgress?.(skeleton, step, total)
  }

  /** The recovery from end to end, from the failure's detection to the first superstep computed again. */
  private emitRecovered(times: AttemptTimes, now: number): void {
    const { r, origin, at } = times.resumed!
    const failedAt = times.failedAt!
    const startMs = Math.max(0, at - times.started - r.negotiateMs - r.loadMs - r.replayMs - r.restoreMs)
    this.emit({
      event: 'recovered',
      attempt: times.attempt,
      failureToFirstStepMs: now - failedAt,
      stopMs: times.started - failedAt,
      startMs,
      negotiateMs: r.negotiateMs,
      loadMs: r.loadMs,
      replayMs: r.replayMs,
      restoreMs: r.restoreMs,
      firstStepMs: now - at,
      ranksFrom: origin,
    })
  }

  /** Preempt before the time limit, leaving room for one checkpoint at its measured cost. */
  private startTimeLimit(): NodeJS.Timeout | undefined {
    const limit = this.settings.timeLimitMs
    if (limit === undefined) return undefined
    const t = setInterval(() => {
      const reserve = Math.max(1000, 2 * this.lastCheckpointMs)
      if (performance.now() - this.t0 + reserve >= limit) {
        clearInterval(t)
        this.preempt(`time limit of ${(limit / 1000).toFixed(0)} s`)
      }
    }, 100)
    t.unref()
    return t
  }

  private emit(e: SupervisorEvent): void {
    this.opts.onEvent?.({ ...e, t: performance.now() - this.t0 })
  }
}

/** The configuration of a run that goes on with `ranks` after a node's loss: XOR sets of the nodes left (the lost node's files are rebuilt from the old sets). */
function onFewerRanks(cfg: FaultToleranceConfig, ranks: number): FaultToleranceConfig {
  const { xor, ...rest } = cfg
  const left = xorForRanks(xor, ranks)
  return left ? { ...rest, xor: left } : rest
}
