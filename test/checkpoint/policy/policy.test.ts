import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { ConfigError } from '../../../src/errors.js'
import { formatDuration, parseDuration } from '../../../src/checkpoint/policy/duration.js'
import { describePolicy, parsePolicy, type CheckpointPolicy } from '../../../src/checkpoint/policy/policy.js'
import { dalyInterval, PolicyClock, youngInterval, type ClockInput } from '../../../src/checkpoint/policy/clock.js'

describe('parsePolicy', () => {
  const valid: [unknown, CheckpointPolicy][] = [
    ['off', { kind: 'off' }],
    [' OFF ', { kind: 'off' }],
    ['request', { onRequest: true }],
    ['every:50', { every: 50 }],
    ['every=5', { every: 5 }],
    ['50', { every: 50 }],
    ['seconds:30', { seconds: 30 }],
    ['seconds:5m', { seconds: 300 }],
    ['30s', { seconds: 30 }],
    ['2m', { seconds: 120 }],
    ['mtbf:6h', { mtbf: 21600 }],
    ['mtbf:30m', { mtbf: 1800 }],
    ['mtbf:90s', { mtbf: 90 }],
    ['mtbf:1d', { mtbf: 86400 }],
    ['mtbf:3600', { mtbf: 3600 }],
    [{ kind: 'off' }, { kind: 'off' }],
    [{ every: 3 }, { every: 3 }],
    [{ seconds: 0.5 }, { seconds: 0.5 }],
    [{ mtbf: '6h' }, { mtbf: 21600 }],
    [{ mtbf: 7200 }, { mtbf: 7200 }],
    [{ onRequest: true }, { onRequest: true }],
  ]
  for (const [input, expected] of valid) {
    it(`accepts ${JSON.stringify(input)}`, () => {
      expect(parsePolicy(input)).toEqual(expected)
      expect(parsePolicy(parsePolicy(input))).toEqual(expected) // canonical forms parse to themselves
    })
  }

  const invalid: [unknown, RegExp][] = [
    ['every:0', /invalid checkpoint policy "every:0": every needs a positive whole number of steps \(got "0"\)/],
    ['every:2.5', /every needs a positive whole number of steps/],
    [{ every: -1 }, /every needs a positive whole number of steps \(got -1\)/],
    ['seconds:soon', /seconds needs a positive duration/],
    [{ seconds: 0 }, /seconds needs a positive duration/],
    ['mtbf:6 weeks', /mtbf needs a positive duration such as "6h"/],
    [{ mtbf: -5 }, /mtbf needs a positive duration/],
    ['hourly', /invalid checkpoint policy "hourly": not a policy/],
    ['weekly:3', /unknown policy "weekly"/],
    [{ every: 5, seconds: 3 }, /one policy at a time \(got every, seconds\)/],
    [{}, /the object names no policy/],
    [{ kind: 'on' }, /kind must be "off"/],
    [{ onRequest: false }, /onRequest must be true/],
    [{ often: true }, /unknown policy "often"/],
    [42, /a policy is a string or an object, not number/],
    [null, /not null/],
  ]
  for (const [input, message] of invalid) {
    it(`rejects ${JSON.stringify(input)}`, () => {
      expect(() => parsePolicy(input)).toThrow(ConfigError)
      expect(() => parsePolicy(input)).toThrow(message)
      expect(() => parsePolicy(input)).toThrow(/accepted: off, request, every:<steps>/)
    })
  }
})

describe('describePolicy and durations', () => {
  it('describes each policy in words', () => {
    expect(describePolicy({ kind: 'off' })).toBe('no checkpoints')
    expect(describePolicy({ every: 1 })).toBe('after every step')
    expect(describePolicy({ every: 50 })).toBe('every 50 steps')
    expect(describePolicy({ seconds: 90 })).toBe('every 90s')
    expect(describePolicy({ mtbf: '6h' })).toBe('Young/Daly interval for an MTBF of 6h, from the measured checkpoint cost')
    expect(describePolicy({ onRequest: true })).toBe('only on request (signal)')
  })

  it('parses and formats durations', () => {
    expect(parseDuration('1.5h')).toBe(5400)
    expect(parseDuration('250ms')).toBe(0.25)
    expect(parseDuration('0s')).toBeUndefined()
    expect(parseDuration(Infinity)).toBeUndefined()
    expect(formatDuration(86400)).toBe('1d')
    expect(formatDuration(1800)).toBe('30m')
    expect(formatDuration(90)).toBe('90s')
    expect(formatDuration(0.25)).toBe('250ms')
  })
})

describe('Young/Daly intervals against hand computation', () => {
  // Cases chosen so that C/2M is a perfect square: every step is exact by hand.
  it('Young: τ = √(2·C·M) on numbers with an exact root', () => {
    expect(youngInterval(2, 3600)).toBe(120) // √(2·2·3600) = √14400
    expect(youngInterval(50, 3600)).toBe(600) // √360000
    expect(youngInterval(9, 450)).toBe(90) // √8100
    expect(youngInterval(10, 21600)).toBeCloseTo(657.2670690061994, 9) // √432000
  })

  it('Daly: τ = √(2CM)·[1 + ⅓·√(C/2M) + ⅑·(C/2M)] − C when C < 2M', () => {
    // C = 9, M = 450: C/2M = 1/100, √ = 1/10, √(2CM) = 90:
    // 90·(1 + 1/30 + 1/900) − 9 = 90 + 3 + 0.1 − 9 = 84.1.
    expect(dalyInterval(9, 450)).toBeCloseTo(84.1, 12)
    // C = 1, M = 18: C/2M = 1/36, √ = 1/6, √(2CM) = 6:
    // 6·(1 + 1/18 + 1/324) − 1 = 6 + 1/3 + 1/54 − 1 = 5 + 19/54 = 5.351851…
    expect(dalyInterval(1, 18)).toBeCloseTo(5 + 19 / 54, 12)
    // C = 10, M = 4500: C/2M = 1/900, √ = 1/30, √(2CM) = 300:
    // 300·(1 + 1/90 + 1/8100) − 10 = 300 + 10/3 + 1/27 − 10 = 7921/27 = 293.370370…
    expect(dalyInterval(10, 4500)).toBeCloseTo(7921 / 27, 10)
    // C = 1800, M = 3600: C/2M = 1/4, √ = 1/2, √(2CM) = 3600:
    // 3600·(1 + 1/6 + 1/36) − 1800 = 3600 + 600 + 100 − 1800 = 2500.
    expect(dalyInterval(1800, 3600)).toBeCloseTo(2500, 9)
  })

  it('Daly: τ = M when C ≥ 2M', () => {
    expect(dalyInterval(5000, 2000)).toBe(2000)
    expect(dalyInterval(4000, 2000)).toBe(2000)
  })

  it('is unit-agnostic: the same numbers in ms give the result in ms', () => {
    expect(dalyInterval(9_000, 450_000)).toBeCloseTo(84_100, 7) // 84.1 s
    expect(youngInterval(2_000, 3_600_000)).toBe(120_000)
  })

  it('rejects a negative cost or a non-positive MTBF', () => {
    expect(() => dalyInterval(-1, 100)).toThrow(ConfigError)
    expect(() => dalyInterval(1, 0)).toThrow(ConfigError)
    expect(() => dalyInterval(NaN, 100)).toThrow(ConfigError)
  })
})

describe('Young/Daly intervals minimise the expected waste', () => {
  // Not the formulas again: the cost functions they optimise, scanned numerically
  // over two decades either side of the returned interval.
  const scan = (tau: number): number[] => Array.from({ length: 401 }, (_, i) => tau * 100 ** ((i - 200) / 200))
  // Ratios C/M from 1e-6 to just below 2 (Daly's formula holds for C < 2M), M from a minute to a month.
  const caseArb = fc.record({
    logRatio: fc.double({ min: -6, max: Math.log10(1.99), noNaN: true }),
    mtbf: fc.double({ min: 60, max: 2.6e6, noNaN: true }),
  })

  it("Young's τ minimises the first-order waste C/τ + τ/2M (checkpoint time + expected rework)", () => {
    fc.assert(
      fc.property(caseArb, ({ logRatio, mtbf }) => {
        const cost = 10 ** logRatio * mtbf
        const waste = (tau: number) => cost / tau + tau / (2 * mtbf)
        const best = waste(youngInterval(cost, mtbf))
        for (const tau of scan(youngInterval(cost, mtbf))) expect(waste(tau)).toBeGreaterThanOrEqual(best * (1 - 1e-12))
      }),
    )
  })

  it("Daly's τ minimises Daly's expected run time, to the accuracy of his expansion, and beats Young's", () => {
    // Daly (2006): with exponential failures the expected wall time of a job is
    // proportional to (e^{(τ + C)/M} − 1)/τ, τ being the compute time between checkpoints.
    // His formula is a series for the exact minimiser: measured relative excess over the
    // true minimum below 1e-11 for C/M ≤ 0.01, 3e-8 for C/M ≤ 0.1 and 2e-3 up to C = 2M.
    fc.assert(
      fc.property(caseArb, ({ logRatio, mtbf }) => {
        const cost = 10 ** logRatio * mtbf
        const wallTime = (tau: number) => Math.expm1((tau + cost) / mtbf) / tau
        const ratio = cost / mtbf
        const tolerance = ratio <= 0.01 ? 1e-10 : ratio <= 0.1 ? 1e-7 : 3e-3
        const tau = dalyInterval(cost, mtbf)
        const best = wallTime(tau)
        for (const t of scan(tau)) expect(wallTime(t)).toBeGreaterThanOrEqual(best * (1 - tolerance))
        expect(best).toBeLessThanOrEqual(wallTime(youngInterval(cost, mtbf)) * (1 + 1e-12))
      }),
    )
  })
})

describe('PolicyClock', () => {
  const at = (p: Partial<ClockInput>): ClockInput => ({ step: 0, now: 0, lastCheckpointAt: 0, ...p })

  it('off never votes, even when requested', () => {
    const c = new PolicyClock({ kind: 'off' })
    expect(c.shouldCheckpoint(at({ step: 99, now: 1e9, requested: true }))).toBe(false)
    expect(c.timeBased).toBe(false)
  })

  it('every n: after steps n-1, 2n-1, … (step is the 0-based superstep just completed)', () => {
    const c = new PolicyClock({ every: 5 })
    const votes = Array.from({ length: 15 }, (_, step) => c.shouldCheckpoint(at({ step })))
    expect(votes.flatMap((v, i) => (v ? [i] : []))).toEqual([4, 9, 14])
    expect(c.shouldCheckpoint(at({ step: 2, requested: true }))).toBe(true)
    expect(c.timeBased).toBe(false)
  })

  it('seconds: once the period has passed since the last checkpoint', () => {
    const c = new PolicyClock(parsePolicy('30s'))
    expect(c.timeBased).toBe(true)
    expect(c.shouldCheckpoint(at({ now: 29_999, lastCheckpointAt: 0 }))).toBe(false)
    expect(c.shouldCheckpoint(at({ now: 30_000, lastCheckpointAt: 0 }))).toBe(true)
    expect(c.shouldCheckpoint(at({ now: 50_000, lastCheckpointAt: 30_000 }))).toBe(false)
    expect(c.shouldCheckpoint(at({ now: 50_000, lastCheckpointAt: 30_000, requested: true }))).toBe(true)
    expect(c.intervalMs()).toBe(30_000)
  })

  it('onRequest: only when requested', () => {
    const c = new PolicyClock('request')
    expect(c.shouldCheckpoint(at({ step: 1e6, now: 1e12 }))).toBe(false)
    expect(c.shouldCheckpoint(at({ requested: true }))).toBe(true)
  })

  it('mtbf: probes after 1 s to measure C, then waits the Daly interval for the mean cost', () => {
    const c = new PolicyClock({ mtbf: 450 })
    expect(c.timeBased).toBe(true)
    // No cost measured yet: first checkpoint after the 1 s probe delay.
    expect(c.shouldCheckpoint(at({ now: 999 }))).toBe(false)
    expect(c.shouldCheckpoint(at({ now: 1000 }))).toBe(true)
    expect(c.shouldCheckpoint(at({ now: 1000, measuredCostMs: [] }))).toBe(true)
    // Measured C = 9 s (mean of 8 s and 10 s), M = 450 s → τ = 84.1 s (worked out above).
    const costs = [8_000, 10_000]
    expect(c.intervalMs(costs)).toBeCloseTo(84_100, 6)
    expect(c.shouldCheckpoint(at({ now: 5_000 + 84_099, lastCheckpointAt: 5_000, measuredCostMs: costs }))).toBe(false)
    expect(c.shouldCheckpoint(at({ now: 5_000 + 84_101, lastCheckpointAt: 5_000, measuredCostMs: costs }))).toBe(true)
    // A single number is used as is.
    expect(c.intervalMs(9_000)).toBeCloseTo(84_100, 6)
  })

  it('the cost estimate is the mean of the last `costWindow` measurements', () => {
    const c = new PolicyClock({ mtbf: 3600 }, { costWindow: 2, probeAfterMs: 500 })
    expect(c.costEstimate([100_000, 1_000, 3_000])).toBe(2_000)
    expect(c.costEstimate(undefined)).toBeUndefined()
    expect(c.intervalMs(undefined)).toBe(500)
    expect(() => new PolicyClock({ mtbf: 3600 }, { costWindow: 0 })).toThrow(ConfigError)
    expect(() => new PolicyClock({ every: 0 })).toThrow(ConfigError)
  })
})
