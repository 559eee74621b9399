import type { RanksOrigin } from '../runtime/groups/spares.js'
import type { SupervisorEvent } from '../runtime/launch/supervisor.js'
import { ranksText } from '../runtime/cluster/membership.js'

/**
 * Turns supervisor events into what a person watching a long run wants: on a
 * terminal one progress line redrawn in place (skeleton, step, steps/s, age
 * of the last checkpoint, ETA, restarts); without a terminal a plain line
 * every few seconds. Failures, recoveries and checkpoints always get a line.
 */
export class ProgressView {
  /** When the last checkpoint of each level was committed. */
  private readonly lastCheckpointAt = new Map<string, number>()
  /** The checkpoint a resume the user asked for started from: a checkpoint there is, though this run wrote none yet. */
  private resumedFrom: number | undefined
  private restarts = 0
  private lastPlainAt = -Infinity
  private drawn = false
  /** A node replaced by a spare node, until the recovery's first superstep says how long it took. */
  private replacedNode: number | undefined

  constructor(
    private readonly write: (s: string) => void,
    private readonly tty: boolean,
    private readonly plainEveryMs = 5000,
  ) {}

  /** Print a whole line (clearing the progress line first on a terminal). */
  line(text: string): void {
    this.clear()
    this.write(text + '\n')
  }

  event(e: SupervisorEvent & { t: number }): void {
    switch (e.event) {
      case 'checkpoint':
        this.lastCheckpointAt.set(e.level, e.t)
        return
      case 'failure':
        this.restarts = e.attempt + 1
        this.line(
          `failure: rank ${e.rank} (${e.reason}) at skeleton ${e.skeleton}, step ${e.step}, phase ${e.phase}; detected in ${e.detectionMs.toFixed(0)} ms: ${e.message}`,
        )
        return
      case 'start':
        if (e.stopping) this.line(`starting ${e.ranks} ranks again to checkpoint and stop (the stop signal ended one as it started)`)
        else if (e.attempt > 0) this.line(`restart ${e.attempt}: starting ${e.ranks} ranks in recovery mode`)
        return
      case 'resume': {
        // A resume the user asked for (--resume, nothing failed) is not a recovery.
        if (e.requested) this.resumedFrom = e.seq
        const what = e.requested ? `resumed from checkpoint ${e.seq} (skeleton ${e.skeleton}, step ${e.step})` : 'recovered'
        this.line(
          `${what} in ${e.totalMs.toFixed(0)} ms from ${e.level}: ${e.ranksFrom ? `ranks ${formatOrigin(e.ranksFrom)}` : 'spawn'} ${e.spawnMs.toFixed(0)}, negotiate ${e.negotiateMs.toFixed(1)}, ` +
            `load ${e.loadMs.toFixed(1)}, replay ${e.replayMs.toFixed(1)}, restore ${e.restoreMs.toFixed(1)} ms`,
        )
        return
      }
      case 'node-lost': {
        const at = e.step >= 0 ? ` at step ${e.step}` : ''
        const spares = `${e.sparesLeft} spare node${e.sparesLeft === 1 ? '' : 's'} left`
        if (e.outcome === 'replaced') {
          this.replacedNode = e.node
          this.line(`node ${e.node} lost${at} (${e.why}); spare node ${e.spare} took ${ranksText(e.ranks)} (${spares})`)
        } else if (e.outcome === 'shrunk') {
          this.replacedNode = e.node
          this.line(`node ${e.node} lost${at} (${e.why}); no spare node left: the run goes on with ${e.size} ranks, restoring its checkpoint on them (elastic)`)
        } else if (e.outcome === 'spare-lost') this.line(`spare node ${e.node} lost (${e.why}); ${spares}`)
        else this.line(`node ${e.node} lost${at} (${e.why}); nothing can take its ranks over`)
        return
      }
      case 'recovered': {
        const after = this.replacedNode === undefined ? 'the failure' : `the loss of node ${this.replacedNode}`
        this.replacedNode = undefined
        this.line(
          `first superstep ${e.failureToFirstStepMs.toFixed(0)} ms after ${after}: stop ${e.stopMs.toFixed(0)}, ` +
            `${e.ranksFrom.spawned === 0 ? 'spare' : 'spawn'} ${e.startMs.toFixed(0)} (${formatOrigin(e.ranksFrom)}), negotiate ${e.negotiateMs.toFixed(1)}, ` +
            `load ${e.loadMs.toFixed(1)}, replay ${e.replayMs.toFixed(1)}, restore ${e.restoreMs.toFixed(1)}, first superstep ${e.firstStepMs.toFixed(0)} ms`,
        )
        return
      }
      case 'preempt-requested':
        this.line(`preempting (${e.why}): the ranks checkpoint at the next checkpoint point they agree on (within ~250 ms) and stop (again to stop at once)`)
        return
      case 'progress':
        return this.progress(e)
      default:
        return
    }
  }

  /** Remove the progress line before the final output. */
  clear(): void {
    if (this.tty && this.drawn) {
      this.write('\r\x1b[2K')
      this.drawn = false
    }
  }

  private progress(e: Extract<SupervisorEvent, { event: 'progress' }> & { t: number }): void {
    // Steps count from 0 everywhere (injections, checkpoints, inspect); the fraction counts steps done.
    const parts = [`skeleton ${e.skeleton}`, `step ${e.step}${e.total ? ` (${e.step + 1}/${e.total} done)` : ''}`]
    if (e.stepsPerSecond > 0) parts.push(`${e.stepsPerSecond.toFixed(e.stepsPerSecond < 10 ? 2 : 0)} steps/s`)
    if (this.lastCheckpointAt.size === 0) parts.push(this.resumedFrom === undefined ? 'no checkpoint yet' : `resumed from checkpoint ${this.resumedFrom}, none written since`)
    for (const [level, at] of this.lastCheckpointAt) parts.push(`last ${level} checkpoint ${((e.t - at) / 1000).toFixed(1)} s ago`)
    if (e.total && e.stepsPerSecond > 0) parts.push(`ETA ${formatSeconds((e.total - e.step - 1) / e.stepsPerSecond)}`)
    parts.push(`restarts ${this.restarts}`)
    const text = parts.join(' · ')
    if (this.tty) {
      this.write(`\r\x1b[2K${text}`)
      this.drawn = true
    } else if (e.t - this.lastPlainAt >= this.plainEveryMs) {
      this.lastPlainAt = e.t
      this.write(`progress: ${text}\n`)
    }
  }
}

function formatSeconds(s: number): string {
  if (!Number.isFinite(s)) return '?'
  if (s < 60) return `${s.toFixed(0)} s`
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`
}

/** "1 kept, 1 spare" — how an attempt's ranks were obtained. */
function formatOrigin(o: RanksOrigin): string {
  const parts: string[] = []
  if (o.kept) parts.push(`${o.kept} kept`)
  if (o.spares) parts.push(`${o.spares} spare${o.spares > 1 ? 's' : ''}`)
  if (o.spawned) parts.push(`${o.spawned} spawned`)
  return parts.join(', ')
}
