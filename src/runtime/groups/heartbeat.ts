import type { RankWhere } from '../group.js'
import { HEARTBEAT_MAGIC, HEARTBEAT_RECORD_BYTES, PHASES } from '../boot/status-layout.mjs'

// One heartbeat record, as boot-heartbeat.mjs writes it (layout in boot/status-layout.mjs).
export { HEARTBEAT_MAGIC, HEARTBEAT_RECORD_BYTES }

/**
 * The launcher's view of one rank process's heartbeats: feed it the bytes read
 * from the heartbeat pipe; it keeps the last reported position and the time
 * the last record arrived.
 *
 * ```ts
 * const hb = new HeartbeatMonitor(performance.now())
 * pipe.on('data', (chunk) => hb.push(chunk))
 * hb.where; hb.lastAt
 * ```
 */
export class HeartbeatMonitor {
  /** performance.now() of the last record (the start time until the first one). */
  lastAt: number
  where: RankWhere = { skeleton: -1, step: -1, phase: 'start' }
  private seq = -1
  private readonly partial = Buffer.alloc(HEARTBEAT_RECORD_BYTES)
  private partialFill = 0

  constructor(startedAt: number) {
    this.lastAt = startedAt
  }

  push(chunk: Buffer): void {
    let pos = 0
    // Records are tiny and the pipe may split them anywhere: finish a split one first.
    if (this.partialFill > 0) {
      const n = Math.min(HEARTBEAT_RECORD_BYTES - this.partialFill, chunk.length)
      chunk.copy(this.partial, this.partialFill, 0, n)
      this.partialFill += n
      pos = n
      if (this.partialFill < HEARTBEAT_RECORD_BYTES) return
      this.partialFill = 0
      this.record(this.partial, 0)
    }
    for (; pos + HEARTBEAT_RECORD_BYTES <= chunk.length; pos += HEARTBEAT_RECORD_BYTES) this.record(chunk, pos)
    if (pos < chunk.length) {
      chunk.copy(this.partial, 0, pos)
      this.partialFill = chunk.length - pos
    }
  }

  private record(b: Buffer, at: number): void {
    if (b.readInt32LE(at) !== HEARTBEAT_MAGIC) return
    this.lastAt = performance.now()
    // The heartbeat thread and a dying main thread may both write: keep the newest.
    const seq = b.readInt32LE(at + 4)
    if (seq < this.seq) return
    this.seq = seq
    this.where = { skeleton: b.readInt32LE(at + 8), step: b.readInt32LE(at + 12), phase: PHASES[b.readInt32LE(at + 16)] ?? 'start' }
  }
}
