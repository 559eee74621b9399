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
  it('Young: τ = sqrt(2·C·M)', () => {
    // C = 10 s, M = 6 h = 21600 s: sqrt(2·10·21600) = sqrt(432000) = 657.267069006…
    expect(youngInterval(10, 21600)).toBeCloseTo(657.2670690061993, 9)
    expect(youngInterval(10, 21600)).toBeCloseTo(Math.sqrt(2 * 10 * 21600), 12)
  })

  it('Daly: τ = sqrt(2CM)·[1 + ⅓·sqrt(C/2M) + ⅑·(C/2M)] − C when C < 2M', () => {
    // C = 10, M = 21600: C/2M = 10/43200 = 0.000231481…, sqrt = 0.0152145…
    const ratio = 10 / (2 * 21600)
    const expected = Math.sqrt(2 * 10 * 21600) * (1 + Math.sqrt(ratio) / 3 + ratio / 9) - 10
    expect(dalyInterval(10, 21600)).toBeCloseTo(expected, 9)
    expect(dalyInterval(10, 21600)).toBeCloseTo(650.6173073567396, 9)
    // C = 60, M = 3600: C/2M = 1/120
    const r2 = 60 / 7200
    expect(dalyInterval(60, 3600)).toBeCloseTo(Math.sqrt(2 * 60 * 3600) * (1 + Math.sqrt(r2) / 3 + r2 / 9) - 60, 9)
    expect(dalyInterval(60, 3600)).toBeCloseTo(617.8756496256495, 9)
  })

  it('Daly: τ = M when C ≥ 2M', () => {
    expect(dalyInterval(5000, 2000)).toBe(2000)
    expect(dalyInterval(4000, 2000)).toBe(2000)
  })

  it('is unit-agnostic: the same numbers in ms give the result in ms', () => {
    expect(dalyInterval(10_000, 21_600_000)).toBeCloseTo(650_617.3073567396, 5)
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
    const c = new PolicyClock({ mtbf: '6h' })
    expect(c.timeBased).toBe(true)
    // No cost measured yet: first checkpoint after the 1 s probe delay.
    expect(c.shouldCheckpoint(at({ now: 999 }))).toBe(false)
    expect(c.shouldCheckpoint(at({ now: 1000 }))).toBe(true)
    expect(c.shouldCheckpoint(at({ now: 1000, measuredCostMs: [] }))).toBe(true)
    // Measured C = 10 s (mean of 8 s and 12 s), M = 21600 s → τ ≈ 650.617 s.
    const costs = [8_000, 12_000]
    const ratio = 10 / (2 * 21600)
    const tauMs = (Math.sqrt(2 * 10 * 21600) * (1 + Math.sqrt(ratio) / 3 + ratio / 9) - 10) * 1000
    expect(c.intervalMs(costs)).toBeCloseTo(tauMs, 3)
    expect(c.shouldCheckpoint(at({ now: 5_000 + 650_000, lastCheckpointAt: 5_000, measuredCostMs: costs }))).toBe(false)
    expect(c.shouldCheckpoint(at({ now: 5_000 + 651_000, lastCheckpointAt: 5_000, measuredCostMs: costs }))).toBe(true)
    // A single number is used as is.
    expect(c.intervalMs(10_000)).toBeCloseTo(tauMs, 3)
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
