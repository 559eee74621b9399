import SuperJSON from 'superjson'
import type { BufferAllocator } from '../../domains/dtype.js'
import { DTYPES, joinBytes, type DType } from '../../domains/dtype.js'
import { SENT, type Communicator, type Message, type ReduceOp } from '../../routing/communicator.js'
import { AllreduceStepper, BarrierStepper, type PointToPoint } from './collective-steppers.js'

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/**
 * Collectives in O(log P) rounds over point-to-point messages, for small light
 * values (settings, votes, residuals, checkpoint lists):
 *
 * - `allreduce`: recursive doubling (collective-steppers.ts): the same bits
 *   on every rank, and in every run, whatever the timing. (A sum's rounding
 *   differs from a serial loop's; `RankContext.foldInRankOrder` is the O(P)
 *   way to get that.)
 * - `allgather`: binomial-tree gather to rank 0, then binomial broadcast.
 * - `barrier`: dissemination (round k talks to the ranks 2^k away).
 *
 * Allreduce and barrier run as steppers: in runLocal their rounds run from
 * the ranks' StepScheduler without an await each. Values travel as bytes: a
 * number as 8 bytes, a typed array as its bytes, anything else through
 * superjson. Tags are negative so they never meet
 * routing traffic; a counter keeps successive collectives apart.
 *
 * ```ts
 * const c = new Collectives(p2p)
 * await c.allreduce(localMax, 'max')   // same bits on every rank
 * ```
 */
export class Collectives {
  private seq = 0
  private readonly reduce: AllreduceStepper
  /** `reduce` has ended but its awaited result is not read yet. */
  private reduceUnread = false
  private readonly barrierSteps: BarrierStepper

  constructor(private readonly p2p: PointToPoint) {
    this.reduce = new AllreduceStepper(p2p)
    this.barrierSteps = new BarrierStepper(p2p)
  }

  /** Number of message rounds on the critical path of an allreduce over `size` ranks. */
  static allreduceRounds(size: number): number {
    return AllreduceStepper.rounds(size)
  }

  allreduce(value: number, op: ReduceOp): Promise<number> {
    if (this.p2p.size === 1) return Promise.resolve(value)
    const s = this.reduce.busy || this.reduceUnread ? new AllreduceStepper(this.p2p) : this.reduce
    try {
      s.start(this.nextTag(), value, op)
      const waiting = s.run()
      if (waiting === undefined) return Promise.resolve(s.result)
      // The stepper is done before the promise's reaction runs, and a later allreduce of this rank may start in
      // between (same call stack under a StepScheduler): it must not reuse the stepper until its result is read.
      if (s === this.reduce) this.reduceUnread = true
      return waiting.then(() => {
        if (s === this.reduce) this.reduceUnread = false
        return s.result
      })
    } catch (e) {
      // A collective fails by rejecting, as an async function would.
      return Promise.reject(e)
    }
  }

  async allgather<T>(value: T): Promise<T[]> {
    const { rank, size } = this.p2p
    if (size === 1) return [value]
    const tag = this.nextTag()
    // Gather: rank r collects the records of ranks [r, r + its subtree) in rank order.
    const parts: Uint8Array[] = [encodeRecord(value)]
    let mask = 1
    for (; mask < size; mask <<= 1) {
      if (rank & mask) {
        await this.sendAwaited(rank - mask, tag, joinBytes(parts))
        break
      }
      if (rank + mask < size) parts.push(await this.recvBytes(rank + mask, tag))
    }
    // Broadcast the whole list from rank 0 down the same tree.
    let all: Uint8Array
    if (rank === 0) {
      all = joinBytes(parts)
    } else {
      all = await this.recvBytes(rank - mask, tag)
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
      if (rank + mask < size) await this.sendAwaited(rank + mask, tag, all)
    }
    return decodeRecords<T>(all, size)
  }

  barrier(): Promise<void> {
    if (this.p2p.size === 1) return SENT
    const s = this.barrierSteps.busy ? new BarrierStepper(this.p2p) : this.barrierSteps
    try {
      s.start(this.nextTag())
      return s.run() ?? SENT
    } catch (e) {
      return Promise.reject(e)
    }
  }

  private nextTag(): number {
    const tag = -1 - this.seq
    this.seq = (this.seq + 1) % 0x3fffffff
    return tag
  }

  private async sendAwaited(dest: number, tag: number, bytes: Uint8Array): Promise<void> {
    const p = this.p2p.send(dest, tag, bytes)
    if (p !== SENT) await p
  }

  private async recvBytes(src: number, tag: number): Promise<Uint8Array> {
    const m = await this.p2p.recv(src, tag)
    const copy = m.bytes.slice()
    m.release()
    return copy
  }
}

// A record: u32 length of what follows | u8 kind | payload.
const NUMBER = 1
const TYPED = 2
const JSON_TEXT = 3
const DTYPE_NAMES = Object.keys(DTYPES) as DType[]

/** One light value as bytes: numbers and typed arrays directly, the rest through superjson. */
function encodeRecord(v: unknown): Uint8Array {
  if (typeof v === 'number') {
    const r = new Uint8Array(13)
    const view = new DataView(r.buffer)
    view.setUint32(0, 9, true)
    r[4] = NUMBER
    view.setFloat64(5, v, true)
    return r
  }
  if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
    const code = DTYPE_NAMES.findIndex((d) => v instanceof DTYPES[d])
    if (code >= 0) {
      const r = new Uint8Array(6 + v.byteLength)
      new DataView(r.buffer).setUint32(0, 2 + v.byteLength, true)
      r[4] = TYPED
      r[5] = code
      r.set(new Uint8Array(v.buffer, v.byteOffset, v.byteLength), 6)
      return r
    }
  }
  const text = encoder.encode(SuperJSON.stringify(v))
  const r = new Uint8Array(5 + text.byteLength)
  new DataView(r.buffer).setUint32(0, 1 + text.byteLength, true)
  r[4] = JSON_TEXT
  r.set(text, 5)
  return r
}

function decodeRecords<T>(all: Uint8Array, count: number): T[] {
  const view = new DataView(all.buffer, all.byteOffset, all.byteLength)
  const out: T[] = []
  let pos = 0
  for (let i = 0; i < count; i++) {
    const len = view.getUint32(pos, true)
    const kind = all[pos + 4]
    const body = pos + 5
    if (kind === NUMBER) out.push(view.getFloat64(body, true) as T)
    else if (kind === TYPED) {
      const Ctor = DTYPES[DTYPE_NAMES[all[body]]]
      const bytes = all.slice(body + 1, pos + 4 + len)
      out.push(new Ctor(bytes.buffer, 0, bytes.byteLength / Ctor.BYTES_PER_ELEMENT) as T)
    } else out.push(SuperJSON.parse<T>(decoder.decode(all.subarray(body, pos + 4 + len))))
    pos += 4 + len
  }
  return out
}


/**
 * A transport provides point-to-point messages; this base adds the
 * collectives every communicator shares.
 *
 * ```ts
 * class MyTransport extends PointToPointCommunicator { send(…) {…} recv(…) {…} close() {…} }
 * ```
 */
export abstract class PointToPointCommunicator implements Communicator {
  abstract readonly rank: number
  abstract readonly size: number
  abstract readonly allocator: BufferAllocator
  private readonly collectives = new Collectives(this)

  abstract send(dest: number, tag: number, bytes: Uint8Array): Promise<void>
  abstract recv(src: number, tag: number): Promise<Message>
  abstract close(): void

  allreduce(value: number, op: ReduceOp): Promise<number> {
    return this.collectives.allreduce(value, op)
  }

  allgather<T>(value: T): Promise<T[]> {
    return this.collectives.allgather(value)
  }

  barrier(): Promise<void> {
    return this.collectives.barrier()
  }
}
