import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { CountedKernel, defineProgram, Domain2D, DomainDesc, option, type FaultToleranceConfig } from '../../../src/index.js'
import { BackgroundWork } from '../../../src/checkpoint/coordination/background.js'
import type { CheckpointAt, CheckpointControl, CheckpointFaults } from '../../../src/checkpoint/control.js'
import { frozenConfig } from '../../../src/checkpoint/config.js'
import { parseOptions } from '../../../src/skeletons/options.js'
import type { Program } from '../../../src/skeletons/program.js'
import { localGroup } from '../../../src/runtime/launch/local.js'
import { runSession } from '../../../src/runtime/rank/rank-session.js'
import { createStatusBuffer, RankStatus } from '../../../src/runtime/status.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
const freshDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'molotof-background-'))
  dirs.push(d)
  return d
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('BackgroundWork', () => {
  it('settles once every tracked promise has, rejected ones and ones tracked while waiting included', async () => {
    const work = new BackgroundWork()
    const ended: string[] = []
    work.track(sleep(30).then(() => ended.push('slow')))
    work.track(Promise.reject(new Error('a failed write')))
    work.track(
      sleep(10).then(() => {
        ended.push('fast')
        // Work started by tracked work (a marker after a write) is waited for too.
        work.track(sleep(40).then(() => ended.push('late')))
      }),
    )
    expect(work.idle).toBe(false)
    await work.settled()
    expect(ended.sort()).toEqual(['fast', 'late', 'slow'])
    expect(work.idle).toBe(true)
    await work.settled() // nothing left: resolves at once
  })
})

/** Rows 1..8 of a 2-rank strip, 32 columns: a halo exchange every superstep (a wait for the peer). */
class Strip extends Domain2D {
  possessed(rank: number): DomainDesc<2> {
    return DomainDesc.of([1 + 4 * rank, 1], [5 + 4 * rank, 33])
  }
  needed(rank: number): DomainDesc<2> {
    return DomainDesc.of([4 * rank, 0], [6 + 4 * rank, 34])
  }
}

const nap = new Int32Array(new SharedArrayBuffer(4))

class Sweeps extends CountedKernel<Strip> {
  calculate(read: Strip, write: Strip): void {
    // 10 ms a superstep: a write started at step 4 is still going during the next supersteps' halo waits.
    Atomics.wait(nap, 0, 0, 10)
    const b = write.possessedBox
    for (let i = b.lower[0]; i < b.upper[0]; i++) for (let j = 1; j < 33; j++) write.put(i, j, 0.5 * (read.at(i - 1, j) + read.at(i + 1, j)) + 1)
  }
}

const program = defineProgram({
  name: 'background-probe',
  options: { steps: option.int(100_000, 'supersteps', { min: 1 }) },
  async main(ctx): Promise<number> {
    await ctx.skeleton(new Sweeps(ctx.options.steps), [new Strip(), new Strip()]).run()
    return 0
  },
}) as unknown as Program

describe('a run stopped from outside (a kept survivor)', () => {
  it('returns only once its memory checkpoint write in flight has ended: no file of it appears afterwards', async () => {
    const memoryDir = join(freshDir(), 'memory')
    const ft: FaultToleranceConfig = frozenConfig({ dir: freshDir(), policy: { every: 1_000_000 }, memory: { policy: { every: 5 }, dir: memoryDir }, keep: 2, resume: false })
    const comms = localGroup(2)
    let writeLandsAt = Infinity
    let stopRequested = false
    const controls: CheckpointControl[] = []
    const stop = () => {
      if (stopRequested) return
      stopRequested = true
      // As the launcher's abort does (rank-main.ts): mark the run stopped, then fail every wait for a peer.
      for (const c of controls) c.stopped = true
      for (const c of comms) c.close()
    }
    const faults = (rank: number): CheckpointFaults => ({
      tornWrite(at: CheckpointAt) {
        // Rank 1's first memory write is slow (300 ms before its file is written); the ranks are stopped as
        // soon as it has begun, and unwind at their next halo wait while it is still going.
        if (rank !== 1 || at.step !== 4 || stopRequested) return undefined
        queueMicrotask(stop)
        return sleep(300).then(() => {
          writeLandsAt = performance.now()
        }) as Promise<never>
      },
      checkpointPointDone: () => {},
      askedCheckpointPoint: () => undefined,
    })
    const status = createStatusBuffer(2)
    const runs = comms.map((comm, rank) => {
      const control: CheckpointControl = { preemptRequested: false, faults: faults(rank) }
      controls.push(control)
      return runSession({ program, comm, status: new RankStatus(status, rank), options: parseOptions(program.options, []), ft, control, log: () => {} }).then(
        () => ({ rank, endedAt: performance.now(), error: undefined }),
        (e: Error) => ({ rank, endedAt: performance.now(), error: e }),
      )
    })
    const ended = await Promise.all(runs)
    for (const e of ended) expect(e.error?.message, `rank ${e.rank} was stopped`).toMatch(/closed/)
    // Rank 1 returned after its write, not 250 ms before it.
    expect(ended[1].endedAt).toBeGreaterThanOrEqual(writeLandsAt)
    // Nothing of the write is left to land later: its file is sealed (renamed to its final name), and no body
    // waits under a temporary name. A state at return, not a wait for files that should not come.
    const listing = readdirSync(memoryDir, { recursive: true }).map(String).sort()
    expect(listing.some((f) => f.endsWith('rank-1.mlf'))).toBe(true)
    expect(listing.filter((f) => f.endsWith('.tmp'))).toEqual([])
  }, 30_000)
})
