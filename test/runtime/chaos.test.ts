import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import type { JacobiResult } from '../../examples/jacobi/jacobi.js'
import { interiorSum, jacobiSerial } from '../../examples/jacobi/serial.js'
import { CheckpointStore } from '../../src/checkpoint/store/checkpoint-store.js'
import { randomPoints } from '../../src/runtime/inject.js'
import { Supervisor, type SupervisorEvent } from '../../src/runtime/supervisor.js'

const n = 24
const iterations = 40
const expected = interiorSum(jacobiSerial(n, iterations), n)

/**
 * Chaos: seeded random failures (rank, step, phase — mid-checkpoint included,
 * sometimes two per run) on Jacobi with 2–4 rank processes. Every run must end
 * with the failure-free result, and every checkpoint left complete on disk
 * must verify (a torn one never becomes complete).
 */
describe('chaos (processes transport)', () => {
  const seen = { failures: 0, midCheckpoint: 0, twoFailureRuns: 0, recovered: 0 }
  afterAll(() => {
    // The scenarios must really exercise recovery: failures in every phase, mid-checkpoint ones, double failures.
    console.log(`chaos: ${JSON.stringify(seen)}`)
    expect(seen.failures).toBeGreaterThanOrEqual(15)
    expect(seen.midCheckpoint).toBeGreaterThanOrEqual(1)
    expect(seen.twoFailureRuns).toBeGreaterThanOrEqual(1)
    expect(seen.recovered).toBeGreaterThanOrEqual(5)
  })
  const seeds = Array.from({ length: 20 }, (_, i) => 1000 + i * 7919)
  it.each(seeds)('seed %i: recovered runs give the failure-free result', async (seed) => {
    const ranks = 2 + (seed % 3)
    const count = seed % 4 === 0 ? 2 : 1
    const dir = mkdtempSync(join(tmpdir(), 'molotof-chaos-'))
    const events: SupervisorEvent[] = []
    try {
      const r = await new Supervisor<JacobiResult>('examples/jacobi/jacobi.ts', {
        ranks,
        transport: 'processes',
        argv: ['--n', String(n), '--iterations', String(iterations)],
        // Half the scenarios write their checkpoints in the background.
        checkpoint: { dir, policy: { every: 3 + (seed % 5) }, keep: 3, resume: false, async: seed % 2 === 1 },
        injectRandom: { seed, count },
        restarts: 3,
        onLog: () => {},
        onEvent: (e) => events.push(e),
      }).run()
      expect(r.kind).toBe('done')
      if (r.kind !== 'done') return
      expect(Object.is(r.value.checksum, expected), `seed ${seed}: ${r.value.checksum} vs ${expected}`).toBe(true)
      // Each drawn point fires at most once, at the drawn place (one at the last step's route never fires: there is no routing then).
      const drawn = randomPoints({ seed, count }, 0, iterations, ranks)
      expect(r.failures.length).toBeLessThanOrEqual(count)
      seen.failures += r.failures.length
      seen.midCheckpoint += r.failures.filter((f) => f.phase === 'checkpoint').length
      if (r.failures.length === 2) seen.twoFailureRuns++
      seen.recovered += events.filter((e) => e.event === 'resume').length
      for (const f of r.failures) expect(drawn.some((d) => d.rank === f.rank && d.step === f.step && d.phase === f.phase)).toBe(true)
      // Nothing complete on disk is corrupt.
      const store = new CheckpointStore(dir)
      for (const c of (await store.list()).filter((c) => c.complete)) {
        const v = await store.validate(c.seq, ranks, { checksums: true })
        expect(v.problems).toEqual([])
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
