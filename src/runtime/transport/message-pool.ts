import type { Message } from '../../routing/communicator.js'

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
 * nothing once every size in use has been seen. The first size seen has its
 * list in fields (most traffic has one size: a halo, a collective's number),
 * the others in a map made when a second size appears: with P ranks in one
 * thread (`runLocal`) every rank's pool is cold by its next turn, and a field
 * costs fewer cache lines than a hash lookup.
 *
 * ```ts
 * const pool = new MessagePool()
 * const m = pool.take(bytes.byteLength); m.bytes.set(bytes); deliver(m)   // receiver calls m.release()
 * ```
 */
export class MessagePool {
  private firstSize = -1
  private firstFree: PooledMessage | undefined = undefined
  private bySize: Map<number, PooledMessage | undefined> | undefined = undefined

  take(byteLength: number): PooledMessage {
    if (this.firstSize < 0) this.firstSize = byteLength
    let m: PooledMessage | undefined
    if (byteLength === this.firstSize) {
      m = this.firstFree
      if (m) this.firstFree = m.next
    } else {
      m = this.bySize?.get(byteLength)
      if (m) this.bySize!.set(byteLength, m.next)
    }
    if (!m) return new PooledMessage(this, byteLength)
    m.next = undefined
    m.free = false
    return m
  }

  give(m: PooledMessage): void {
    const size = m.bytes.byteLength
    if (size === this.firstSize) {
      m.next = this.firstFree
      this.firstFree = m
      return
    }
    const others = (this.bySize ??= new Map())
    m.next = others.get(size)
    others.set(size, m)
  }
}
