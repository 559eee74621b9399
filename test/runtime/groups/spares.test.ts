import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { JacobiResult } from '../../../examples/jacobi/jacobi.js'
import { interiorSum, jacobiSerial } from '../../../examples/jacobi/serial.js'
import type { SwingResult } from '../../../examples/swing/swing.js'
import { main } from '../../../src/cli/main.js'
import { runAttempt } from '../../../src/runtime/launch/attempt.js'
import type { RankGroup, Transport } from '../../../src/runtime/group.js'
import { groupSpec, launch } from '../../../src/runtime/launch/launcher.js'
import { SparePool } from '../../../src/runtime/groups/spares.js'
import { Supervisor, type SupervisorEvent } from '../../../src/runtime/launch/supervisor.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
const freshDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'molotof-spares-'))
  dirs.push(d)
  return d
}

const n = 40
const iterations = 60
const argv = ['--n', String(n), '--iterations', String(iterations)]
// The serial loop is the reference: a recovered run must give its bits.
const expected = interiorSum(jacobiSerial(n, iterations), n)
const JACOBI = 'examples/jacobi/jacobi.ts'

type Recovered = Extract<SupervisorEvent, { event: 'recovered' }>
const recoveries = (events: SupervisorEvent[]) => events.filter((e): e is Recovered => e.event === 'recovered')

function jacobi(transport: Transport, extra: Partial<ConstructorParameters<typeof Supervisor>[1]>, events: SupervisorEvent[]) {
  return new Supervisor<JacobiResult>(JACOBI, {
    ranks: 2,
    transport,
    argv,
    checkpoint: { dir: freshDir(), policy: { every: 10 }, keep: 2, resume: false },
    spares: 1,
    restarts: 3,
    onLog: () => {},
    onEvent: (e) => events.push(e),
    ...extra,
  })
}

describe.each(['processes', 'threads'] as const)('warm spares (%s)', (transport) => {
  it('replaces a killed rank by a spare, keeps the survivor, and starts a new spare', async () => {
    const spec = groupSpec(JACOBI, { ranks: 2, transport, argv, onLog: () => {} })
    const pool = new SparePool({ programFile: spec.programFile, tsconfig: spec.tsconfig, size: 2, transport, heartbeatMs: spec.heartbeatMs, spares: 1, keepSurvivors: true })
    try {
      let group: RankGroup | undefined
      // Attempt 0: a long run, killed from outside once it computes.
      const long = { ...spec, argv: ['--n', '64', '--iterations', '1000000'] }
      const first = runAttempt(pool.start, long, {
        hangTimeoutMs: 30_000,
        onStarted: (g) => (group = g),
        onProgress: () => group?.kill(1),
      })
      expect(pool.lastOrigin).toEqual({ kept: 0, spares: 0, spawned: 2 })
      const failed = await first
      expect(failed.kind).toBe('failed')
      if (failed.kind === 'failed') expect(failed.error.rank).toBe(1)
      // The spare was started in the background once the attempt computed.
      for (const until = Date.now() + 30_000; pool.available < 2 && Date.now() < until; ) await new Promise((r) => setTimeout(r, 20))
      expect(pool.available).toBe(2) // the survivor and the spare

      // Attempt 1 on the survivor (rank 0 kept) and the spare: the failure-free bits.
      const second = await runAttempt(pool.start, spec, { hangTimeoutMs: 30_000 })
      expect(pool.lastOrigin).toEqual({ kept: 1, spares: 1, spawned: 0 })
      expect(second.kind).toBe('done')
      if (second.kind === 'done') expect(Object.is((second.values[0] as JacobiResult).checksum, expected)).toBe(true)
      // And the pool refills: a new spare stands by beside the two hosts of the finished attempt.
      for (const until = Date.now() + 30_000; pool.available < 3 && Date.now() < until; ) await new Promise((r) => setTimeout(r, 20))
      expect(pool.available).toBe(3)
    } finally {
      await pool.close()
    }
  }, 90_000)

  it('recovers two failures in a row on spares, bit-identical', async () => {
    const events: SupervisorEvent[] = []
    const r = await jacobi(
      transport,
      {
        inject: [
          { rank: 1, skeleton: 0, step: 22, phase: 'calculate' },
          { rank: 0, skeleton: 0, step: 41, phase: 'route' },
        ],
      },
      events,
    ).run()
    expect(r.kind).toBe('done')
    if (r.kind !== 'done') return
    expect(Object.is(r.value.checksum, expected)).toBe(true)
    expect(r.failures.map((f) => [f.rank, f.step])).toEqual([
      [1, 22],
      [0, 41],
    ])
    const rec = recoveries(events)
    expect(rec).toHaveLength(2)
    // The first failure finds the spare started with the run; the survivor keeps its process.
    expect(rec[0].ranksFrom).toEqual({ kept: 1, spares: 1, spawned: 0 })
    for (const x of rec) expect(x.ranksFrom.kept).toBe(1)
    for (const x of rec) expect(x.failureToFirstStepMs).toBeGreaterThanOrEqual(x.stopMs + x.startMs + x.firstStepMs - 1e-6)
  }, 90_000)

  it('with the memory level: kills during a memory write and a flush, survivors kept, bit-identical', async () => {
    const events: SupervisorEvent[] = []
    const r = await jacobi(
      transport,
      {
        checkpoint: { dir: freshDir(), policy: { every: 10 }, memory: { policy: { every: 2 }, dir: join(freshDir(), 'memory') }, keep: 2, resume: false },
        inject: [
          // Step 21 writes to memory only: rank 1 dies while its memory file is written (rank 0's write may be in flight).
          { rank: 1, skeleton: 0, step: 21, phase: 'checkpoint' },
          // Step 29 is a disk step: rank 0 dies during its flush from memory, while rank 1's flush goes on.
          { rank: 0, skeleton: 0, step: 29, phase: 'checkpoint' },
        ],
      },
      events,
    ).run()
    expect(r.kind).toBe('done')
    if (r.kind !== 'done') return
    expect(Object.is(r.value.checksum, expected)).toBe(true)
    expect(r.failures.map((f) => [f.rank, f.step])).toEqual([
      [1, 21],
      [0, 29],
    ])
    // The survivor's background writes end before it says it is idle: it is kept, with one spare for the dead rank.
    const rec = recoveries(events)
    expect(rec.map((x) => x.ranksFrom.kept)).toEqual([1, 1])
  }, 90_000)

  it('recovers when a rank fails while the previous recovery is running', async () => {
    const events: SupervisorEvent[] = []
    let groups = 0
    const r = await jacobi(
      transport,
      {
        inject: [{ rank: 1, skeleton: 0, step: 22, phase: 'calculate' }],
        // The second attempt's rank 0 (the survivor, starting its recovery) is killed as soon as it is given its rank.
        onGroup: (g) => {
          if (++groups === 2) g.kill(0)
        },
      },
      events,
    ).run()
    expect(r.kind).toBe('done')
    if (r.kind !== 'done') return
    expect(Object.is(r.value.checksum, expected)).toBe(true)
    expect(r.restarts).toBe(2)
    expect(r.failures.map((f) => f.rank)).toEqual([1, 0])
  }, 90_000)
})

describe('warm spares: memory touched ahead', () => {
  it("a spare process touches the ranks' large buffers ahead, a survivor reuses its own; the result is exact", async () => {
    // 400000 float64 cells: each rank's two domains (200001 cells, 1.53 MiB) and its checkpoint read buffer are 1 MiB or more.
    // Both ranks spin 3 s at step 20, time for the spare to load and touch its memory; rank 1 dies at 22.
    const cells = 400_000
    const steps = 30
    const logs: Array<[number, string]> = []
    const events: SupervisorEvent[] = []
    const r = await new Supervisor<number>('test/fixtures/busy.ts', {
      ranks: 2,
      transport: 'processes',
      argv: ['--cells', String(cells), '--steps', String(steps), '--busy-step', '20', '--busy-ms', '3000'],
      checkpoint: { dir: freshDir(), policy: { every: 5 }, keep: 2, resume: false },
      inject: [{ rank: 1, skeleton: 0, step: 22, phase: 'calculate' }],
      spares: 1,
      onLog: (rank, text) => logs.push([rank, text]),
      onEvent: (e) => events.push(e),
    }).run()
    expect(r.kind).toBe('done')
    if (r.kind !== 'done') return
    // Every cell gains 1 per step.
    expect(r.value).toBe(cells * steps)
    expect(recoveries(events).map((e) => e.ranksFrom)).toEqual([{ kept: 1, spares: 1, spawned: 0 }])
    // The spare, now rank 1, took at least its two domains from the memory it touched ahead;
    // the survivor, rank 0, reused its last run's.
    const mib = (pattern: RegExp) => logs.flatMap(([rank, text]) => (pattern.test(text) ? [[rank, Number(pattern.exec(text)![1])]] : []))
    const touched = mib(/^warm spare: ([\d.]+) MiB of memory touched ahead/)
    expect(touched.map(([rank]) => rank)).toEqual([1])
    expect(touched[0][1]).toBeGreaterThanOrEqual(3)
    const reused = mib(/^kept process: ([\d.]+) MiB of its last run's memory reused/)
    expect(reused.map(([rank]) => rank)).toEqual([0])
    expect(reused[0][1]).toBeGreaterThanOrEqual(3)
  }, 90_000)
})

describe('warm spares: swing and bad input', () => {
  it('recovers swing on a spare with the failure-free value', async () => {
    const sargv = ['--preset', 'small-g']
    const reference = (await launch<SwingResult>('examples/swing/swing.ts', { ranks: 2, transport: 'processes', argv: sargv, onLog: () => {} })).value
    const events: SupervisorEvent[] = []
    const r = await new Supervisor<SwingResult>('examples/swing/swing.ts', {
      ranks: 2,
      transport: 'processes',
      argv: sargv,
      checkpoint: { dir: freshDir(), policy: { every: 5 }, keep: 2, resume: false },
      inject: [{ rank: 1, skeleton: 0, step: 12, phase: 'calculate' }],
      spares: 1,
      onLog: () => {},
      onEvent: (e) => events.push(e),
    }).run()
    expect(r.kind).toBe('done')
    if (r.kind !== 'done') return
    expect(Object.is(r.value.value, reference.value)).toBe(true)
    expect(recoveries(events).map((e) => e.ranksFrom.spawned)).toEqual([0])
  }, 90_000)

  it('refuses a negative or absurd --spares with exit code 2 and says why', async () => {
    const out: string[] = []
    const run = (spares: string) => main(['run', resolve(JACOBI), '--ranks', '2', '--spares', spares, '--quiet'], (s) => out.push(s), (s) => out.push(s))
    expect(await run('-1')).toBe(2)
    expect(out.join('\n')).toMatch(/--spares/)
    out.length = 0
    expect(await run('3')).toBe(2)
    expect(out.join('\n')).toMatch(/--spares 3 is more than the 2 rank\(s\)/)
  })
})
