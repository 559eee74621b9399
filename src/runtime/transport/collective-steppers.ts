import { CommunicationError } from '../../errors.js'
import { SENT, type Message, type ReduceOp } from '../../routing/communicator.js'
import type { StepScheduler, Stepper } from '../../skeletons/step-scheduler.js'
import { DONE, WOULD_WAIT } from '../../skeletons/step-scheduler.js'

/** The point-to-point part a transport provides; the collectives are built on it. */
export interface PointToPoint {
  readonly rank: number
  readonly size: number
  send(dest: number, tag: number, bytes: Uint8Array): Promise<void>
  recv(src: number, tag: number): Promise<Message>
  /** Present where a message that is here can be taken without waiting (never blocking: see `CollectiveStepper`). */
  recvNow?(src: number, tag: number): Message | undefined
  /** The scheduler of the ranks of this thread (runLocal), if they have one. */
  readonly scheduler?: StepScheduler
}

const EMPTY = new Uint8Array(0)

/**
 * One collective of one rank as a state machine (a `Stepper`), so that the
 * ranks of one thread (runLocal) run their rounds from the StepScheduler's
 * call stack: no await per round, and a rank goes on at once when its
 * partner's message is already there. Elsewhere `run` awaits each missing
 * message and hands it over. One stepper per rank and kind, reused by every
 * call (`start`).
 *
 * ```ts
 * const s = new AllreduceStepper(p2p)
 * s.start(tag, localMax, 'max')
 * const waiting = s.run()          // undefined: done already; else a promise
 * if (waiting) await waiting
 * s.result                          // the same bits on every rank
 * ```
 */
abstract class CollectiveStepper implements Stepper {
  /** Between `start` and the end: a call made meanwhile (collectives not awaited one by one) needs a stepper of its own. */
  busy = false
  protected tag = 0
  /** Whether this round's send is out (a send that must wait makes `advance` return its promise). */
  protected sent = false
  private src = 0
  /** The awaited message, handed over by `run` when the rank awaits its receives. */
  private handed: Message | undefined

  constructor(protected readonly p2p: PointToPoint) {}

  abstract advance(): typeof DONE | typeof WOULD_WAIT | Promise<unknown>

  awaitedSource(): number {
    return this.src
  }

  awaitedTag(): number {
    return this.tag
  }

  /**
   * Run to the end: undefined when done at once, else a promise of the end.
   * With a scheduler the stepper parks with it, in its rank's one slot (free
   * when the rank is outside the scheduler or inside its own advance, which
   * the scheduler takes out of the slot while it runs); without a scheduler,
   * or when the slot holds another collective of the rank (not awaited
   * before this one began), missing messages are awaited. Only a transport
   * whose ranks share a thread has a scheduler, and its `recvNow` never
   * blocks (a thread transport's may wait for a peer).
   */
  run(): Promise<void> | undefined {
    const r = this.advance()
    if (r === DONE) return undefined
    const scheduler = this.p2p.scheduler
    if (r === WOULD_WAIT && scheduler !== undefined && !scheduler.holds(this.p2p.rank)) return scheduler.park(this.p2p.rank, this, true).then(this.afterPark)
    return this.awaitRest(r)
  }

  /** The scheduler gave the stepper back: done, or not (a send that had to wait, or its rank's loop took the slot: EVICTED), then it goes on awaiting. */
  private readonly afterPark = (v: unknown): Promise<void> | void => (v === DONE ? undefined : this.awaitRest(this.advance()))

  private async awaitRest(first: typeof DONE | typeof WOULD_WAIT | Promise<unknown>): Promise<void> {
    for (let r = first; r !== DONE; r = this.advance()) {
      if (r === WOULD_WAIT) this.handed = await this.p2p.recv(this.src, this.tag)
      else await r
    }
  }

  /** The message from `src` (of this collective) if it is here; else remember what is awaited. */
  protected take(src: number): Message | undefined {
    const m = this.handed
    if (m !== undefined) {
      this.handed = undefined
      return m
    }
    this.src = src
    return this.p2p.scheduler !== undefined ? this.p2p.recvNow?.(src, this.tag) : undefined
  }

  protected begin(tag: number): void {
    this.tag = tag
    this.sent = false
    this.busy = true
  }

  protected end(): typeof DONE {
    this.busy = false
    return DONE
  }

  /** Send this round's message once; a promise when the transport needs the bytes until it resolves. */
  protected sendOnce(dest: number, bytes: Uint8Array): Promise<void> | undefined {
    if (this.sent) return undefined
    this.sent = true
    const p = this.p2p.send(dest, this.tag, bytes)
    return p === SENT ? undefined : p
  }
}

// Phases of an allreduce.
const FOLD_IN = 0
const ROUNDS = 1
const FOLD_OUT = 2
const ENDED = 3

/**
 * Allreduce of one number by recursive doubling: ranks beyond the largest
 * power of two first fold into a partner and get the result back at the end.
 * At each round both partners combine the same two operands in the same
 * order (the lower rank's first), so every rank ends with the same bits, and
 * the order depends on the rank count only, never on timing.
 */
export class AllreduceStepper extends CollectiveStepper {
  /** The value so far; the result once `run` has ended. */
  result = 0
  private op: ReduceOp = 'sum'
  private phase = ENDED
  private pof2 = 1
  private rem = 0
  private newRank = 0
  private mask = 1
  private readonly out = new Float64Array(1)
  private readonly outBytes = new Uint8Array(this.out.buffer)
  private readonly in = new Float64Array(1)
  private readonly inBytes = new Uint8Array(this.in.buffer)

  /** Number of message rounds on the critical path of an allreduce over `size` ranks. */
  static rounds(size: number): number {
    const pof2 = largestPowerOfTwo(size)
    return Math.log2(pof2) + (pof2 === size ? 0 : 2)
  }

  start(tag: number, value: number, op: ReduceOp): void {
    const { rank, size } = this.p2p
    this.begin(tag)
    this.result = value
    this.op = op
    this.pof2 = largestPowerOfTwo(size)
    this.rem = size - this.pof2
    this.phase = rank < 2 * this.rem ? FOLD_IN : ROUNDS
    this.newRank = rank - this.rem
    this.mask = 1
  }

  advance(): typeof DONE | typeof WOULD_WAIT | Promise<unknown> {
    const rank = this.p2p.rank
    if (this.phase === FOLD_IN) {
      if (rank % 2 === 0) {
        const p = this.sendNumber(rank + 1)
        if (p) return p
        this.newRank = -1
        this.next(FOLD_OUT)
      } else {
        const m = this.take(rank - 1)
        if (m === undefined) return WOULD_WAIT
        this.result = combine(this.op, this.numberOf(m, rank - 1), this.result)
        this.newRank = rank >> 1
        this.next(ROUNDS)
      }
    }
    if (this.phase === ROUNDS) {
      const newRank = this.newRank
      for (; this.mask < this.pof2; this.mask <<= 1) {
        const newPartner = newRank ^ this.mask
        const partner = newPartner < this.rem ? newPartner * 2 + 1 : newPartner + this.rem
        const p = this.sendNumber(partner)
        if (p) return p
        const m = this.take(partner)
        if (m === undefined) return WOULD_WAIT
        const other = this.numberOf(m, partner)
        this.result = newRank < newPartner ? combine(this.op, this.result, other) : combine(this.op, other, this.result)
        this.sent = false
      }
      this.next(FOLD_OUT)
    }
    if (this.phase === FOLD_OUT) {
      if (rank < 2 * this.rem) {
        if (rank % 2 === 1) {
          const p = this.sendNumber(rank - 1)
          if (p) return p
        } else {
          const m = this.take(rank + 1)
          if (m === undefined) return WOULD_WAIT
          this.result = this.numberOf(m, rank + 1)
        }
      }
      this.phase = ENDED
    }
    return this.end()
  }

  private next(phase: number): void {
    this.phase = phase
    this.sent = false
  }

  private sendNumber(dest: number): Promise<void> | undefined {
    if (!this.sent) this.out[0] = this.result
    return this.sendOnce(dest, this.outBytes)
  }

  /** The number a message carries (8 bytes); releases the message. */
  private numberOf(m: Message, src: number): number {
    if (m.bytes.byteLength !== 8) {
      m.release()
      throw new CommunicationError(`collectives: rank ${this.p2p.rank} expected a number (8 bytes) from rank ${src} but got ${m.bytes.byteLength} bytes; the ranks called different collectives`)
    }
    this.inBytes.set(m.bytes)
    m.release()
    return this.in[0]
  }
}

/** Dissemination barrier: round k sends to the rank 2^k ahead and hears from the one 2^k behind. */
export class BarrierStepper extends CollectiveStepper {
  private distance = 1

  start(tag: number): void {
    this.begin(tag)
    this.distance = 1
  }

  advance(): typeof DONE | typeof WOULD_WAIT | Promise<unknown> {
    const { rank, size } = this.p2p
    for (; this.distance < size; this.distance <<= 1) {
      const p = this.sendOnce((rank + this.distance) % size, EMPTY)
      if (p) return p
      const m = this.take((rank - this.distance + size) % size)
      if (m === undefined) return WOULD_WAIT
      m.release()
      this.sent = false
    }
    return this.end()
  }
}

function largestPowerOfTwo(n: number): number {
  let p = 1
  while (p * 2 <= n) p *= 2
  return p
}

function combine(op: ReduceOp, low: number, high: number): number {
  return op === 'sum' ? low + high : op === 'max' ? Math.max(low, high) : Math.min(low, high)
}
