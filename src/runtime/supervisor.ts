import { frozenConfig, type FaultToleranceConfig } from '../checkpoint/config.js'
import { ConfigError, RestartBudgetExhaustedError, RunStoppedError, type FailureRecord } from '../errors.js'
import { runAttempt, type AttemptOutcome } from './attempt.js'
import type { RankGroup, StartRankGroup } from './group.js'
import { GROUP_STARTERS, groupSpec, hangTimeoutOf, type LaunchOptions, type RunResult } from './launcher.js'
import type { ResumedFigures } from '../checkpoint/events.js'
import type { Injection } from './inject.js'

/** Every event of a supervised run, as written to `--events` (JSON lines). */
export type SupervisorEvent =
  | { event: 'start'; attempt: number; ranks: number; transport: string; resume: boolean }
  | { event: 'checkpoint'; attempt: number; seq: number; skeleton: number; step: number; bytes: number; totalBytes: number; ms: number }
  | ({ event: 'failure'; attempt: number } & Omit<FailureRecord, 'attempt'>)
  | { event: 'recovery-line'; attempt: number; seq: number; skeleton: number; step: number; negotiateMs: number }
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
    }
  | { event: 'progress'; attempt: number; skeleton: number; step: number; total: number | undefined; stepsPerSecond: number }
  | { event: 'preempt-requested'; attempt: number; why: string }
  | { event: 'preempted'; attempt: number; seq: number | undefined; skeleton: number; step: number }
  | { event: 'finish'; attempt: number; wallMs: number; restarts: number }
  | { event: 'gave-up'; attempt: number; failures: number }

export interface SuperviseOptions extends LaunchOptions {
  /** Restarts allowed after failures (default 3). */
  restarts?: number
  /** Checkpoint and stop before this much wall time has passed (ms), keeping room for one checkpoint. */
  timeLimitMs?: number
  /** Receives every event (the CLI writes them as JSON lines and draws progress). */
  onEvent?: (e: SupervisorEvent & { t: number }) => void
}

/**
 * Internal, not in the public options: starts each attempt's ranks instead of
 * the transport's own starter (a cluster run's ranks on every node; the CLI
 * spreads it into the options).
 */
export interface GroupStarterOption {
  startGroup?: StartRankGroup
}

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
  private attempt = 0
  private readonly t0 = performance.now()
  private readonly ft: FaultToleranceConfig
  private lastCheckpointMs = 0
  /** Failure points already seen: injections there do not fire again. */
  private readonly fired: Injection[] = []

  constructor(
    private readonly programFile: string,
    private readonly opts: SuperviseOptions,
  ) {
    const restarts = opts.restarts ?? 3
    if (!Number.isInteger(restarts) || restarts < 0) throw new ConfigError(`the restart budget must be a non-negative integer (got ${restarts})`)
    if (opts.timeLimitMs !== undefined && !(opts.timeLimitMs > 0)) throw new ConfigError(`the time limit must be positive (got ${opts.timeLimitMs} ms)`)
    if (!opts.checkpoint) throw new ConfigError('a supervised run needs a checkpoint configuration (directory and policy)')
    this.ft = frozenConfig(opts.checkpoint)
    groupSpec(programFile, opts) // validate everything before the first rank starts
  }

  /** Ask the ranks to checkpoint at the next checkpoint point and stop. A second call stops at once. */
  preempt(why: string): 'graceful' | 'immediate' {
    if (this.preemptWhy !== undefined) {
      void this.group?.terminate()
      return 'immediate'
    }
    this.preemptWhy = why
    this.emit({ event: 'preempt-requested', attempt: this.attempt, why })
    const g = this.group
    if (g) for (let r = 0; r < g.size; r++) g.send(r, { type: 'preempt' })
    return 'graceful'
  }

  /** Ask the ranks for a checkpoint at the next checkpoint point (they go on afterwards). */
  requestCheckpoint(): void {
    const g = this.group
    if (g) for (let r = 0; r < g.size; r++) g.send(r, { type: 'checkpoint' })
  }

  async run(): Promise<SuperviseResult<R>> {
    const budget = this.opts.restarts ?? 3
    const failures: FailureRecord[] = []
    const timer = this.startTimeLimit()
    try {
      for (;;) {
        const resume = this.attempt > 0 || this.ft.resume
        const spec = groupSpec(this.programFile, {
          ...this.opts,
          checkpoint: { ...this.ft, resume },
          // Each injected failure fires once per run, so a restarted run completes.
          injectFired: this.fired,
        })
        this.emit({ event: 'start', attempt: this.attempt, ranks: spec.size, transport: spec.transport ?? 'threads', resume })
        const outcome = await this.runOne(spec)
        const attempt = this.attempt
        switch (outcome.kind) {
          case 'done': {
            const wallMs = performance.now() - this.t0
            this.emit({ event: 'finish', attempt, wallMs, restarts: attempt })
            return { kind: 'done', value: outcome.values[0] as R, values: outcome.values as R[], text: outcome.text, ranks: spec.size, wallMs, failures, restarts: attempt }
          }
          case 'refused':
            throw outcome.error
          case 'preempted':
            this.emit({ event: 'preempted', attempt, seq: outcome.seq, skeleton: outcome.skeleton, step: outcome.step })
            return { kind: 'preempted', seq: outcome.seq, skeleton: outcome.skeleton, step: outcome.step, failures, checkpointDir: this.ft.dir }
          case 'failed': {
            const e = outcome.error
            const record: FailureRecord = {
              attempt,
              rank: e.rank,
              skeleton: e.skeleton,
              step: e.step,
              phase: e.phase,
              reason: outcome.reason,
              message: e.message,
              detectionMs: outcome.detectedAt - outcome.failedAt,
            }
            failures.push(record)
            if (record.phase === 'calculate' || record.phase === 'route' || record.phase === 'checkpoint') {
              this.fired.push({ rank: record.rank, skeleton: record.skeleton, step: record.step, phase: record.phase })
            }
            const { attempt: _a, ...rest } = record
            this.emit({ event: 'failure', attempt, ...rest })
            if (this.preemptWhy !== undefined) {
              // Stopped by a second signal, or a rank died while stopping: do not restart.
              throw new RunStoppedError(this.preemptWhy)
            }
            if (failures.length > budget) {
              this.emit({ event: 'gave-up', attempt, failures: failures.length })
              throw new RestartBudgetExhaustedError(failures, budget)
            }
            this.attempt++
          }
        }
      }
    } finally {
      if (timer) clearInterval(timer)
    }
  }

  private runOne(spec: ReturnType<typeof groupSpec>): Promise<AttemptOutcome> {
    const attempt = this.attempt
    const started = performance.now()
    let last = { step: -1, at: started }
    const startGroup = (this.opts as SuperviseOptions & GroupStarterOption).startGroup
    return runAttempt(startGroup ?? GROUP_STARTERS[spec.transport ?? 'threads'], spec, {
      hangTimeoutMs: hangTimeoutOf(this.opts),
      onLog: this.opts.onLog,
      onStarted: (g) => {
        this.group = g
        this.opts.onGroup?.(g)
        // A preemption asked for while no ranks were running applies to the new ones.
        if (this.preemptWhy !== undefined) for (let r = 0; r < g.size; r++) g.send(r, { type: 'preempt' })
      },
      onCheckpoint: (c) => {
        this.lastCheckpointMs = c.ms
        const { seq, skeleton, step, bytes, totalBytes, ms } = c
        this.emit({ event: 'checkpoint', attempt, seq, skeleton, step, bytes, totalBytes, ms })
        this.opts.onCheckpoint?.(c)
      },
      onResumed: (r: ResumedFigures) => {
        const totalMs = performance.now() - started
        const spawnMs = Math.max(0, totalMs - r.negotiateMs - r.loadMs - r.replayMs - r.restoreMs)
        this.emit({ event: 'recovery-line', attempt, seq: r.seq, skeleton: r.skeleton, step: r.step, negotiateMs: r.negotiateMs })
        this.emit({ event: 'replay-done', attempt, replayMs: r.replayMs })
        this.emit({ event: 'restore-done', attempt, loadMs: r.loadMs, restoreMs: r.restoreMs })
        const { seq, skeleton, step, negotiateMs, loadMs, replayMs, restoreMs } = r
        const requested = attempt === 0
        this.emit({ event: 'resume', attempt, requested, seq, skeleton, step, spawnMs, negotiateMs, loadMs, replayMs, restoreMs, totalMs })
        this.opts.onResumed?.(r)
      },
      onProgress: (rank, skeleton, step, total) => {
        if (rank !== 0) return
        const now = performance.now()
        const stepsPerSecond = last.step >= 0 && step > last.step ? ((step - last.step) * 1000) / (now - last.at) : 0
        last = { step, at: now }
        this.emit({ event: 'progress', attempt, skeleton, step, total, stepsPerSecond })
        this.opts.onProgress?.(skeleton, step, total)
      },
    })
  }

  /** Preempt before the time limit, leaving room for one checkpoint at its measured cost. */
  private startTimeLimit(): NodeJS.Timeout | undefined {
    const limit = this.opts.timeLimitMs
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
