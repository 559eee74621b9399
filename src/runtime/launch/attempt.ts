import { ConfigError, MolotofError, ProgramLoadError, RankFailedError, reviveError, type FailureReason, type RankLocation } from '../../errors.js'
import type { CheckpointEvent, ResumedFigures } from '../../checkpoint/events.js'
import type { RankExit, RankGroup, RankGroupSpec, StartRankGroup } from '../group.js'
import type { LogKind, RankToLauncher } from '../protocol.js'

/** How one attempt ended. */
export type AttemptOutcome =
  | { kind: 'done'; values: unknown[]; text: string | undefined }
  | { kind: 'preempted'; seq: number | undefined; skeleton: number; step: number }
  /** A rank failed (threw, died or hung): the supervisor may restart. */
  | { kind: 'failed'; error: RankFailedError; failedAt: number; detectedAt: number; reason: FailureReason }
  /** An error a restart cannot fix (options, partition, checkpoint settings, a full disk …), as the class the rank threw. */
  | { kind: 'refused'; error: MolotofError }
  /**
   * A rank process was ended by a stop signal (SIGINT, SIGTERM) before it could
   * install its handler (the first milliseconds of its start, see
   * process-boot.mjs): a stop request, not a failure of the rank.
   */
  | { kind: 'stopped'; rank: number; signal: NodeJS.Signals }

export interface AttemptCallbacks {
  /** `kind`: what the line tells (see LogKind); `once`: a key the rank says once per run (the supervisor prints the first only). */
  onLog?: (rank: number, text: string, kind: LogKind | undefined, once?: string) => void
  onCheckpoint?: (e: CheckpointEvent) => void
  onResumed?: (r: ResumedFigures) => void
  onProgress?: (rank: number, skeleton: number, step: number, total: number | undefined) => void
  /** Called once the group exists (to forward signals, read progress). */
  onStarted?: (group: RankGroup) => void
  /** A rank process received a stop signal and forwarded it instead of dying (see process-boot.mjs). */
  onSignal?: (rank: number, signal: string) => void
}

/**
 * How long a rank process may stay silent while it starts (node, tsx, loading
 * and compiling the program: phase `start`) before it is declared hung. Many
 * processes starting together on a loaded node can starve their heartbeat
 * threads for seconds; that is not a hang, and a restart would not help.
 */
export const START_TIMEOUT_MS = 10_000

/**
 * Run every rank once and report how it ended. Never hangs: a rank that
 * throws, exits, is killed, or (processes) stops sending heartbeats for
 * `hangTimeoutMs` (at least START_TIMEOUT_MS while it starts) ends the
 * attempt, and every other rank is stopped.
 */
export function runAttempt(
  start: StartRankGroup,
  spec: RankGroupSpec,
  cb: AttemptCallbacks & { hangTimeoutMs: number },
): Promise<AttemptOutcome> {
  return new Promise<AttemptOutcome>((resolve) => new Attempt(spec, cb, resolve).start(start))
}

/** One attempt under way: what the ranks reported so far, until the first outcome ends it. */
class Attempt {
  private readonly values: unknown[]
  /** Ranks that sent their result or stopped after their checkpoint: their exit is no failure. */
  private readonly finished = new Set<number>()
  private text: string | undefined
  private settled = false
  private preemptedCount = 0
  private watchdog: NodeJS.Timeout | undefined
  private group!: RankGroup

  constructor(
    private readonly spec: RankGroupSpec,
    private readonly cb: AttemptCallbacks & { hangTimeoutMs: number },
    private readonly resolve: (o: AttemptOutcome) => void,
  ) {
    this.values = new Array(spec.size)
  }

  /** Start the ranks, and watch their heartbeats where they beat (rank processes; threads have no heartbeat). */
  start(start: StartRankGroup): void {
    this.group = start(this.spec, { message: (m) => this.onMessage(m), exit: (rank, how) => this.onExit(rank, how) })
    this.cb.onStarted?.(this.group)
    if (this.group.lastHeartbeat(0) !== undefined || this.group.transport === 'processes') this.watchHeartbeats()
  }

  /** A rank's report: passed on to the callbacks, or one step towards (or straight to) the attempt's outcome. */
  private onMessage(m: RankToLauncher): void {
    const { cb } = this
    switch (m.type) {
      case 'log':
        return cb.onLog?.(m.rank, m.text, m.kind, m.once)
      case 'checkpoint':
        if (m.rank === 0) cb.onCheckpoint?.(m)
        return
      case 'resumed':
        if (m.rank === 0) cb.onResumed?.(m)
        return
      case 'progress':
        return cb.onProgress?.(m.rank, m.skeleton, m.step, m.total)
      case 'result':
        return this.onResult(m.rank, m.value, m.text)
      case 'preempted':
        return this.onPreempted(m.rank, { seq: m.seq, skeleton: m.skeleton, step: m.step })
      case 'config-error':
        return this.end({ kind: 'refused', error: new ConfigError(m.message) })
      case 'load-error':
        return this.end({ kind: 'refused', error: new ProgramLoadError(m.message) })
      case 'error':
        return this.onError(m)
      case 'signal':
        return cb.onSignal?.(m.rank, m.signal)
      case 'describe':
      case 'buffers': // for a spare pool (spares.ts), which takes it before an attempt sees it
        return
    }
  }

  /** Done when every rank has sent its result. */
  private onResult(rank: number, value: unknown, text: string | undefined): void {
    this.values[rank] = value
    this.finished.add(rank)
    if (rank === 0) this.text = text
    if (this.finished.size === this.spec.size) this.end({ kind: 'done', values: this.values, text: this.text })
  }

  /** Preempted when every rank has stopped after the checkpoint they agreed on. */
  private onPreempted(rank: number, at: { seq: number | undefined; skeleton: number; step: number }): void {
    this.finished.add(rank)
    if (++this.preemptedCount === this.spec.size) this.end({ kind: 'preempted', ...at })
  }

  /** A rank threw: a failure to restart from, or an error a restart cannot fix (refused, never retried). */
  private onError(m: Extract<RankToLauncher, { type: 'error' }>): void {
    const loc = { rank: m.rank, skeleton: m.skeleton, step: m.step, phase: m.phase }
    // The class and fields the rank threw, rebuilt from the catalogue.
    const error = reviveError(m)
    if (error instanceof MolotofError && !error.restartable) {
      // Where it happened, unless it is bad input refused before any computation (a ConfigError: its
      // place, a skeleton's start, would read as a failure location).
      if (loc.skeleton >= 0 && !(error instanceof ConfigError)) error.message += `\n(rank ${loc.rank}, skeleton ${loc.skeleton}, step ${loc.step}, phase ${loc.phase})`
      return this.end({ kind: 'refused', error })
    }
    this.fail(loc, 'error', `${m.name}: ${m.message}`, performance.now(), m.stack, error)
  }

  /** A rank ended before its result: killed by a stop signal as it started (a stop), else a failure. */
  private onExit(rank: number, how: RankExit): void {
    if (this.settled || this.finished.has(rank)) return
    if (how.signal === 'SIGTERM' || how.signal === 'SIGINT') {
      // The signal reached the rank before its handler (a group signal during a start): a stop, as if forwarded.
      this.cb.onSignal?.(rank, how.signal)
      return this.end({ kind: 'stopped', rank, signal: how.signal })
    }
    const t = performance.now()
    const why = how.signal ? `killed by ${how.signal}` : `exited with code ${how.code}`
    this.fail(this.locate(rank), how.signal ? 'signal' : 'exit', `the rank ${this.group.transport === 'threads' ? 'thread' : 'process'} ${why}`, t)
  }

  /** A rank silent past the hang timeout (START_TIMEOUT_MS at least while it starts) is hung: a failure. */
  private watchHeartbeats(): void {
    const { spec, cb, group } = this
    this.watchdog = setInterval(() => {
      const now = performance.now()
      for (let r = 0; r < spec.size; r++) {
        if (this.finished.has(r)) continue
        const last = group.lastHeartbeat(r)
        // The phase matters only past the hang timeout: a rank still starting gets START_TIMEOUT_MS.
        if (last === undefined || now - last <= cb.hangTimeoutMs) continue
        const limit = group.where(r).phase === 'start' ? Math.max(cb.hangTimeoutMs, START_TIMEOUT_MS) : cb.hangTimeoutMs
        if (now - last > limit) {
          this.fail(this.locate(r), 'hang', `no heartbeat for ${((now - last) / 1000).toFixed(1)} s (timeout ${(limit / 1000).toFixed(1)} s): the rank is hung`, last)
          return
        }
      }
    }, Math.max(10, Math.min(spec.heartbeatMs, 250)))
    this.watchdog.unref()
  }

  private locate(rank: number): RankLocation {
    return { rank, ...this.group.where(rank) }
  }

  private fail(loc: RankLocation, reason: FailureReason, message: string, failedAt: number, stack?: string, cause?: Error): void {
    this.end({ kind: 'failed', error: new RankFailedError(loc, message, stack, { cause }), failedAt, detectedAt: performance.now(), reason })
  }

  /** The first outcome wins: every rank still running is stopped before it is reported. */
  private end(o: AttemptOutcome): void {
    if (this.settled) return
    this.settled = true
    if (this.watchdog) clearInterval(this.watchdog)
    void this.group.terminate().then(() => this.resolve(o))
  }
}
