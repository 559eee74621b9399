import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { excessAt, stepAtTime, stepsEvery, timeAtStep, type ProgressSample } from '../../src/bench/local-excess.js'

/**
 * A synthetic run: supersteps of `ms` milliseconds drifting by ±`drift` over a
 * minute, each jittered by up to ±10 % (a seeded generator), plus `jump` ms
 * at each event step and a background cost spread over the `spread`
 * supersteps after it; reported every 250 ms, as rank 0 reports progress.
 */
function syntheticRun(o: { ms: number; drift: number; steps: number; events: readonly number[]; jump: number; background: number; spread: number; seed: number }): ProgressSample[] {
  let x = o.seed >>> 0 || 1
  const random = () => {
    x ^= x << 13
    x >>>= 0
    x ^= x >>> 17
    x ^= x << 5
    x >>>= 0
    return x / 2 ** 32
  }
  const events = new Set(o.events)
  const out: ProgressSample[] = [{ at: 0, step: 0 }]
  let t = 0
  let nextReport = 250
  let backgroundLeft = 0
  for (let s = 1; s <= o.steps; s++) {
    let d = o.ms * (1 + o.drift * Math.sin((2 * Math.PI * t) / 60_000)) * (0.9 + 0.2 * random())
    if (backgroundLeft > 0) {
      d += o.background / o.spread
      backgroundLeft--
    }
    t += d
    if (events.has(s)) {
      t += o.jump
      backgroundLeft = o.spread
    }
    if (t >= nextReport || s === o.steps) {
      out.push({ at: t, step: s })
      nextReport = t + 250
    }
  }
  return out
}

describe('excessAt (what a checkpoint adds to a run, from the run itself)', () => {
  it('finds the time that events added to a drifting, jittery run, and nothing where there was none', () => {
    fc.assert(
      fc.property(
        fc.record({
          ms: fc.double({ min: 3, max: 12, noNaN: true }),
          drift: fc.double({ min: 0, max: 0.15, noNaN: true }),
          jump: fc.double({ min: 2, max: 40, noNaN: true }),
          background: fc.double({ min: 0, max: 30, noNaN: true }),
          seed: fc.integer({ min: 1, max: 2 ** 31 }),
        }),
        ({ ms, drift, jump, background, seed }) => {
          const every = Math.round(2000 / ms)
          const steps = every * 40
          const events = Array.from({ length: 38 }, (_, i) => (i + 1) * every)
          const spread = Math.max(1, Math.round(150 / ms))
          const run = syntheticRun({ ms, drift, steps, events, jump, background, spread, seed })
          const found = excessAt(run, events, 450).filter(Number.isFinite)
          expect(found.length).toBeGreaterThan(30)
          const mean = found.reduce((a, b) => a + b, 0) / found.length
          // The jitter alone leaves about 1.2 ms of standard error on the mean of 36 events at 12 ms per superstep.
          expect(Math.abs(mean - (jump + background))).toBeLessThan(0.1 * (jump + background) + 4)
          // The same run without events: phantom events every 2 s find nothing.
          const quiet = syntheticRun({ ms, drift, steps, events: [], jump, background, spread, seed })
          const phantom = excessAt(quiet, stepsEvery(quiet, 2000), 450).filter(Number.isFinite)
          expect(phantom.length).toBeGreaterThan(30)
          expect(Math.abs(phantom.reduce((a, b) => a + b, 0) / phantom.length)).toBeLessThan(4)
        },
      ),
      { numRuns: 40 },
    )
  })

  it('interpolates between reports and says NaN outside them', () => {
    const p = [
      { at: 100, step: 10 },
      { at: 300, step: 30 },
      { at: 400, step: 60 },
    ]
    expect(timeAtStep(p, 20)).toBe(200)
    expect(timeAtStep(p, 40)).toBeCloseTo(333.33, 2)
    expect(timeAtStep(p, 10)).toBe(100)
    expect(timeAtStep(p, 9)).toBeNaN()
    expect(timeAtStep(p, 61)).toBeNaN()
    expect(stepAtTime(p, 350)).toBe(45)
    expect(stepAtTime(p, 99)).toBeNaN()
    // Events too close to either end have no windows beside them.
    expect(excessAt(p, [12], 50)).toEqual([NaN])
    expect(stepsEvery(p, 100)).toEqual([20, 30])
  })
})
