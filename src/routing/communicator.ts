import type { BufferAllocator } from '../domains/dtype.js'

/** A message received from a peer. Call `release()` once its bytes are consumed. */
export interface Message {
  readonly bytes: Uint8Array
  /** Tell the sender it may reuse the memory the bytes live in. */
  release(): void
}

export type ReduceOp = 'sum' | 'max' | 'min'

/**
 * Point-to-point and small collective communication between the ranks of one
 * run. Implementations: threads (worker_threads, the default) and processes,
 * in src/runtime. Declared here, by the lowest layer that sends messages:
 * routing, skeletons and checkpoints only see this interface, so a new
 * transport plugs in without touching them.
 *
 * ```ts
 * await comm.send(1, tag, bytes)          // resolves when `bytes` may be modified again
 * const m = await comm.recv(0, tag); use(m.bytes); m.release()
 * const total = await comm.allreduce(localSum, 'sum')
 * ```
 *
 * Messages between one pair of ranks with one tag arrive in the order sent.
 */
export interface Communicator {
  readonly rank: number
  readonly size: number
  /** Memory for buffers that cross ranks cheaply on this transport. */
  readonly allocator: BufferAllocator
  /**
   * Post `bytes` to `dest`. The returned promise resolves when the sender may
   * modify the memory behind `bytes` again (at once for transports that copy).
   */
  send(dest: number, tag: number, bytes: Uint8Array): Promise<void>
  recv(src: number, tag: number): Promise<Message>
  /** Reduce one number over all ranks; every rank gets the result. */
  allreduce(value: number, op: ReduceOp): Promise<number>
  /** Every rank's value, in rank order, on every rank (small light values). */
  allgather<T>(value: T): Promise<T[]>
  barrier(): Promise<void>
  close(): void
}
