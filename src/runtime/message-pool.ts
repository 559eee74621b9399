import type { Message } from '../routing/communicator.js'

/**
 * A received message whose bytes live in a reusable buffer: `release`
 * returns it to its pool for the next message of the same size, so a steady
 * exchange allocates nothing.
 */
export class PooledMessage implements Message {
  readonly bytes: Uint8Array
  /** The same memory as 32-bit words (copies move words, never doubles: NaN bit patterns survive). */
  readonly words: Int32Array
  /** Next free message of the same size in the pool. */
  next: PooledMessage | undefined
  free = false

  constructor(
    private readonly pool: MessagePool,
    byteLength: number,
  ) {
    const buffer = new ArrayBuffer((byteLength + 3) & ~3)
    this.bytes = new Uint8Array(buffer, 0, byteLength)
    this.words = new Int32Array(buffer)
  }

  release(): void {
    if (this.free) return
    this.free = true
    this.pool.give(this)
  }
}

/**
 * Free messages by size: a free list per size, so taking and giving allocate
 * nothing once every size in use has been seen.
 *
 * ```ts
 * const pool = new MessagePool()
 * const m = pool.take(bytes.byteLength); m.bytes.set(bytes); deliver(m)   // receiver calls m.release()
 * ```
 */
export class MessagePool {
  private readonly bySize = new Map<number, PooledMessage | undefined>()

  take(byteLength: number): PooledMessage {
    const m = this.bySize.get(byteLength)
    if (!m) return new PooledMessage(this, byteLength)
    this.bySize.set(byteLength, m.next)
    m.next = undefined
    m.free = false
    return m
  }

  give(m: PooledMessage): void {
    m.next = this.bySize.get(m.bytes.byteLength)
    this.bySize.set(m.bytes.byteLength, m)
  }
}
