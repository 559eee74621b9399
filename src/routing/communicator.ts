import type { BufferAllocator } from '../domains/dtype.js'

/** A message received from a peer. Call `release()` once its bytes are consumed. */
export interface Message {
  readonly bytes: Uint8Array
  /** Tell the sender it may reuse the memory the bytes live in. */
  release(): void
}

/** How `allreduce` combines the ranks' numbers. */
export type ReduceOp = 'sum' | 'max' | 'min'

/**
 * What `send` returns when it copied the bytes: the caller may reuse its
 * memory at once. An already resolved promise, so awaiting it also works.
 *
 * ```ts
 * const p = comm.send(peer, tag, bytes)
 * if (p !== SENT) await p
 * ```
 */
export const SENT: Promise<void> = Promise.resolve()

/**
 * Point-to-point and small collective communication between the ranks of one
 * run. Implementations: threads (worker_threads, the default) and processes,
 * in src/runtime. Declared here, by the lowest layer that sends messages:
 * routing, skeletons and checkpoints only see this interface, so a new
 * transport plugs in without touching them.
 *
 * ```ts
 * const { comm } = ctx, tag = 7
 * if (comm.rank === 0) await comm.send(1, tag, new Uint8Array([1, 2, 3]))   // resolves when the bytes may be modified again
 * if (comm.rank === 1) { const m = await comm.recv(0, tag); console.log(m.bytes); m.release() }
 * const total = await comm.allreduce(comm.rank, 'sum')
 * ```
 *
 * Messages between one pair of ranks with one tag arrive in the order sent.
 */
export interface Communicator {
  readonly rank: number
  readonly size: number
  /**
   * Memory for buffers that cross ranks cheaply on this transport (the skeleton gives it to its domains).
   * @internal runtime plumbing, not used by programs
   */
  readonly allocator: BufferAllocator
  /**
   * Post `bytes` to `dest`. The returned promise resolves when the sender may
   * modify the memory behind `bytes` again; transports that copy return
   * `SENT`, which callers compare with instead of awaiting (an await costs a
   * few hundred bytes of garbage).
   */
  send(dest: number, tag: number, bytes: Uint8Array): Promise<void>
  /** The next message from `src` with `tag`; release it once read. */
  recv(src: number, tag: number): Promise<Message>
  /**
   * The message from `src` with `tag` if it is already here (a transport may
   * also wait briefly for it), else undefined: the allocation-free path of a
   * superstep, which falls back to `recv` only when the message is late.
   * Optional; a transport that cannot answer synchronously leaves it out.
   */
  recvNow?(src: number, tag: number): Message | undefined
  /** Reduce one number over all ranks; every rank gets the result. */
  allreduce(value: number, op: ReduceOp): Promise<number>
  /** Every rank's value, in rank order, on every rank (small light values). */
  allgather<T>(value: T): Promise<T[]>
  /** Resolves once every rank has called it. */
  barrier(): Promise<void>
  /** Ends this rank's communication (the runtime calls it when a rank finishes). */
  close(): void
}
