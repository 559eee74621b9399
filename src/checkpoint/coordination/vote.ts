import { performance } from 'node:perf_hooks'
import type { Communicator } from '../../routing/communicator.js'
import { ConfigError } from '../../errors.js'
import type { CheckpointAt, CheckpointControl } from '../control.js'
import type { CheckpointLevel } from '../events.js'
import { PolicyClock } from '../policy/clock.js'
import type { CheckpointPolicy } from '../policy/policy.js'
import { checkpointAtStep } from '../policy/steps.js'
import type { SkeletonState } from '../skeleton-hooks.js'

/** One level's checkpoint timing in one skeleton: its policy clock and measured costs. */
export interface LevelClock {
  clock: PolicyClock
  /** When the last checkpoint of this level was committed (or restored, or the skeleton started). */
  lastAt: number
  /** Measured costs (ms, slowest rank), for Young/Daly: commit times on disk, stalls in memory. */
  costs: number[]
}

/**
 * One skeleton's checkpoint timing: the disk level's clock (the fields of
 * LevelClock), the memory level's when it is on, and when the ranks vote next.
 */
export interface ClockState extends LevelClock {
  /** The memory level's clock; undefined when the run has no memory level. */
  memory?: LevelClock
  /** Next superstep at which the ranks vote (time-based policies, preemption). */
  voteStep: number
  lastVote: { step: number; at: number }
}

/** What the ranks agreed at one checkpoint point. */
export interface VoteOutcome {
  /** Checkpoint at this point. */
  go: boolean
  /** To which level: `disk` (through the memory level when there is one) or `memory` only. */
  level: CheckpointLevel
  /** Checkpoint, then stop every rank. */
  preempt: boolean
  /** The ranks met at a collective here: the place to commit a background checkpoint whose writes are done. */
  pollCommit: boolean
}

/**
 * The shortest spacing of votes (ms of supersteps): right after a vote that
 * checkpoints, while the checkpoint waits for its commit (commits happen at
 * votes), and near a time policy's due time, which a vote may then miss by
 * at most this much.
 */
const VOTE_PERIOD_MS = 100
/**
 * The longest spacing: in between, the ranks vote again when the time policy
 * they know falls due (each vote costs one allreduce: 0.14 ms on the 2-rank
 * Jacobi 2048², and on a 2 s memory policy a vote every 100 ms was a tenth
 * of a percent of the run).
 */
const MAX_VOTE_GAP_MS = 1000
/** The longest spacing in a preemptible run: Ctrl-C or a batch system's signal is seen within about this much of supersteps. */
const PREEMPTIBLE_VOTE_GAP_MS = 250
/** The allreduce packs the vote above the spacing in supersteps, which stays below this. */
const SPACING_LIMIT = 2 ** 20

/**
 * The decision at each checkpoint point: whether to checkpoint (policy,
 * requests) and whether to stop (preemption), the same on every rank.
 * Step-based policies decide locally (every rank gets the same answer);
 * time-based ones, requests under a supervisor and preemption need
 * agreement: one allreduce carries the vote and the spacing of the next
 * vote: 100 ms of supersteps while a checkpoint waits for its commit, else
 * the time until the next time policy falls due, between 100 ms and 1 s
 * (250 ms in a preemptible run).
 * Each level has
 * its own policy; levels nest (a disk checkpoint also refreshes the memory
 * level it is flushed from), so one number orders the outcomes and the
 * allreduce's max is the agreement: 0 nothing, 1 memory, 2 disk, 3 preempt.
 * Requests and preemption go to disk.
 *
 * ```ts
 * const vote = new CheckpointVote(comm, cfg.policy, control, cfg.memory?.policy)
 * const clock = vote.clockFor(state)
 * const { go, preempt } = await vote.decide(state, clock, performance.now(), committer.inFlight)
 * ```
 */
export class CheckpointVote {
  private readonly clocks = new Map<number, ClockState>()
  private requested = false
  private votes = 0
  private voteMs = 0

  constructor(
    private readonly comm: Communicator,
    /** The run's policy, for skeletons without their own. */
    private readonly runPolicy: CheckpointPolicy,
    private readonly control: CheckpointControl | undefined,
    /** The run's memory-level policy, for skeletons without their own; undefined: no memory level. */
    private readonly runMemoryPolicy?: CheckpointPolicy,
  ) {}

  /** The timing state of `state`'s skeleton, created at its first checkpoint point (or restore). */
  clockFor(state: SkeletonState): ClockState {
    let c = this.clocks.get(state.index)
    if (!c) {
      const now = performance.now()
      const policy = state.policy ?? this.runPolicy
      c = { clock: new PolicyClock(policy), lastAt: now, costs: [], voteStep: state.step, lastVote: { step: state.step, at: now } }
      const memoryPolicy = this.runMemoryPolicy === undefined ? undefined : (state.memoryPolicy ?? this.runMemoryPolicy)
      if (memoryPolicy !== undefined) c.memory = { clock: new PolicyClock(memoryPolicy), lastAt: now, costs: [] }
      this.clocks.set(state.index, c)
      refuseUselessInjection(this.control?.faults?.askedCheckpointPoint(), state, policy, memoryPolicy, this.comm.rank)
    }
    return c
  }

  /**
   * Checkpoint at the next checkpoint point (policy `request`, or sooner than
   * the policy would). Under a supervisor one rank asking is enough; in a run
   * without votes, call it on every rank.
   */
  request(): void {
    this.requested = true
  }

  /**
   * True when `decide` would neither checkpoint, stop nor vote at this
   * checkpoint point (no request, step policy not due, no vote due): the
   * caller may skip it. Allocates nothing.
   */
  quiet(state: SkeletonState, clock: ClockState): boolean {
    const control = this.control
    if (this.requested || (control !== undefined && (control.checkpointRequested === true || control.preemptRequested))) return false
    const c = clock.clock
    const m = clock.memory?.clock
    if ((c.timeBased || m?.timeBased === true || control?.preemptible === true) && state.step >= clock.voteStep) return false
    if (!c.timeBased && c.dueAtStep(state.step)) return false
    // The memory level's own step policy is due as well.
    return m === undefined || m.timeBased || !m.dueAtStep(state.step)
  }

  /**
   * Decide this checkpoint point (collective when the run votes and a vote
   * is due). `committing`: a background checkpoint of this rank waits for
   * its commit, which the next vote brings: it should come soon.
   */
  async decide(state: SkeletonState, clock: ClockState, now: number, committing = false): Promise<VoteOutcome> {
    const control = this.control
    const mem = clock.memory
    const diskInput = { step: state.step, now, lastCheckpointAt: clock.lastAt, measuredCostMs: clock.costs }
    const memInput = mem && { step: state.step, now, lastCheckpointAt: mem.lastAt, measuredCostMs: mem.costs }
    const requested = this.requested || control?.checkpointRequested === true
    // Step-based policies give every rank the same answer; time-based ones are decided by vote.
    let disk = !clock.clock.timeBased && clock.clock.shouldCheckpoint(diskInput)
    let memory = mem !== undefined && !mem.clock.timeBased && mem.clock.shouldCheckpoint(memInput!)
    let preempt = false
    const outcome = (pollCommit: boolean): VoteOutcome => ({ go: disk || memory, level: disk ? 'disk' : 'memory', preempt, pollCommit })
    if (clock.clock.timeBased || mem?.clock.timeBased || control?.preemptible) {
      // Clock votes, requests and preemption need agreement, which costs a
      // collective: vote only at `voteStep`, the spacing the last vote agreed.
      if (state.step < clock.voteStep) return outcome(false)
      const stepMs = (now - clock.lastVote.at) / Math.max(1, state.step - clock.lastVote.step)
      const vote = control?.preemptRequested
        ? 3
        : requested || (clock.clock.timeBased && clock.clock.shouldCheckpoint(diskInput))
          ? 2
          : mem?.clock.timeBased && mem.clock.shouldCheckpoint(memInput!)
            ? 1
            : 0
      // No superstep timed yet (the first vote of a skeleton): vote again at the next one rather than guess.
      // A rank that votes to checkpoint asks for the short spacing: its checkpoint commits at the next vote.
      const longest = control?.preemptible ? PREEMPTIBLE_VOTE_GAP_MS : MAX_VOTE_GAP_MS
      const gapMs = vote > 0 || committing ? VOTE_PERIOD_MS : Math.min(longest, Math.max(VOTE_PERIOD_MS, msUntilDue(clock, now)))
      const timed = state.step > clock.lastVote.step
      const every = timed ? Math.min(SPACING_LIMIT - 1, Math.max(1, Math.ceil(gapMs / Math.max(stepMs, 1e-6)))) : 1
      // One allreduce carries both: the vote (3 preempt, 2 disk, 1 memory) and the spacing. The max takes
      // the highest vote and, among the ranks that cast it, the shortest spacing: the same on every rank.
      const voteStart = performance.now()
      const agreed = await this.comm.allreduce(vote * SPACING_LIMIT - every, 'max')
      this.votes++
      this.voteMs += performance.now() - voteStart
      const decided = Math.ceil(agreed / SPACING_LIMIT)
      preempt = decided === 3
      disk = disk || decided >= 2
      memory = memory || decided === 1
      clock.voteStep = state.step + (decided * SPACING_LIMIT - agreed)
      clock.lastVote = { step: state.step, at: now }
      if (decided >= 2) this.clearRequests()
      // A background checkpoint is committed at the first vote where every rank's write is done.
      return outcome(true)
    }
    if (requested) {
      // No votes in this run: a request comes from request(), which every rank calls (SPMD).
      disk = true
      this.clearRequests()
    }
    // Without votes, a background checkpoint is polled at every checkpoint point until all ranks are done.
    return outcome(true)
  }

  /** The votes this rank took part in since the last call, and the time it spent in them (ms). */
  takeTally(): { votes: number; voteMs: number } {
    const t = { votes: this.votes, voteMs: this.voteMs }
    this.votes = 0
    this.voteMs = 0
    return t
  }

  private clearRequests(): void {
    this.requested = false
    if (this.control) this.control.checkpointRequested = false
  }
}

/**
 * Time until the earliest time-based level of `clock` falls due, on this
 * rank's clock; Infinity when none is time-based (the votes serve
 * preemption and requests only).
 */
function msUntilDue(clock: ClockState, now: number): number {
  return Math.min(levelUntilDue(clock, now), clock.memory ? levelUntilDue(clock.memory, now) : Infinity)
}

function levelUntilDue(level: LevelClock, now: number): number {
  return level.clock.timeBased ? level.lastAt + level.clock.intervalMs(level.costs)! - now : Infinity
}

/**
 * `--inject …,phase=checkpoint` kills a rank while it writes a checkpoint: at a
 * step where the skeleton's policy writes none it would kill the rank at an
 * empty checkpoint point, which is not what was asked. Refused, with the
 * nearest checkpoint steps.
 */
function refuseUselessInjection(
  at: CheckpointAt | undefined,
  state: SkeletonState,
  policy: CheckpointPolicy,
  memoryPolicy: CheckpointPolicy | undefined,
  rank: number,
): void {
  if (!at || at.skeleton !== state.index) return
  const m = memoryPolicy === undefined ? undefined : checkpointAtStep(memoryPolicy, at.step)
  if (m !== undefined && (m.kind === 'yes' || m.kind === 'unknown')) return
  const c = checkpointAtStep(policy, at.step)
  if (c.kind === 'yes' || c.kind === 'unknown') return
  const what = `--inject rank=${rank},step=${at.step},phase=checkpoint`
  if (c.kind === 'never') throw new ConfigError(`${what}: no checkpoint is written in ${state.name} (${c.why}); inject in phase calculate or route instead`)
  const nearest = c.before === undefined ? `step ${c.after}` : `steps ${c.before} and ${c.after}`
  throw new ConfigError(`${what}: no checkpoint is written at step ${at.step} of ${state.name} (${c.why}); the nearest are ${nearest}`)
}
