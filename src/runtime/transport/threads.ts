import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads'
import { sharedAllocator } from '../../domains/dtype.js'
import { CommunicationError, ConfigError } from '../../errors.js'
import { PointToPointCommunicator } from './collectives.js'
import { SENT, type Message } from '../../routing/communicator.js'
import { Mailbox } from './mailbox.js'
import { MessagePool } from './message-pool.js'

/**
 * The shared words of one direction a → b of a channel, created by the
 * launcher (one small SharedArrayBuffer per ordered pair of ranks).
 */
const SENT_SEQ = 0 // messages a has posted to b, by ring or by port (b waits on this word)
const SLEEPING = 1 // 1 while b waits for a on its event loop: a must ring the bell (a port message)
export const CHANNEL_HEADER_BYTES = 16

/** This rank's two directions with one peer. */
export interface ChannelHeaders {
  out: SharedArrayBuffer
  in: SharedArrayBuffer
}

// A ring: Int32 [0] = bytes written, [1] = bytes read (both wrap as 32-bit
// counters); records from RING_DATA on, 8-byte aligned:
//   i32 kind | i32 byte length | i32 seq | i32 unused | f64 tag | payload (padded to 8)
const RING_CAPACITY = 256 * 1024
const RING_DATA = 64
const RECORD_HEADER = 24
const DATA = 0
const WRAP = 1
/** Larger messages go by port (a SharedArrayBuffer view crosses without a copy). */
const RING_MAX_MESSAGE = 64 * 1024

/** One direction's ring (the sender allocates it on its first message and sends it over the port). */
class Ring {
  readonly counters: Int32Array
  readonly i32: Int32Array
  readonly u8: Uint8Array
  readonly f64: Float64Array

  constructor(readonly sab: SharedArrayBuffer) {
    this.counters = new Int32Array(sab, 0, 2)
    this.i32 = new Int32Array(sab)
    this.u8 = new Uint8Array(sab)
    this.f64 = new Float64Array(sab)
  }

  /** Append one record if it fits; false when the ring is too full. */
  write(seq: number, tag: number, bytes: Uint8Array): boolean {
    const len = bytes.byteLength
    const size = RECORD_HEADER + ((len + 7) & ~7)
    let w = this.counters[0]
    const used = (w - Atomics.load(this.counters, 1)) | 0
    let off = w & (RING_CAPACITY - 1)
    const room = RING_CAPACITY - off
    if (used + (size <= room ? size : room + size) > RING_CAPACITY) return false
    if (size > room) {
      this.i32[(RING_DATA + off) >> 2] = WRAP
      w = (w + room) | 0
      off = 0
    }
    const at = RING_DATA + off
    this.i32[at >> 2] = DATA
    this.i32[(at >> 2) + 1] = len
    this.i32[(at >> 2) + 2] = seq
    this.f64[(at >> 3) + 2] = tag
    this.u8.set(bytes, at + RECORD_HEADER)
    Atomics.store(this.counters, 0, (w + size) | 0)
    return true
  }
}

/** Wire format on the port between two rank threads. */
type Wire =
  | { k: 'ring'; sab: SharedArrayBuffer }
  | { k: 'data'; seq: number; tag: number; id: number; bytes: Uint8Array }
  | { k: 'release'; id: number }
  | { k: 'bell' }

const BELL: Wire = { k: 'bell' }

export interface ThreadCommunicatorOptions {
  /**
   * How long `recvNow` may block the thread for a late message before the
   * superstep falls back to waiting on the event loop (ms, default 50).
   */
  blockMs?: number
}

/**
 * The threads transport. Each ordered pair of ranks has a ring in shared
 * memory for messages up to 64 KiB, and a MessagePort for larger ones (bytes
 * in a SharedArrayBuffer cross as a view: the receiver copies them straight
 * out of the sender's memory and then acknowledges, which resolves `send`)
 * and for wake-ups. A sequence number per pair keeps the two paths in send
 * order.
 *
 * A superstep's halos take the ring: the sender copies into it, the
 * receiver's `recvNow` spins briefly, then blocks on the shared counter
 * (`Atomics.wait`, woken by the sender's `Atomics.notify`), so a rank whose
 * neighbour is a little late neither allocates nor goes through the event
 * loop. Only a receive that waits longer (or an async `recv`, as collectives
 * use) asks the sender to ring a bell over the port.
 *
 * Never a transfer list: detaching an ArrayBuffer slows V8's typed-array
 * loops in that thread for the rest of its life.
 *
 * ```ts
 * const comm = new ThreadCommunicator(rank, size, ports, channels)
 * ```
 */
export class ThreadCommunicator extends PointToPointCommunicator {
  readonly allocator = sharedAllocator
  private readonly mailbox: Mailbox
  private readonly pool = new MessagePool()
  private readonly unreleased = new Map<number, () => void>()
  private nextId = 1
  private readonly outHeaders: Array<Int32Array | undefined>
  private readonly inHeaders: Array<Int32Array | undefined>
  private readonly outRings: Array<Ring | undefined>
  private readonly inRings: Array<Ring | undefined>
  private readonly sendSeq: Int32Array
  private readonly recvSeq: Int32Array
  /** Bytes read from each inbound ring (the ring's counter, kept locally too). */
  private readonly ringRead: Int32Array
  /** Port messages that arrived before their turn, by source. */
  private readonly early: Array<Array<Extract<Wire, { k: 'data' }>> | undefined>
  private readonly blockSlices: number
  private closed = false

  constructor(
    readonly rank: number,
    readonly size: number,
    private readonly ports: ReadonlyArray<MessagePort | undefined>,
    channels: ReadonlyArray<ChannelHeaders | undefined>,
    options: ThreadCommunicatorOptions = {},
  ) {
    super()
    this.mailbox = new Mailbox()
    this.outHeaders = channels.map((c) => (c ? new Int32Array(c.out) : undefined))
    this.inHeaders = channels.map((c) => (c ? new Int32Array(c.in) : undefined))
    this.outRings = new Array(size).fill(undefined)
    this.inRings = new Array(size).fill(undefined)
    this.sendSeq = new Int32Array(size)
    this.recvSeq = new Int32Array(size)
    this.ringRead = new Int32Array(size)
    this.early = new Array(size).fill(undefined)
    this.blockSlices = Math.max(0, Math.ceil(options.blockMs ?? 50))
    ports.forEach((port, peer) => {
      if (!port) return
      port.on('message', (w: Wire) => this.onWire(peer, w, true))
    })
  }

  send(dest: number, tag: number, bytes: Uint8Array): Promise<void> {
    if (dest === this.rank) {
      this.mailbox.deliver(dest, tag, { bytes: bytes.slice(), release: () => {} })
      return SENT
    }
    const port = this.port(dest)
    const header = this.outHeaders[dest]!
    const seq = this.sendSeq[dest]
    this.sendSeq[dest] = (seq + 1) | 0
    let result = SENT
    if (bytes.byteLength > RING_MAX_MESSAGE || !this.ringTo(dest, port).write(seq, tag, bytes)) {
      if (!(bytes.buffer instanceof SharedArrayBuffer)) {
        // A plain buffer would be cloned whole; send exactly these bytes.
        port.postMessage({ k: 'data', seq, tag, id: 0, bytes: bytes.slice() } satisfies Wire)
      } else {
        const id = this.nextId++
        result = this.released(id)
        port.postMessage({ k: 'data', seq, tag, id, bytes } satisfies Wire)
      }
    }
    Atomics.add(header, SENT_SEQ, 1)
    Atomics.notify(header, SENT_SEQ)
    if (Atomics.load(header, SLEEPING) === 1 && Atomics.compareExchange(header, SLEEPING, 1, 0) === 1) port.postMessage(BELL)
    return result
  }

  /**
   * Resolves when the peer acknowledges message `id`. A method of its own: a
   * closure over `this` inside `send` would make every call of `send`
   * allocate its context, even on the ring path.
   */
  private released(id: number): Promise<void> {
    return new Promise<void>((resolve) => this.unreleased.set(id, resolve))
  }

  recv(src: number, tag: number): Promise<Message> {
    for (;;) {
      const m = this.take(src, tag)
      if (m) return Promise.resolve(m)
      // Not here: ask for a bell (unless something came meanwhile, then look again).
      if (src === this.rank || this.closed || !this.arm(src)) return this.mailbox.take(src, tag)
    }
  }

  /** The message if it is here, else spin, then block on the shared counter for up to `blockMs`. */
  recvNow(src: number, tag: number): Message | undefined {
    let m = this.take(src, tag)
    if (m || src === this.rank || this.closed) return m
    const header = this.inHeaders[src]!
    for (let spin = 0; spin < 4000; spin++) {
      if (Atomics.load(header, SENT_SEQ) !== this.recvSeq[src]) {
        m = this.take(src, tag)
        if (m) return m
      }
    }
    for (let slice = 0; slice < this.blockSlices; slice++) {
      Atomics.wait(header, SENT_SEQ, this.recvSeq[src], 1)
      m = this.take(src, tag)
      if (m) return m
    }
    return undefined
  }

  close(): void {
    this.closed = true
    this.mailbox.fail(new CommunicationError(`rank ${this.rank}: communicator closed`))
    for (const p of this.ports) p?.close()
  }

  /** The message if it has arrived (pulling everything `src` has sent so far). */
  private take(src: number, tag: number): Message | undefined {
    const m = this.mailbox.takeNow(src, tag)
    if (m || src === this.rank) return m
    this.pull(src)
    // That pull may have taken a bell from the port (behind a message sent by port): the bell was meant for
    // another receive from `src` still waiting on the event loop, whose wake-up the sender has now spent.
    if (this.mailbox.hasWaiters(src)) this.rearm(src)
    return this.mailbox.takeNow(src, tag)
  }

  /** Ask `src` for a bell again while a receive from it waits (arm pulls what came meanwhile; look again then). */
  private rearm(src: number): void {
    while (this.mailbox.hasWaiters(src) && this.arm(src)) {
      // arm() pulled what came meanwhile; loop while that did not satisfy the waiters.
    }
  }

  /**
   * Ask `src` to ring the bell on its next message, then look once more
   * (a message sent between the last look and the request would otherwise
   * go unnoticed). True when something arrived meanwhile.
   */
  private arm(src: number): boolean {
    const header = this.inHeaders[src]!
    Atomics.store(header, SLEEPING, 1)
    if (Atomics.load(header, SENT_SEQ) === this.recvSeq[src]) return false
    Atomics.store(header, SLEEPING, 0)
    this.pull(src)
    return true
  }

  /** Deliver to the mailbox, in send order, every message `src` has sent so far. */
  private pull(src: number): void {
    const header = this.inHeaders[src]
    if (!header) return
    for (;;) {
      const next = this.recvSeq[src]
      if (this.takeEarly(src, next) || this.readRing(src, next)) {
        this.recvSeq[src] = (next + 1) | 0
        continue
      }
      if (Atomics.load(header, SENT_SEQ) === next) return
      // The next message went by port (or announces the ring): fetch port messages now.
      const got = receiveMessageOnPort(this.port(src))
      if (!got) return
      this.onWire(src, got.message as Wire, false)
    }
  }

  /** Deliver the ring's next record if it is message `seq`. */
  private readRing(src: number, seq: number): boolean {
    const ring = this.inRings[src]
    if (!ring) return false
    let r = this.ringRead[src]
    const w = Atomics.load(ring.counters, 0)
    if (r === w) return false
    let off = r & (RING_CAPACITY - 1)
    let at = RING_DATA + off
    if (ring.i32[at >> 2] === WRAP) {
      r = (r + RING_CAPACITY - off) | 0
      off = 0
      at = RING_DATA
    }
    if (ring.i32[(at >> 2) + 2] !== seq) return false
    const len = ring.i32[(at >> 2) + 1]
    const tagged = ring.f64[(at >> 3) + 2]
    // An integer tag as an int32 (a Smi: no boxed double per message).
    const tag = (tagged | 0) === tagged ? tagged | 0 : tagged
    const m = this.pool.take(len)
    // Word by word (never through doubles), then the tail bytes.
    const words = m.words
    const from = (at + RECORD_HEADER) >> 2
    const whole = len >> 2
    for (let k = 0; k < whole; k++) words[k] = ring.i32[from + k]
    for (let k = whole << 2; k < len; k++) m.bytes[k] = ring.u8[at + RECORD_HEADER + k]
    r = (r + RECORD_HEADER + ((len + 7) & ~7)) | 0
    this.ringRead[src] = r
    Atomics.store(ring.counters, 1, r)
    this.mailbox.deliver(src, tag, m)
    return true
  }

  private takeEarly(src: number, seq: number): boolean {
    const list = this.early[src]
    if (!list || list.length === 0) return false
    // An indexed loop, not findIndex: a closure over `seq` would make every call (every pull) allocate its context.
    for (let i = 0; i < list.length; i++) {
      if (list[i].seq !== seq) continue
      this.deliverPortMessage(src, list.splice(i, 1)[0])
      return true
    }
    return false
  }

  /** Apart from takeEarly (called on every pull): its closure would make every call allocate a context. */
  private deliverPortMessage(src: number, w: Extract<Wire, { k: 'data' }>): void {
    const port = this.port(src)
    let released = w.id === 0
    this.mailbox.deliver(src, w.tag, {
      bytes: w.bytes,
      release: () => {
        if (released) return
        released = true
        port.postMessage({ k: 'release', id: w.id } satisfies Wire)
      },
    })
  }

  private onWire(peer: number, w: Wire, fromEventLoop: boolean): void {
    if (w.k === 'release') {
      const r = this.unreleased.get(w.id)
      this.unreleased.delete(w.id)
      r?.()
      return
    }
    if (w.k === 'ring') this.inRings[peer] = new Ring(w.sab)
    else if (w.k === 'data') (this.early[peer] ??= []).push(w)
    if (!fromEventLoop || this.closed) return
    this.pull(peer)
    // Still waiting for this peer: ask for the next bell.
    this.rearm(peer)
  }

  private ringTo(dest: number, port: MessagePort): Ring {
    let ring = this.outRings[dest]
    if (!ring) {
      ring = this.outRings[dest] = new Ring(new SharedArrayBuffer(RING_DATA + RING_CAPACITY))
      port.postMessage({ k: 'ring', sab: ring.sab } satisfies Wire)
    }
    return ring
  }

  private port(peer: number): MessagePort {
    const p = this.ports[peer]
    if (peer !== this.rank && !p) throw new ConfigError(`rank ${this.rank}: no channel to rank ${peer} (size ${this.size})`)
    return p as MessagePort
  }
}

/**
 * Channels of a group of `size` thread ranks: `ports[a][b]` is rank a's end
 * of the a–b MessageChannel and `headers[a][b]` its shared words with b.
 */
export function channelHeaders(size: number): Array<Array<ChannelHeaders | undefined>> {
  const out: Array<Array<ChannelHeaders | undefined>> = Array.from({ length: size }, () => new Array(size).fill(undefined))
  for (let a = 0; a < size; a++) {
    for (let b = a + 1; b < size; b++) {
      const ab = new SharedArrayBuffer(CHANNEL_HEADER_BYTES)
      const ba = new SharedArrayBuffer(CHANNEL_HEADER_BYTES)
      out[a][b] = { out: ab, in: ba }
      out[b][a] = { out: ba, in: ab }
    }
  }
  return out
}
