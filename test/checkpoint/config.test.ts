import { describe, expect, it } from 'vitest'
import { frozenConfig, type FaultToleranceConfig } from '../../src/checkpoint/config.js'

describe('frozenConfig (the run configuration every part of a run shares)', () => {
  it('is a deep-frozen copy: writing to it or to its policy throws, the caller keeps a writable original', () => {
    const mine: FaultToleranceConfig = { dir: '/tmp/x', policy: { every: 50 }, keep: 2, resume: false, interrupt: { skeleton: 0, step: 9 } }
    const ft = frozenConfig(mine)
    expect(ft).toEqual(mine)
    expect(ft).not.toBe(mine)
    // Test files are ES modules (strict): a write to a frozen object throws.
    expect(() => {
      ;(ft as { keep: number }).keep = 3
    }).toThrow(TypeError)
    expect(() => {
      ;(ft.policy as { every: number }).every = 1
    }).toThrow(TypeError)
    expect(() => {
      ft.interrupt!.step = 1
    }).toThrow(TypeError)
    mine.keep = 5
    ;(mine.policy as { every: number }).every = 10
    expect(ft.keep).toBe(2)
    expect(ft.policy).toEqual({ every: 50 })
  })
})
