import { Worker } from 'node:worker_threads'
import { CheckpointError } from '../../errors.js'
import { compactRuns, copyRuns, type DeferredCopy, type UncompactedPayload } from './staging.js'

// How long a staged job waits at most for `release` (a rank that never calls it only delays its checkpoint).
const GATE_MS = 100

// Plain JavaScript on purpose: the thread needs only zlib's crc32 and fs, and
// loads in a few milliseconds without TypeScript or the rest of molotof.
// `stage` writes the body of a rank file under a temporary name (a recycled
// file overwritten in place) and `seal` writes its header and renames it over
// the final name: writeDurably's crash rule without fsync, for the memory
// level, whose files live in RAM.
const SOURCE = `
const { parentPort } = require('node:worker_threads')
const { crc32 } = require('node:zlib')
const fs = require('node:fs')
// staging.ts's own function (its source: it uses nothing but its argument), so the thread runs the tested code.
const compactRuns = (${compactRuns.toString()})
const copyRuns = (${copyRuns.toString()})
function writeAll(fd, p, position) {
  let done = 0
  while (done < p.byteLength) done += fs.writeSync(fd, p, done, p.byteLength - done, position + done)
}
function writeBody(b) {
  const reused = (() => {
    if (b.reuse === undefined) return false
    try { fs.renameSync(b.reuse, b.tmp); return true } catch (e) { if (e.code === 'ENOENT') return false; throw e }
  })()
  const fd = fs.openSync(b.tmp, reused ? 'r+' : 'wx', 0o644)
  let position = b.at
  try {
    for (const p of b.parts) {
      writeAll(fd, p, position)
      position += p.byteLength
    }
    if (reused) fs.ftruncateSync(fd, position)
  } finally {
    fs.closeSync(fd)
  }
  return position
}
function stage(m) {
  // Start once the rank has left its checkpoint point (release), or after GATE_MS at the latest.
  Atomics.wait(m.gate, 0, 0, ${GATE_MS})
  Atomics.store(m.gate, 0, 0)
  for (const c of m.copies) copyRuns(c)
  // The domains are free again: the owner may write them while the rest goes on.
  parentPort.postMessage({ id: m.id, copied: true })
  const copied = m.copies.map((c) => crc32(c.to) >>> 0)
  for (const p of m.uncompacted) compactRuns(p)
  const sums = m.sums.map((pieces) => {
    let c = 0
    // Empty pieces skipped: Node's crc32 of a view of an empty SharedArrayBuffer is 0, whatever the running value.
    for (const p of pieces) if (p.byteLength > 0) c = crc32(p, c)
    return c >>> 0
  })
  return { copied, sums, bytes: m.body ? writeBody(m.body) : 0 }
}
function seal(m) {
  const fd = fs.openSync(m.tmp, 'r+')
  try {
    writeAll(fd, m.header, 0)
  } finally {
    fs.closeSync(fd)
  }
  fs.renameSync(m.tmp, m.path)
  return m.header.byteLength
}
parentPort.on('message', (m) => {
  try {
    parentPort.postMessage({ id: m.id, value: m.op === 'stage' ? stage(m) : seal(m) })
  } catch (e) {
    const tmp = m.op === 'stage' ? m.body && m.body.tmp : m.tmp
    try { if (tmp) fs.unlinkSync(tmp) } catch {} // never created, or already gone: prune deletes leftovers anyway
    parentPort.postMessage({ id: m.id, error: { message: e.message, code: e.code } })
  }
})
`

/** What the checkpoint I/O thread does with one rank file of the memory level (see CheckpointIoThread.stage). */
export interface StageJob {
  /** Payloads to copy out of their domains first (StagingBuffers.takeDeferred). */
  readonly copies: readonly DeferredCopy[]
  /** Hull copies whose runs to move together (StagingBuffers.takeUncompacted). */
  readonly uncompacted: readonly UncompactedPayload[]
  /** Payloads to checksum once the above are done, each as its pieces in order. */
  readonly sums: readonly (readonly Uint8Array[])[]
  /**
   * The file's body: `parts` written from byte `at` of `tmp` (recycling
   * `reuse` when present), the first `at` bytes left for the header (see
   * `seal`). Omitted: nothing is written.
   */
  readonly body?: { readonly tmp: string; readonly reuse?: string; readonly at: number; readonly parts: readonly Uint8Array[] }
}

/** What `stage` found: one CRC32 per copy and per summed payload, and the file's length. */
export interface Staged {
  readonly copied: number[]
  readonly sums: number[]
  readonly bytes: number
}

/**
 * A helper thread for the memory level. At a checkpoint it copies domains in
 * shared memory to the staging buffers while the next superstep runs, moves
 * hull copies together, computes the CRC32 of the payloads and writes the
 * rank file's body to RAM, all in one go (`stage`); the rank then makes the
 * header from the checksums and the thread writes it and renames the file
 * (`seal`). The job starts when the rank calls `release`, as it leaves its
 * checkpoint point: started at once, the thread took a core from ranks still
 * in their points (two ranks and their threads on two cores; with the
 * release the stall's upper quartile went from 4.5 to 3.2 ms and from 4.2 to
 * 1.8 ms in two side-by-side runs). One message for the whole body matters: a reply handled by the
 * rank waits until its compute yields (up to a superstep), and a write that
 * followed the copy only after such a hop started at a different moment on
 * each rank, while a rank its thread slows down makes the other wait at its
 * next halo. CRC32
 * runs at about the speed of a memory copy (on the rank's own thread it
 * doubled the stall). Payloads must live in SharedArrayBuffers (see
 * StagingBuffers `shared`): they cross to the thread as views, not copies.
 * The thread does not keep the process alive.
 *
 * ```ts
 * const io = new CheckpointIoThread()
 * const { copied, done } = io.stage({ copies: staging.takeDeferred(), uncompacted: staging.takeUncompacted(), sums: [], body: { tmp, at: header.byteLength, parts: body } })
 * domain.lend(copied, (ms) => (stall += ms))    // the next superstep runs; the domain is read until `copied`
 * io.release()                                  // the checkpoint point is over: the thread starts
 * const { copied: crcs, bytes } = await done
 * await io.seal(tmp, '/dev/shm/molotof-1a2b/ckpt-00000007/rank-0.mlf', headerWith(crcs))
 * ```
 */
export class CheckpointIoThread {
  private worker: Worker | undefined
  private nextId = 0
  private readonly waiting = new Map<number, Waiter>()
  /** 1 once the rank has released the staged job (see `release`); the thread sets it back to 0. */
  private readonly gate = new Int32Array(new SharedArrayBuffer(4))

  /**
   * Copy, compact, checksum and write the body of `job`, in that order,
   * once the rank calls `release` (or GATE_MS later).
   * `copied` resolves once the domains have been read (their owner may write
   * them again), `done` with the checksums and the body's end; both reject
   * with the file-system error (its `code` kept) or when the thread fails.
   * The buffers must be shared.
   */
  stage(job: StageJob): { copied: Promise<void>; done: Promise<Staged> } {
    let copied!: Waiter['copied']
    const copiedPromise = new Promise<void>((resolve, reject) => (copied = { resolve, reject }))
    // A failure before the copies also rejects `copied`: mark it handled here, its holder sees it through `done`.
    copiedPromise.catch(() => undefined)
    const done = this.call<Staged>({ op: 'stage', ...job, gate: this.gate }, copied)
    return { copied: copiedPromise, done }
  }

  /** Let the staged job start: the rank has left its checkpoint point. A release ahead of the job lets it start at once. */
  release(): void {
    Atomics.store(this.gate, 0, 1)
    Atomics.notify(this.gate, 0)
  }

  /** Write `header` at the start of `tmp` and rename it to `path` (the end of a file `stage` wrote). */
  seal(tmp: string, path: string, header: Uint8Array): Promise<number> {
    return this.call<number>({ op: 'seal', tmp, path, header })
  }

  async close(): Promise<void> {
    const w = this.worker
    this.worker = undefined
    if (w) await w.terminate()
  }

  private call<T>(message: Record<string, unknown>, copied?: Waiter['copied']): Promise<T> {
    const w = this.start()
    const id = this.nextId++
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (v: never) => void, reject, copied })
      w.postMessage({ ...message, id })
    })
  }

  private start(): Worker {
    if (this.worker) return this.worker
    const w = new Worker(SOURCE, { eval: true })
    w.unref()
    w.on('message', (m: { id: number; copied?: true; value?: never; error?: { message: string; code?: string } }) => {
      const waiter = this.waiting.get(m.id)
      if (m.copied) {
        waiter?.copied?.resolve()
        return
      }
      this.waiting.delete(m.id)
      if (m.error) waiter?.reject(Object.assign(new Error(m.error.message), { code: m.error.code }))
      else waiter?.resolve(m.value as never)
      waiter?.copied?.reject(new CheckpointError('the checkpoint I/O thread stopped before its copy was done'))
    })
    const fail = (why: string) => {
      this.worker = undefined
      for (const { reject, copied } of this.waiting.values()) {
        const e = new CheckpointError(`the checkpoint I/O thread ${why}`)
        reject(e)
        copied?.reject(e)
      }
      this.waiting.clear()
    }
    w.on('error', (e) => fail(`failed: ${e.message}`))
    w.on('exit', (code) => fail(`exited (code ${code})`))
    this.worker = w
    return w
  }
}

interface Waiter {
  resolve: (v: never) => void
  reject: (e: Error) => void
  /** `stage` only: settled once the copies are done. */
  copied?: { resolve: () => void; reject: (e: Error) => void }
}
