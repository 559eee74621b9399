import type { Message } from '../../routing/communicator.js'

/**
 * A FIFO of items labelled with a tag, where an item can be taken out by tag
 * (the first with that tag): a ring of preallocated slots, so steady traffic
 * allocates nothing (no string keys, no array growth and shrinkage).
 */
class TagQueue<T> {
  private tags: number[] = [0, 0, 0, 0]
  private items: Array<T | undefined> = [undefined, undefined, undefined, undefined]
  private head = 0
  count = 0

  push(tag: number, item: T): void {
    if (this.count === this.items.length) this.grow()
    const k = (this.head + this.count) % this.items.length
    this.tags[k] = tag
    this.items[k] = item
    this.count++
  }

  /** Remove and return the first item with `tag`, or undefined. */
  take(tag: number): T | undefined {
    const cap = this.items.length
    for (let i = 0; i < this.count; i++) {
      let k = (this.head + i) % cap
      if (this.tags[k] !== tag) continue
      const item = this.items[k]
      if (i === 0) {
        this.items[k] = undefined
        this.head = (this.head + 1) % cap
      } else {
        // Close the gap: later items move up one slot, keeping their order.
        for (let j = i; j < this.count - 1; j++) {
          const next = (k + 1) % cap
          this.tags[k] = this.tags[next]
          this.items[k] = this.items[next]
          k = next
        }
        this.items[k] = undefined
      }
      this.count--
      return item
    }
    return undefined
  }

  /** Remove every item, calling `each(tag, item)` in order. */
  drain(each: (tag: number, item: T) => void): void {
    while (this.count > 0) {
      const k = this.head
      const item = this.items[k] as T
      this.items[k] = undefined
      this.head = (k + 1) % this.items.length
      this.count--
      each(this.tags[k], item)
    }
  }

  private grow(): void {
    const cap = this.items.length
    const tags = new Array<number>(cap * 2).fill(0)
    const items = new Array<T | undefined>(cap * 2).fill(undefined)
    for (let i = 0; i < this.count; i++) {
      tags[i] = this.tags[(this.head + i) % cap]
      items[i] = this.items[(this.head + i) % cap]
    }
    this.tags = tags
    this.items = items
    this.head = 0
  }
}

// `new Promise(capture)` hands out the resolving functions without a closure per receive.
let capturedResolve: ((m: Message) => void) | undefined
let capturedReject: ((e: Error) => void) | undefined
function capture(resolve: (m: Message) => void, reject: (e: Error) => void): void {
  capturedResolve = resolve
  capturedReject = reject
}

/** Receives posted before their message: how each will be settled, by tag. */
class Waiting {
  readonly resolvers = new TagQueue<(m: Message) => void>()
  readonly rejecters = new TagQueue<(e: Error) => void>()

  /** Reject every waiting receive with `error(tag)`. */
  rejectAll(error: (tag: number) => Error): void {
    this.resolvers.drain(() => {})
    this.rejecters.drain((tag, reject) => reject(error(tag)))
  }
}

/** What one source's receives and messages wait in. */
class FromSource {
  readonly arrived = new TagQueue<Message>()
  /**
   * Created with the first receive that has to wait: ranks that run in step
   * (as `runLocal`'s, in one thread) find their message already here, and
   * with P ranks in one thread every byte of a rank's mailbox is paid P times
   * in cache.
   */
  waiting: Waiting | undefined = undefined
  /** Set when nothing more will come from this source. */
  gone: ((tag: number) => Error) | undefined = undefined
}

/**
 * Matches incoming messages with receives by (source, tag), keeping arrival
 * order. Messages that arrive before their receive is posted wait here;
 * `takeNow` finds them without a promise. A source can fail on its own (its
 * connection dropped): its pending and future receives fail while messages
 * that already arrived from it, and everything from other sources, are still
 * delivered. Memory grows with the sources a rank hears from, not with the
 * rank count (`runLocal` holds P mailboxes in one heap).
 *
 * ```ts
 * const box = new Mailbox()
 * box.deliver(src, tag, message)          // transport side
 * box.takeNow(src, tag) ?? await box.take(src, tag)   // receiving side
 * ```
 */
export class Mailbox {
  // Per source, created on first use: a rank talks to few of the P ranks.
  private readonly sources = new Map<number, FromSource>()
  private failure: Error | undefined

  private from(src: number): FromSource {
    let f = this.sources.get(src)
    if (f === undefined) this.sources.set(src, (f = new FromSource()))
    return f
  }

  deliver(src: number, tag: number, m: Message): void {
    const f = this.from(src)
    const w = f.waiting
    const resolve = w === undefined ? undefined : w.resolvers.take(tag)
    if (resolve) {
      w!.rejecters.take(tag)
      resolve(m)
      return
    }
    f.arrived.push(tag, m)
  }

  /** The message if it has arrived, without allocating. */
  takeNow(src: number, tag: number): Message | undefined {
    if (this.failure) return undefined
    const f = this.sources.get(src)
    return f === undefined ? undefined : f.arrived.take(tag)
  }

  take(src: number, tag: number): Promise<Message> {
    if (this.failure) return Promise.reject(this.failure)
    const f = this.from(src)
    const m = f.arrived.take(tag)
    if (m) return Promise.resolve(m)
    if (f.gone) return Promise.reject(f.gone(tag))
    const p = new Promise<Message>(capture)
    const w = (f.waiting ??= new Waiting())
    w.resolvers.push(tag, capturedResolve!)
    w.rejecters.push(tag, capturedReject!)
    capturedResolve = capturedReject = undefined
    return p
  }

  /** True when a receive from `src` is waiting for its message. */
  hasWaiters(src: number): boolean {
    const f = this.sources.get(src)
    return f !== undefined && f.waiting !== undefined && f.waiting.resolvers.count > 0
  }

  /** Nothing more will come from `src`: fail what waits for it, now and later. */
  failPeer(src: number, error: (tag: number) => Error): void {
    const f = this.from(src)
    f.gone = error
    f.waiting?.rejectAll(error)
  }

  /** Fail every pending and future receive (the communicator is closed). */
  fail(err: Error): void {
    this.failure = err
    for (const f of this.sources.values()) f.waiting?.rejectAll(() => err)
  }
}
