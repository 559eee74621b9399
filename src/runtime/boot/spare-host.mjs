// The loop of a warm spare (see spares.ts), shared by its process and thread
// boot files: load the program once, then run it for every rank number the
// launcher gives, one at a time, in this same process or thread.
//
// Launcher → host:  { type: 'assign', init }   run the program as init.rank
//                   { type: 'preempt' | 'checkpoint' | 'abort' }   for the rank running now
//                   { type: 'warm', sizes }     touch buffers of these sizes while idle (warm-memory.ts)
// Host → launcher:  { type: 'host-ready' }      the program and the rank runtime are loaded
//                   { type: 'host-idle' }       the run ended (its result or error was sent first)
//                   and every message of the running rank (RankToLauncher).
import { freemem } from 'node:os'
import { codeOf, loadProgram } from './load-program.mjs'
import { sourceLocations } from './source-locations.mjs'

const RANK_ENTRY = Symbol.for('molotof.rank-entry')

/**
 * Buffers handed out once each, to an allocation of exactly their size
 * (WarmMemory in warm-memory.ts); `release` drops the rest. `zeroOnTake`:
 * the buffers hold old data, zeroed as they are handed out.
 *
 * @param {'touched' | 'last-run'} from
 * @param {SharedArrayBuffer[]} buffers
 * @param {boolean} zeroOnTake
 */
function handOut(from, buffers, zeroOnTake) {
  return {
    from,
    /** @param {number} n */
    take(n) {
      const i = buffers.findIndex((b) => b.byteLength === n)
      if (i < 0) return undefined
      const b = buffers.splice(i, 1)[0]
      if (zeroOnTake) new Uint8Array(b).fill(0)
      return b
    },
    release() {
      buffers.length = 0
    },
    get bytes() {
      return buffers.reduce((a, b) => a + b.byteLength, 0)
    },
  }
}

/**
 * A pool of buffers of `sizes` bytes, zeroed and with every page written
 * once, filled in the background one buffer per turn of the event loop until
 * `stop()` (a run starting takes the pool as it is; `filled` says when the
 * filling ended). Nothing is touched when the sizes exceed half the node's
 * free memory: a spare must not push the node into swapping.
 *
 * @param {number[]} sizes
 * @param {() => boolean} stop
 */
export function warmPool(sizes, stop = () => false) {
  const buffers = []
  const fill = async () => {
    if (sizes.reduce((a, b) => a + b, 0) > freemem() / 2) return
    for (const n of sizes) {
      if (stop()) return
      // Shared, as the rank's own large buffers are (RankAllocations in warm-memory.ts).
      const b = new SharedArrayBuffer(n)
      // A zero written to a page that was never written maps it: no fault left for the rank.
      new Uint8Array(b).fill(0)
      buffers.push(b)
      await new Promise((resolve) => setImmediate(resolve))
    }
  }
  return Object.assign(handOut('touched', buffers, false), { filled: fill() })
}

/**
 * Warm memory from the buffers the last run in this process left behind (a
 * kept survivor: RecycleBuffers in warm-memory.ts), each zeroed as it is
 * taken: a memset of mapped pages, several times cheaper than faulting fresh
 * ones in.
 *
 * @param {SharedArrayBuffer[]} buffers
 */
export function recycledPool(buffers) {
  return handOut('last-run', [...buffers], true)
}

/**
 * @param {{
 *   programFile: string, tsconfig?: string, compiled?: import('./load-program.mjs').Compiled, namespace: string,
 *   post(m: object): void,
 *   onMessage(handler: (m: any) => void): void,
 *   initFor(init: object, control: object): object,
 *   onRank?(rank: number): void,
 *   flushed?(): Promise<void>,
 * }} host
 */
export async function hostLoop(host) {
  const runs = []
  let wake = () => {}
  /** Handlers of the rank running now: a run's handlers go with it. */
  let current
  /** Messages for the rank that came before it listened (a preemption asked for at its start). */
  let early = []
  /** Memory touched ahead for the next run (a `warm` message while idle); `warming` ends an older filling. */
  let warm
  let warming = 0
  /** The large buffers the last run left (a survivor's), for the next run. */
  let recycled = []
  host.onMessage((m) => {
    if (m && m.type === 'warm') {
      // Only while idle: a running rank already has its memory.
      if (current || runs.length > 0) return
      const mine = ++warming
      warm?.release()
      warm = warmPool(m.sizes, () => mine !== warming || current !== undefined)
    } else if (m && m.type === 'assign') {
      runs.push(m.init)
      wake()
    } else if (current && current.length > 0) {
      for (const h of current) h(m)
    } else if (current) {
      early.push(m)
    } else if (runs.length > 0 && m && m.type === 'abort') {
      // Stopped before it started (still loading): drop the run, say so.
      runs.length = 0
      early = []
      host.post({ type: 'host-idle' })
    } else if (runs.length > 0) {
      early.push(m) // for the run about to start
    }
  })

  const loaded = await loadProgram({ programFile: host.programFile, tsconfig: host.tsconfig, compiled: host.compiled, namespace: host.namespace })
  if ('program' in loaded) {
    // Describing runs the entry, which loads the rank runtime (transports,
    // checkpoint coordinator): a rank started on this spare finds it loaded.
    const quiet = { postMessage() {}, onMessage() {} }
    await loaded.program[RANK_ENTRY]({ mode: 'describe', rank: 0, size: 1, argv: [], control: quiet })
  }
  host.post({ type: 'host-ready' })

  for (;;) {
    while (runs.length === 0) await new Promise((resolve) => (wake = resolve))
    const init = runs.shift()
    if ('error' in loaded) {
      host.post({ type: 'load-error', rank: init.rank, message: loaded.error })
    } else {
      const handlers = []
      current = handlers
      const control = {
        postMessage: (m) => host.post(m),
        onMessage: (h) => {
          handlers.push(h)
          for (const m of early.splice(0)) h(m)
        },
      }
      host.onRank?.(init.rank)
      try {
        // A spare's touched memory, or a survivor's buffers from its last run.
        const pool = warm ?? (recycled.length > 0 ? recycledPool(recycled) : undefined)
        warm = undefined
        recycled = []
        const recycle = (buffers) => (recycled = buffers)
        await loaded.program[RANK_ENTRY]({ ...host.initFor(init, control), code: codeOf(host.programFile, loaded), recycle, ...(pool ? { warm: pool } : {}) })
      } catch (e) {
        host.post({ type: 'load-error', rank: init.rank, message: `cannot run ${host.programFile}: ${e && e.stack ? sourceLocations(e.stack) : String(e)}` })
      }
      current = undefined
      early = []
      host.onRank?.(-1)
      await host.flushed?.()
    }
    host.post({ type: 'host-idle' })
  }
}
