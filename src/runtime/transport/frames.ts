import type { Socket } from 'node:net'
import type { MessagePool, PooledMessage } from './message-pool.js'

// The wire format of the socket transports (Unix sockets and TCP), both
// directions: a 16-byte header then `length` payload bytes.
//   u32 length | u32 kind | f64 tag      (little-endian)
// HELLO opens a connection (tag = sender's rank; payload: u32 group size, and
// on TCP u32 generation; on TCP it follows the handshake on the run's secret,
// auth.ts), DATA carries one message, BYE says the sender closed
// its communicator. The Unix-socket transport (sockets.ts) and the TCP
// transport (tcp.ts) both use this code, through their common base
// (StreamCommunicator, stream-communicator.ts).
export const HEADER_BYTES = 16
export const HELLO = 1
export const DATA = 2
export const BYE = 3
/** Payloads up to this size are copied next to their header: one write instead of two. */
export const COALESCE_BYTES = 16 * 1024
export const MAX_PAYLOAD = 0xffffffff

/** Write one frame; `done` (if any) runs once the kernel has all of it (or on error). */
export function writeFrame(socket: Socket, kind: number, tag: number, payload: Uint8Array, done: ((err?: Error | null) => void) | undefined): void {
  const small = payload.byteLength <= COALESCE_BYTES
  const head = Buffer.allocUnsafe(small ? HEADER_BYTES + payload.byteLength : HEADER_BYTES)
  head.writeUInt32LE(payload.byteLength, 0)
  head.writeUInt32LE(kind, 4)
  head.writeDoubleLE(tag, 8)
  if (small) {
    head.set(payload, HEADER_BYTES)
    if (done) socket.write(head, done)
    else socket.write(head)
    return
  }
  // Large payloads go out straight from the caller's memory (SharedArrayBuffer
  // views included): no copy, which is why `send` waits for the callback.
  socket.cork()
  socket.write(head)
  socket.write(payload, done)
  socket.uncork()
}

/**
 * Cuts a byte stream into frames. Each byte is copied once, from the socket's
 * chunk into the payload's own buffer, however the frames straddle chunks.
 * `onFrame` returns false to stop reading (the socket is being dropped).
 */
export class FrameReader {
  private readonly header = Buffer.alloc(HEADER_BYTES)
  private headerFill = 0
  private kind = 0
  private tag = 0
  private payload: PooledMessage | undefined
  private payloadFill = 0
  private stopped = false

  constructor(
    private readonly pool: MessagePool,
    private readonly onFrame: (kind: number, tag: number, payload: PooledMessage) => boolean,
  ) {}

  push(chunk: Buffer): void {
    let pos = 0
    while (pos < chunk.length && !this.stopped) {
      if (!this.payload) {
        let h: Buffer
        let at: number
        if (this.headerFill === 0 && chunk.length - pos >= HEADER_BYTES) {
          h = chunk
          at = pos
          pos += HEADER_BYTES
        } else {
          const n = Math.min(HEADER_BYTES - this.headerFill, chunk.length - pos)
          chunk.copy(this.header, this.headerFill, pos, pos + n)
          pos += n
          this.headerFill += n
          if (this.headerFill < HEADER_BYTES) return
          this.headerFill = 0
          h = this.header
          at = 0
        }
        const length = h.readUInt32LE(at)
        this.kind = h.readUInt32LE(at + 4)
        this.tag = h.readDoubleLE(at + 8)
        this.payload = this.pool.take(length)
        this.payloadFill = 0
      }
      const target = this.payload.bytes
      const n = Math.min(target.length - this.payloadFill, chunk.length - pos)
      if (n > 0) {
        chunk.copy(target, this.payloadFill, pos, pos + n)
        pos += n
        this.payloadFill += n
      }
      if (this.payloadFill === target.length) {
        const p = this.payload
        this.payload = undefined
        if (!this.onFrame(this.kind, this.tag, p)) this.stopped = true
      }
    }
  }
}
