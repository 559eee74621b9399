import { Worker } from 'node:worker_threads'
import { CheckpointError } from '../../errors.js'
import { GATE } from './io-worker/gate.mjs'
import type { CompressedPayload, IoReply, IoRequest } from './io-worker/thread.mjs'
import type { DeferredCopy, UncompactedPayload } from './staging.js'

/*
 * The thread runs io-worker/thread.mjs, found by URL from this module: from
 * the sources, src/checkpoint/store/io-worker/; from the built package, where
 * this module is bundled into dist/, dist/io-worker/ (tsup.config.ts copies
 * the folder there). A compiled framework keeps this module's own URL
 * (compiled-program.ts).
 */
const WORKER_FILE = './io-worker/thread.mjs'

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
  /** Settles once the running thread has loaded (see `warm`); undefined while no thread runs. */
  private ready: Promise<void> | undefined
  /** Where a staged job waits for `release` (slots: io-worker/gate.mjs). */
  private readonly gate = new Int32Array(new SharedArrayBuffer(GATE.length * Int32Array.BYTES_PER_ELEMENT))

  /**
   * Copy, compact, checksum and write the body of `job`, in that order,
   * once the rank calls `release` (or GATE_MS later: see thread.mjs).
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
    const done = this.call<Staged>({ id: -1, op: 'stage', ...job, gate: this.gate }, copied)
    return { copied: copiedPromise, done }
  }

  /**
   * Start the thread ahead of its first job: resolves once it has loaded
   * (rejects when it fails to). Started by the first job instead, its
   * start-up (about 35 ms of the rank's own thread to create it, then the
   * module's load before the deferred copy can run) fell in the first
   * checkpoint's stall: 120 to 140 ms there against 2 to 9 ms at the later
   * ones on the 2-rank Jacobi 2048².
   */
  warm(): Promise<void> {
    this.start()
    return this.ready!
  }

  /** Let the staged job start: the rank has left its checkpoint point. A release ahead of the job lets it start at once. */
  release(): void {
    Atomics.store(this.gate, GATE.open, 1)
    Atomics.notify(this.gate, GATE.open)
  }

  /** How many staged jobs reached the gate, and how many left it on a `release` (not after GATE_MS): what a test waits for and checks. */
  get gateCounts(): { arrived: number; released: number } {
    return { arrived: Atomics.load(this.gate, GATE.arrived), released: Atomics.load(this.gate, GATE.released) }
  }

  /**
   * Compress each payload (shuffled by `width`-byte element, see
   * io-worker/payload-codec.mjs) on the thread: the stored bytes and their
   * CRC32, or null for a payload compression would not make smaller. Views
   * of a SharedArrayBuffer cross without a copy. Used by the disk level's
   * background flush, on a thread of its own (see CheckpointStore.flushRankFile).
   */
  compress(payloads: readonly { bytes: Uint8Array; width: number }[]): Promise<CompressedPayload[]> {
    return this.call<CompressedPayload[]>({ id: -1, op: 'compress', payloads })
  }

  /**
   * The block digests of each payload (io-worker/block-digests.mjs), for an
   * incremental flush: on the flush's thread, off the rank's own. Views of a
   * SharedArrayBuffer cross without a copy.
   */
  digest(payloads: readonly Uint8Array[], blockSize: number): Promise<Uint8Array[]> {
    return this.call<Uint8Array[]>({ id: -1, op: 'digest', payloads, blockSize })
  }

  /** Write `header` at the start of `tmp` and rename it to `path` (the end of a file `stage` wrote). */
  seal(tmp: string, path: string, header: Uint8Array): Promise<number> {
    return this.call<number>({ id: -1, op: 'seal', tmp, path, header })
  }

  async close(): Promise<void> {
    const w = this.worker
    this.worker = undefined
    this.ready = undefined
    if (w) await w.terminate()
  }

  /** Post `request` under the next id (its own `id` is overwritten). */
  private call<T>(request: IoRequest, copied?: Waiter['copied']): Promise<T> {
    const w = this.start()
    const id = this.nextId++
    request.id = id
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (v: never) => void, reject, copied })
      w.postMessage(request)
    })
  }

  private start(): Worker {
    if (this.worker) return this.worker
    const w = new Worker(new URL(WORKER_FILE, import.meta.url))
    w.unref()
    let loaded!: { resolve: () => void; reject: (e: Error) => void }
    this.ready = new Promise<void>((resolve, reject) => (loaded = { resolve, reject }))
    // Only `warm`'s caller looks at it; a failure reaches every job through `fail` as well.
    this.ready.catch(() => undefined)
    w.on('message', (m: IoReply) => {
      if (m.ready) {
        loaded.resolve()
        return
      }
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
      if (this.worker === w) this.ready = undefined
      this.worker = undefined
      loaded.reject(new CheckpointError(`the checkpoint I/O thread ${why}`))
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
