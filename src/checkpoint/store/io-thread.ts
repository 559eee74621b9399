import { Worker } from 'node:worker_threads'
import { CheckpointError } from '../../errors.js'
import { compactRuns, copyRuns, type DeferredCopy, type UncompactedPayload } from './staging.js'

// Plain JavaScript on purpose: the thread needs only zlib's crc32 and fs, and
// loads in a few milliseconds without TypeScript or the rest of molotof.
// `write` follows writeDurably's crash rule (temporary name, renamed over the
// final one, a recycled file overwritten in place) without fsync: it serves
// the memory level, whose files live in RAM.
const SOURCE = `
const { parentPort } = require('node:worker_threads')
const { crc32 } = require('node:zlib')
const fs = require('node:fs')
// staging.ts's own function (its source: it uses nothing but its argument), so the thread runs the tested code.
const compactRuns = (${compactRuns.toString()})
const copyRuns = (${copyRuns.toString()})
function write(m) {
  const reused = (() => {
    if (m.reuse === undefined) return false
    try { fs.renameSync(m.reuse, m.tmp); return true } catch (e) { if (e.code === 'ENOENT') return false; throw e }
  })()
  const fd = fs.openSync(m.tmp, reused ? 'r+' : 'wx', 0o644)
  let position = 0
  try {
    for (let i = 0; i < m.parts.length; i += 1024) {
      const batch = m.parts.slice(i, i + 1024)
      for (const p of batch) {
        let done = 0
        while (done < p.byteLength) done += fs.writeSync(fd, p, done, p.byteLength - done, position + done)
        position += p.byteLength
      }
    }
    if (reused) fs.ftruncateSync(fd, position)
  } finally {
    fs.closeSync(fd)
  }
  fs.renameSync(m.tmp, m.path)
  return position
}
parentPort.on('message', (m) => {
  try {
    if (m.op === 'copy') {
      parentPort.postMessage({ id: m.id, value: m.copies.map((c) => copyRuns(c, crc32)) })
    } else if (m.op === 'compact') {
      for (const p of m.payloads) compactRuns(p)
      parentPort.postMessage({ id: m.id, value: m.payloads.length })
    } else if (m.op === 'sums') {
      const sums = m.entries.map((pieces) => {
        let c = 0
        for (const p of pieces) c = crc32(p, c)
        return c >>> 0
      })
      parentPort.postMessage({ id: m.id, value: sums })
    } else {
      parentPort.postMessage({ id: m.id, value: write(m) })
    }
  } catch (e) {
    try { fs.unlinkSync(m.tmp) } catch {} // never created, or already gone: prune deletes leftovers anyway
    parentPort.postMessage({ id: m.id, error: { message: e.message, code: e.code } })
  }
})
`

/**
 * A helper thread for the memory level: it copies domains in shared memory
 * to the staging buffers while the next superstep runs, computes the CRC32
 * of checkpoint payloads and writes rank files to RAM, so that the
 * checkpoint point copies at most the payloads that the next superstep may
 * change. CRC32 runs at about the speed of a memory copy (on the
 * rank's own thread it doubled the stall), and asynchronous file calls from a
 * rank's thread advance only when its compute yields (several hops, each up
 * to a superstep): here a whole file is one message there and one back.
 * Payloads must live in SharedArrayBuffers (see StagingBuffers `shared`):
 * they cross to the thread as views, not copies. The thread does not keep
 * the process alive.
 *
 * ```ts
 * const io = new CheckpointIoThread()
 * const sums = io.copy(staging.takeDeferred())    // domains' cells to staging, and their CRCs, during the next superstep
 * await io.compact(staging.takeUncompacted())    // hull copies moved together, off the checkpoint point
 * const [sum] = await io.sums([[stagedBytes]])   // one CRC per entry, over its pieces
 * await io.write('/dev/shm/molotof-1a2b/ckpt-00000007/rank-0.mlf', parts, '/dev/shm/molotof-1a2b/spare/rank-0.mlf')
 * ```
 */
export class CheckpointIoThread {
  private worker: Worker | undefined
  private nextId = 0
  private readonly waiting = new Map<number, { resolve: (v: never) => void; reject: (e: Error) => void }>()

  /**
   * Copies payloads out of their domains (see StagingBuffers.takeDeferred),
   * while the rank computes; resolves to each payload's CRC32, taken as it
   * was copied. The buffers must be shared.
   */
  copy(copies: readonly DeferredCopy[]): Promise<number[]> {
    return this.call<number[]>({ op: 'copy', copies })
  }

  /** Moves each payload's runs together (see StagingBuffers.takeUncompacted); the buffers must be shared. */
  compact(payloads: readonly UncompactedPayload[]): Promise<number> {
    return this.call<number>({ op: 'compact', payloads })
  }

  /** One CRC32 per entry, each over the entry's pieces in order. */
  sums(entries: readonly (readonly Uint8Array[])[]): Promise<number[]> {
    return this.call<number[]>({ op: 'sums', entries })
  }

  /**
   * Write `parts` to `path` through the temporary name `tmp` (same
   * directory), recycling `reuse` when present; resolves to the byte count.
   * Rejects with the file-system error (its `code` kept).
   */
  write(path: string, tmp: string, parts: readonly Uint8Array[], reuse?: string): Promise<number> {
    return this.call<number>({ op: 'write', path, tmp, parts, reuse })
  }

  async close(): Promise<void> {
    const w = this.worker
    this.worker = undefined
    if (w) await w.terminate()
  }

  private call<T>(message: Record<string, unknown>): Promise<T> {
    const w = this.start()
    const id = this.nextId++
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (v: never) => void, reject })
      w.postMessage({ ...message, id })
    })
  }

  private start(): Worker {
    if (this.worker) return this.worker
    const w = new Worker(SOURCE, { eval: true })
    w.unref()
    w.on('message', (m: { id: number; value?: never; error?: { message: string; code?: string } }) => {
      const waiter = this.waiting.get(m.id)
      this.waiting.delete(m.id)
      if (m.error) waiter?.reject(Object.assign(new Error(m.error.message), { code: m.error.code }))
      else waiter?.resolve(m.value as never)
    })
    const fail = (why: string) => {
      this.worker = undefined
      for (const { reject } of this.waiting.values()) reject(new CheckpointError(`the checkpoint I/O thread ${why}`))
      this.waiting.clear()
    }
    w.on('error', (e) => fail(`failed: ${e.message}`))
    w.on('exit', (code) => fail(`exited (code ${code})`))
    this.worker = w
    return w
  }
}
