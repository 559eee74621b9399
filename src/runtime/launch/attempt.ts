import { ConfigError, MolotofError, ProgramLoadError, RankFailedError, reviveError, type FailureReason, type RankLocation } from '../../errors.js'
import type { CheckpointEvent, ResumedFigures } from '../../checkpoint/events.js'
import type { RankGroup, RankGroupSpec, StartRankGroup } from '../group.js'
import type { RankToLauncher } from '../protocol.js'

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
  /** `once`: a key the rank says once per run (the supervisor prints the first only). */
  onLog?: (rank: number, text: string, once?: string) => void
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
  return new Promise<AttemptOutcome>((resolve) => {
    const values: unknown[] = new Array(spec.size)
    const finished = new Set<number>()
    let text: string | undefined
    let settled = false
    let preempted: { seq: number | undefined; skeleton: number; step: number } | undefined
    let preemptedCount = 0
    let watchdog: NodeJS.Timeout | undefined

    const end = (o: AttemptOutcome) => {
      if (settled) return
      settled = true
      if (watchdog) clearInterval(watchdog)
      void group.terminate().then(() => resolve(o))
    }
    const fail = (loc: RankLocation, reason: FailureReason, message: string, failedAt: number, stack?: string, cause?: Error) =>
      end({ kind: 'failed', error: new RankFailedError(loc, message, stack, { cause }), failedAt, detectedAt: performance.now(), reason })
    const locate = (rank: number): RankLocation => ({ rank, ...group.where(rank) })

    const onMessage = (m: RankToLauncher) => {
      switch (m.type) {
        case 'log':
          return cb.onLog?.(m.rank, m.text, m.once)
        case 'checkpoint':
          if (m.rank === 0) cb.onCheckpoint?.(m)
          return
        case 'resumed':
          if (m.rank === 0) cb.onResumed?.(m)
          return
        case 'progress':
          return cb.onProgress?.(m.rank, m.skeleton, m.step, m.total)
        case 'result':
          values[m.rank] = m.value
          finished.add(m.rank)
          if (m.rank === 0) text = m.text
          if (finished.size === spec.size) end({ kind: 'done', values, text })
          return
        case 'preempted':
          finished.add(m.rank)
          preempted = { seq: m.seq, skeleton: m.skeleton, step: m.step }
          if (++preemptedCount === spec.size) end({ kind: 'preempted', ...preempted })
          return
        case 'config-error':
          return end({ kind: 'refused', error: new ConfigError(m.message) })
        case 'load-error':
          return end({ kind: 'refused', error: new ProgramLoadError(m.message) })
        case 'error': {
          const loc = { rank: m.rank, skeleton: m.skeleton, step: m.step, phase: m.phase }
          // The class and fields the rank threw, rebuilt from the catalogue.
          const error = reviveError(m)
          if (error instanceof MolotofError && !error.restartable) {
            // Where it happened, unless it is bad input refused before any computation (a ConfigError: its
            // place, a skeleton's start, would read as a failure location).
            if (loc.skeleton >= 0 && !(error instanceof ConfigError)) error.message += `\n(rank ${loc.rank}, skeleton ${loc.skeleton}, step ${loc.step}, phase ${loc.phase})`
            return end({ kind: 'refused', error })
          }
          return fail(loc, 'error', `${m.name}: ${m.message}`, performance.now(), m.stack, error)
        }
        case 'signal':
          return cb.onSignal?.(m.rank, m.signal)
        case 'describe':
        case 'buffers': // for a spare pool (spares.ts), which takes it before an attempt sees it
          return
      }
    }
    const group = start(spec, {
      message: onMessage,
      exit: (rank, how) => {
        if (settled || finished.has(rank)) return
        if (how.signal === 'SIGTERM' || how.signal === 'SIGINT') {
          // The signal reached the rank before its handler (a group signal during a start): a stop, as if forwarded.
          cb.onSignal?.(rank, how.signal)
          return end({ kind: 'stopped', rank, signal: how.signal })
        }
        const t = performance.now()
        const why = how.signal ? `killed by ${how.signal}` : `exited with code ${how.code}`
        fail(locate(rank), how.signal ? 'signal' : 'exit', `the rank ${group.transport === 'threads' ? 'thread' : 'process'} ${why}`, t)
      },
    })
    cb.onStarted?.(group)
    if (group.lastHeartbeat(0) !== undefined || group.transport === 'processes') {
      watchdog = setInterval(() => {
        const now = performance.now()
        for (let r = 0; r < spec.size; r++) {
          if (finished.has(r)) continue
          const last = group.lastHeartbeat(r)
          // The phase matters only past the hang timeout: a rank still starting gets START_TIMEOUT_MS.
          if (last === undefined || now - last <= cb.hangTimeoutMs) continue
          const limit = group.where(r).phase === 'start' ? Math.max(cb.hangTimeoutMs, START_TIMEOUT_MS) : cb.hangTimeoutMs
          if (now - last > limit) {
            fail(locate(r), 'hang', `no heartbeat for ${((now - last) / 1000).toFixed(1)} s (timeout ${(limit / 1000).toFixed(1)} s): the rank is hung`, last)
            return
          }
        }
      }, Math.max(10, Math.min(spec.heartbeatMs, 250)))
      watchdog.unref()
    }
  })
}
