import SuperJSON from 'superjson'
import type { BufferAllocator } from '../domains/dtype.js'
import type { Communicator, Message, ReduceOp } from '../routing/communicator.js'

/** The point-to-point part a transport provides; collectives are built on it. */
export interface PointToPoint {
  readonly rank: number
  readonly size: number
  send(dest: number, tag: number, bytes: Uint8Array): Promise<void>
  recv(src: number, tag: number): Promise<Message>
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/**
 * Gather-to-root-then-broadcast collectives over point-to-point messages, for
 * small light values (settings, votes, checkpoint lists). Tags are negative so
 * they never meet routing traffic; a counter keeps successive collectives apart.
 */
export class Collectives {
  private seq = 0
  constructor(private readonly p2p: PointToPoint) {}

  async allgather<T>(value: T): Promise<T[]> {
    const { rank, size } = this.p2p
    const tag = -1 - (this.seq++ % 0x3fffffff)
    if (size === 1) return [value]
    if (rank === 0) {
      const all: T[] = [value]
      for (let src = 1; src < size; src++) all.push(decode<T>(await this.p2p.recv(src, tag)))
      const bytes = encode(all)
      await Promise.all([...Array(size - 1).keys()].map((i) => this.p2p.send(i + 1, tag, bytes)))
      return all
    }
    await this.p2p.send(0, tag, encode(value))
    return decode<T[]>(await this.p2p.recv(0, tag))
  }

  async allreduce(value: number, op: ReduceOp): Promise<number> {
    if (this.p2p.size === 1) return value
    const all = await this.allgather(value)
    // Reduce in rank order on every rank, so the result is the same everywhere.
    let acc = all[0]
    for (let i = 1; i < all.length; i++) {
      acc = op === 'sum' ? acc + all[i] : op === 'max' ? Math.max(acc, all[i]) : Math.min(acc, all[i])
    }
    return acc
  }

  async barrier(): Promise<void> {
    await this.allgather(0)
  }
}

function encode(v: unknown): Uint8Array {
  return encoder.encode(SuperJSON.stringify(v))
}

function decode<T>(m: Message): T {
  const v = SuperJSON.parse<T>(decoder.decode(m.bytes))
  m.release()
  return v
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
