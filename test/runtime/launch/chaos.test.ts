import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import type { JacobiResult } from '../../../examples/jacobi/jacobi.js'
import { interiorSum, jacobiSerial } from '../../../examples/jacobi/serial.js'
import { CheckpointStore } from '../../../src/checkpoint/store/checkpoint-store.js'
import { type Injection, randomPoints } from '../../../src/runtime/inject.js'
import { Supervisor, type SupervisorEvent } from '../../../src/runtime/launch/supervisor.js'

const n = 24
const iterations = 40
const expected = interiorSum(jacobiSerial(n, iterations), n)

/** One chaos scenario, all of it derived from its seed. */
interface Scenario {
  seed: number
  ranks: number
  /** Failure points drawn. */
  count: number
  /** Checkpoint after steps every − 1, 2·every − 1, … */
  every: number
  /** Checkpoints written in the background. */
  async: boolean
  /** Warm spares: the dead rank is replaced by one and the survivors keep their processes (their background writes end first). */
  spares: number
}

const scenarioOf = (seed: number): Scenario => ({
  seed,
  ranks: 2 + (seed % 3),
  count: seed % 4 === 0 ? 2 : 1,
  every: 3 + (seed % 5),
  async: seed % 2 === 1,
  spares: seed % 3 === 1 ? 0 : 1,
})

const seeds = Array.from({ length: 12 }, (_, i) => 1000 + i * 7919)

/**
 * The failures a scenario must see, from the injection rules: every drawn point
 * fires exactly once (calculate and route when the rank enters the phase, checkpoint
 * at the step's checkpoint point, taken or not), except a route point at the last
 * step, which has no routing. A later point still fires after the restart caused by
 * an earlier one: points are at distinct steps, sorted, and replay resumes before them.
 */
function expectedFailures(s: Scenario): Injection[] {
  return randomPoints({ seed: s.seed, count: s.count }, 0, iterations, s.ranks).filter(
    (p) => !(p.phase === 'route' && p.step === iterations - 1),
  )
}

/** Whether step's checkpoint point writes a checkpoint (the torn-write case for a checkpoint-phase failure). */
const writesCheckpoint = (s: Scenario, step: number) => (step + 1) % s.every === 0

/**
 * Restarts that resume from a checkpoint, for synchronous checkpoints: a failure at
 * step t finds a complete checkpoint iff one was committed at an earlier step (the
 * first at step every − 1). A synchronous commit ends with a collective, so no rank
 * is past it before it is on disk. (Background commits land at a later checkpoint
 * point, depending on timing: not predicted.)
 */
const expectedResumes = (s: Scenario, failures: Injection[]) => failures.filter((f) => f.step > s.every - 1).length

const key = (f: { rank: number; step: number; phase: string }) => `rank ${f.rank} step ${f.step} ${f.phase}`

/**
 * Chaos: seeded random failures (rank, step, phase — mid-checkpoint included,
 * sometimes two per run) on Jacobi with 2–4 rank processes, two thirds of them
 * recovered on a warm spare with the survivors kept. Every run must end
 * with the failure-free result after exactly the failures its seed draws, and
 * every checkpoint left complete on disk must verify (a torn one never becomes
 * complete). Each scenario checks itself, so one seed can run alone.
 */
describe('chaos (processes transport)', () => {
  it('the seeds cover every phase, torn writes, double failures and resumes from checkpoints', () => {
    // A property of the seed list, from the injection rules alone: what the campaign exercises.
    const all = seeds.map(scenarioOf).map((s) => ({ s, failures: expectedFailures(s) }))
    const failures = all.flatMap((x) => x.failures)
    expect(failures.length).toBeGreaterThanOrEqual(15)
    for (const phase of ['calculate', 'route', 'checkpoint']) expect(failures.some((f) => f.phase === phase)).toBe(true)
    expect(all.some(({ s, failures }) => failures.some((f) => f.phase === 'checkpoint' && writesCheckpoint(s, f.step)))).toBe(true)
    expect(all.filter((x) => x.failures.length === 2).length).toBeGreaterThanOrEqual(1)
    expect(all.filter((x) => !x.s.async).reduce((sum, x) => sum + expectedResumes(x.s, x.failures), 0)).toBeGreaterThanOrEqual(5)
    // Cold restarts and warm spares with kept survivors, each with synchronous and with background checkpoints.
    for (const spares of [0, 1]) for (const async of [false, true]) expect(all.some(({ s, failures }) => s.spares === spares && s.async === async && failures.length > 0)).toBe(true)
  })

  // What the runs saw, logged at the end (informative only: each scenario asserts its own).
  const seen = { failures: 0, midCheckpoint: 0, twoFailureRuns: 0, resumed: 0 }
  afterAll(() => console.log(`chaos: ${JSON.stringify(seen)}`))

  it.each(seeds)('seed %i: recovered runs give the failure-free result', async (seed) => {
    const s = scenarioOf(seed)
    const dir = mkdtempSync(join(tmpdir(), 'molotof-chaos-'))
    const events: SupervisorEvent[] = []
    try {
      const r = await new Supervisor<JacobiResult>('examples/jacobi/jacobi.ts', {
        ranks: s.ranks,
        transport: 'processes',
        argv: ['--n', String(n), '--iterations', String(iterations)],
        // Half the scenarios write their checkpoints in the background.
        checkpoint: { dir, policy: { every: s.every }, keep: 3, resume: false, async: s.async },
        injectRandom: { seed, count: s.count },
        spares: s.spares,
        restarts: 3,
        // The injected failures are deaths, seen at exit. A generous hang timeout keeps a
        // rank that starts slowly on a loaded machine from counting as an extra failure
        // (seen at load 19 on 2 cores with the 2 s default: "hung" at phase start).
        hangTimeoutMs: 30_000,
        onLog: () => {},
        onEvent: (e) => events.push(e),
      }).run()
      expect(r.kind).toBe('done')
      if (r.kind !== 'done') return
      expect(Object.is(r.value.checksum, expected), `seed ${seed}: ${r.value.checksum} vs ${expected}`).toBe(true)
      // Exactly the drawn failures, each once, and one restart per failure.
      const want = expectedFailures(s)
      const saw = r.failures.map((f) => `${key(f)} (${f.reason}: ${f.message})`).join('; ')
      expect(r.failures.map(key).sort(), `seed ${seed} failures: ${saw}`).toEqual(want.map(key).sort())
      expect(events.filter((e) => e.event === 'start').length).toBe(want.length + 1)
      const resumed = events.filter((e) => e.event === 'resume').length
      if (s.async) expect(resumed).toBeLessThanOrEqual(want.length)
      else expect(resumed).toBe(expectedResumes(s, want))
      // Nothing complete on disk is corrupt.
      const store = new CheckpointStore(dir)
      for (const c of (await store.list()).filter((c) => c.complete)) {
        const v = await store.validate(c.seq, s.ranks, { checksums: true })
        expect(v.problems).toEqual([])
      }
      seen.failures += r.failures.length
      seen.midCheckpoint += r.failures.filter((f) => f.phase === 'checkpoint').length
      if (r.failures.length === 2) seen.twoFailureRuns++
      seen.resumed += resumed
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
