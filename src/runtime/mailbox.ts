import type { Message } from '../routing/communicator.js'

/**
 * Matches incoming messages with pending receives by (source, tag), keeping
 * arrival order. Messages that arrive before their receive is posted wait here.
 */
export class Mailbox {
  private readonly arrived = new Map<string, Message[]>()
  private readonly waiting = new Map<string, Array<(m: Message) => void>>()
  private failure: Error | undefined

  deliver(src: number, tag: number, m: Message): void {
    const key = `${src}:${tag}`
    const w = this.waiting.get(key)
    if (w && w.length > 0) {
      const resolve = w.shift()!
      if (w.length === 0) this.waiting.delete(key)
      resolve(m)
      return
    }
    const q = this.arrived.get(key)
    if (q) q.push(m)
    else this.arrived.set(key, [m])
  }

  take(src: number, tag: number): Promise<Message> {
    if (this.failure) return Promise.reject(this.failure)
    const key = `${src}:${tag}`
    const q = this.arrived.get(key)
    if (q && q.length > 0) {
      const m = q.shift()!
      if (q.length === 0) this.arrived.delete(key)
      return Promise.resolve(m)
    }
    return new Promise<Message>((resolve, reject) => {
      const w = this.waiting.get(key)
      const entry = resolve
      ;(entry as unknown as { reject: (e: Error) => void }).reject = reject
      if (w) w.push(entry)
      else this.waiting.set(key, [entry])
    })
  }

  /** Fail every pending and future receive (the run is being torn down). */
  fail(err: Error): void {
    this.failure = err
    for (const list of this.waiting.values()) {
      for (const r of list) (r as unknown as { reject: (e: Error) => void }).reject(err)
    }
    this.waiting.clear()
  }
}
