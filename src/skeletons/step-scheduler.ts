import { ConfigError } from '../errors.js'
import type { SparseClock } from './sparse-clock.js'

/** What `Stepper.advance` returns when its loop has ended. */
export const DONE: unique symbol = Symbol('done')
/** What `Stepper.advance` returns when it needs a message that has not arrived (only when a scheduler runs it). */
export const WOULD_WAIT: unique symbol = Symbol('would wait')
/** What a park resolves with when a loop of the same rank took the slot (see `StepScheduler.park`). */
export const EVICTED: unique symbol = Symbol('evicted')

/**
 * A skeleton loop as a state machine: `advance` runs it until it ends
 * (`DONE`), must wait for a message that is not here yet (`WOULD_WAIT`), or
 * must wait for anything else (a promise: the caller awaits it and hands its
 * value on before the next `advance`).
 */
export interface Stepper {
  /** `driven`: run by a StepScheduler, which lets the event loop run itself (the stepper does not yield). */
  advance(driven: boolean): typeof DONE | typeof WOULD_WAIT | Promise<unknown>
  /** After WOULD_WAIT: the rank whose message it waits for. */
  awaitedSource(): number
  /** After WOULD_WAIT: the tag of that message. */
  awaitedTag(): number
}

interface Parked {
  stepper: Stepper
  resolve: (v: unknown) => void
  reject: (e: unknown) => void
  /** A collective, which a loop of its rank may send back to its own awaits (see `evict`). */
  evictable: boolean
}

/** Ready ranks run per burst before the lowest ready rank is looked for again. */
const BURST = 16

/**
 * Runs the skeleton loops of the ranks of one thread (`runLocal`) from one
 * call stack, so that a superstep of P ranks in one thread needs no promise:
 * each rank awaiting its neighbours' halos would cost an await, a few hundred
 * bytes of garbage, per rank and superstep.
 *
 * A rank whose loop needs a message that is not here *parks* (one promise,
 * once). The delivery of the very message it waits for makes it *ready*
 * (not any message: a rank woken when its neighbours have all moved on does
 * several supersteps in one go). The scheduler runs ready ranks in bursts of
 * 16, each burst from the lowest ready rank upwards, until none is ready
 * (their sends make the others ready). Bursts keep the work on a few
 * neighbouring ranks while their state is in the cache, and the group moves
 * on as a wave; sweeping all ready ranks in turn instead visits each rank's
 * state once per superstep, from memory once the group outgrows the cache
 * (P = 1024 strips of Jacobi, 3,000 supersteps: 4.6 against 2.3 µs per
 * rank-superstep). It is not fair: lower ranks go first, and a higher rank
 * runs when the lower ones cannot go on. In a halo exchange that is bounded
 * (a rank gets at most one superstep ahead of each neighbour, so rank 0 at
 * most P − 1 ahead of rank P − 1: the start and end of a run then see the
 * group spread out); ranks that never wait for each other run one after
 * the other. A loop leaves the scheduler when it ends, fails, or must wait
 * for something other than a message (a vote, a checkpoint): its park
 * promise settles with that, and the rank goes on with its own awaits. Every
 * `YIELD_EVERY_MS` the scheduler lets the event loop run (timers, I/O).
 * A rank's collectives park the same way (runtime/transport/collective-steppers.ts),
 * in the same slot: while a loop runs, the scheduler takes it out of its
 * slot, so that a vote the loop calls can park there.
 *
 * ```ts
 * const scheduler = new StepScheduler(size, yieldClock)
 * // in rank r's loop:
 * let r = stepper.advance(false)
 * if (r === WOULD_WAIT) r = scheduler.park(rank, stepper)   // resolves with DONE or the value of what the loop then waited for
 * // in the transport, after each delivery:
 * scheduler.delivered(dest, src, tag)
 * ```
 */
export class StepScheduler {
  private readonly parked: Array<Parked | undefined>
  /** What each parked rank waits for: source rank and tag. */
  private readonly waitSource: Int32Array
  private readonly waitTag: Float64Array
  /** 1 for the ranks that are ready. */
  private readonly queued: Uint8Array
  /** Number of ready ranks. */
  private count = 0
  /** No rank below this one is ready. */
  private lowest = 0
  private driving = false
  private scheduled = false
  private failure: unknown = undefined
  private readonly resumeSoon = (): void => {
    this.scheduled = false
    this.drive()
  }
  private readonly resumeAfterYield = (): void => {
    this.scheduled = false
    this.clock.reset()
    this.drive()
  }

  constructor(
    readonly size: number,
    private readonly clock: SparseClock,
  ) {
    this.parked = new Array<Parked | undefined>(size).fill(undefined)
    this.waitSource = new Int32Array(size)
    this.waitTag = new Float64Array(size)
    this.queued = new Uint8Array(size)
  }

  /**
   * Hand rank `rank`'s loop, which returned WOULD_WAIT, to the scheduler;
   * resolves with DONE, with the value of what it then had to wait for, or
   * with EVICTED (see `evict`).
   */
  park(rank: number, stepper: Stepper, evictable = false): Promise<unknown> {
    if (this.failure !== undefined) return Promise.reject(this.failure)
    if (!this.evict(rank)) return Promise.reject(twoLoops(rank))
    // A park is a transition (a loop enters the scheduler once, not per superstep): a closure is fine here.
    const p = new Promise<unknown>((resolve, reject) => (this.parked[rank] = { stepper, resolve, reject, evictable }))
    this.waitSource[rank] = stepper.awaitedSource()
    this.waitTag[rank] = stepper.awaitedTag()
    return p
  }

  /** A message from `src` with `tag` was delivered to rank `dest`: if its parked loop waits for it, it is ready (and runs soon, unless the scheduler is running). */
  delivered(dest: number, src: number, tag: number): void {
    if (this.waitSource[dest] !== src || this.waitTag[dest] !== tag || this.queued[dest] === 1 || this.parked[dest] === undefined) return
    this.queued[dest] = 1
    this.count++
    if (dest < this.lowest) this.lowest = dest
    if (this.driving || this.scheduled) return
    this.scheduled = true
    queueMicrotask(this.resumeSoon)
  }

  /** The run failed: every parked loop fails with `err`, and so does every later park. */
  fail(err: unknown): void {
    this.failure ??= err
    for (let r = 0; r < this.size; r++) {
      const p = this.parked[r]
      this.parked[r] = undefined
      p?.reject(this.failure)
    }
    this.count = 0
    this.lowest = this.size
    this.queued.fill(0)
  }

  /** Whether a stepper of `rank` is parked now (a collective finding the slot taken awaits its messages instead). */
  holds(rank: number): boolean {
    return this.parked[rank] !== undefined
  }

  /**
   * Free `rank`'s slot; false when it holds a loop. One slot per rank: a
   * loop that parks where a collective of its rank waits (one the loop's own
   * code started and did not await) hands that collective back, resolved
   * with EVICTED, to go on with its own awaits. Collectives never evict
   * (they check `holds`); two loops of one rank at once are refused.
   */
  private evict(rank: number): boolean {
    const other = this.parked[rank]
    if (other === undefined) return true
    if (!other.evictable) return false
    this.parked[rank] = undefined
    if (this.queued[rank] === 1) {
      this.queued[rank] = 0
      this.count--
    }
    other.resolve(EVICTED)
    return true
  }

  /** Number of loops parked now. */
  get waiting(): number {
    let n = 0
    for (const p of this.parked) if (p !== undefined) n++
    return n
  }

  private drive(): void {
    if (this.driving) return
    this.driving = true
    try {
      const size = this.size
      const queued = this.queued
      while (this.count > 0 && this.failure === undefined) {
        // A burst: up to BURST ready ranks, lowest first (see the class comment).
        let rank = this.lowest
        this.lowest = size
        for (let burst = 0; rank < size && burst < BURST; rank++) {
          if (queued[rank] === 0) continue
          queued[rank] = 0
          this.count--
          burst++
          const p = this.parked[rank]
          if (p === undefined) continue
          // Out of its slot while it runs: what it calls may park a stepper of its own there (a loop's vote).
          this.parked[rank] = undefined
          let r: typeof DONE | typeof WOULD_WAIT | Promise<unknown>
          try {
            r = p.stepper.advance(true)
          } catch (e) {
            p.reject(e)
            continue
          }
          if (r === WOULD_WAIT) {
            // The run failed while it ran (fail() no longer saw it in its slot).
            if (this.failure !== undefined) {
              p.reject(this.failure)
              return
            }
            if (!this.evict(rank)) {
              p.reject(twoLoops(rank))
              continue
            }
            this.parked[rank] = p
            this.waitSource[rank] = p.stepper.awaitedSource()
            this.waitTag[rank] = p.stepper.awaitedTag()
          } else {
            // The loop ended or waits for something else: its rank takes it back (a promise resolves with what it adopts).
            p.resolve(r)
          }
          if (this.failure !== undefined) return
        }
        // Ranks from `rank` on were not looked at: the next burst starts there at the latest.
        if (rank < this.lowest) this.lowest = rank
        if (this.count > 0 && this.clock.due()) {
          this.scheduled = true
          setImmediate(this.resumeAfterYield)
          return
        }
      }
    } finally {
      this.driving = false
    }
  }
}

function twoLoops(rank: number): ConfigError {
  return new ConfigError(`rank ${rank}: two superstep loops run at once on one rank; run one skeleton after the other (await its run() before starting the next)`)
}
