import type { MessagePort } from 'node:worker_threads'
import { sharedAllocator } from '../domains/dtype.js'
import { CommunicationError, ConfigError } from '../errors.js'
import { PointToPointCommunicator } from './collectives.js'
import type { Message } from '../routing/communicator.js'
import { Mailbox } from './mailbox.js'

/** Wire format between two rank threads. */
type Wire =
  | { k: 'data'; tag: number; id: number; bytes: Uint8Array }
  | { k: 'release'; id: number }

/**
 * The threads transport: one MessagePort per peer. Bytes that live in a
 * SharedArrayBuffer cross as a view (the receiver copies them straight out of
 * the sender's memory and then acknowledges, which resolves the sender's
 * `send`); other bytes are copied once into a fresh buffer. Never a transfer
 * list: detaching an ArrayBuffer slows V8's typed-array loops in that thread
 * for the rest of its life.
 */
export class ThreadCommunicator extends PointToPointCommunicator {
  readonly allocator = sharedAllocator
  private readonly mailbox = new Mailbox()
  private readonly unreleased = new Map<number, () => void>()
  private nextId = 1

  constructor(
    readonly rank: number,
    readonly size: number,
    private readonly ports: ReadonlyArray<MessagePort | undefined>,
  ) {
    super()
    ports.forEach((port, peer) => {
      if (!port) return
      port.on('message', (w: Wire) => this.onWire(peer, w))
    })
  }

  send(dest: number, tag: number, bytes: Uint8Array): Promise<void> {
    if (dest === this.rank) {
      this.mailbox.deliver(dest, tag, { bytes: bytes.slice(), release: () => {} })
      return Promise.resolve()
    }
    const port = this.port(dest)
    if (!(bytes.buffer instanceof SharedArrayBuffer)) {
      // A plain buffer would be cloned whole; send exactly these bytes.
      port.postMessage({ k: 'data', tag, id: 0, bytes: bytes.slice() } satisfies Wire)
      return Promise.resolve()
    }
    const id = this.nextId++
    return new Promise<void>((resolve) => {
      this.unreleased.set(id, resolve)
      port.postMessage({ k: 'data', tag, id, bytes } satisfies Wire)
    })
  }

  recv(src: number, tag: number): Promise<Message> {
    this.port(src)
    return this.mailbox.take(src, tag)
  }

  close(): void {
    this.mailbox.fail(new CommunicationError(`rank ${this.rank}: communicator closed`))
    for (const p of this.ports) p?.close()
  }

  private onWire(peer: number, w: Wire): void {
    if (w.k === 'release') {
      const r = this.unreleased.get(w.id)
      this.unreleased.delete(w.id)
      r?.()
      return
    }
    const port = this.port(peer)
    const id = w.id
    let released = id === 0
    this.mailbox.deliver(peer, w.tag, {
      bytes: w.bytes,
      release: () => {
        if (released) return
        released = true
        port.postMessage({ k: 'release', id } satisfies Wire)
      },
    })
  }

  private port(peer: number): MessagePort {
    const p = this.ports[peer]
    if (peer !== this.rank && !p) throw new ConfigError(`rank ${this.rank}: no channel to rank ${peer} (size ${this.size})`)
    return p as MessagePort
  }
}
