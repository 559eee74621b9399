import { describe, expect, it } from 'vitest'
import { buildLattice } from '../../../examples/swing/model/models.js'
import { resolveParams } from '../../../examples/swing/model/params.js'
import { Rng } from '../../../examples/swing/model/rng.js'
import { valueOnLattice } from '../../../examples/swing/model/serial.js'
import { simulatePolicy } from '../../../examples/swing/model/simulate.js'

describe('forward Monte Carlo of the optimal policy', () => {
  // StOpt's acceptance criterion: within 1.5 % of V_0. With 50 000 paths the standard
  // error is 0.2–0.3 % of the value, so 1.5 % is five standard errors or more.
  for (const name of ['stopt-tree', 'daily-g', 'daily-nig']) {
    it(`${name}: mean gain within 1.5 % of V_0 (fixed seed)`, () => {
      const p = resolveParams(name)
      const l = buildLattice(p)
      const { value, stored } = valueOnLattice(p, l, { store: true, window: true })
      const mc = simulatePolicy(p, l, stored!, { paths: 50000, seed: 20240611 })
      expect(mc.stdErr / value).toBeLessThan(0.004)
      expect(Math.abs(mc.mean / value - 1)).toBeLessThan(0.015)
      // Same seed, same result.
      const again = simulatePolicy(p, l, stored!, { paths: 1000, seed: 7 })
      expect(simulatePolicy(p, l, stored!, { paths: 1000, seed: 7 })).toEqual(again)
    })
  }
})

describe('Rng', () => {
  it('is reproducible, uniform in [0, 1) and differs between seeds', () => {
    const a = new Rng(1)
    const b = new Rng(1)
    const c = new Rng(2)
    let same = 0
    let differ = 0
    let outside = 0
    let sum = 0
    let sum2 = 0
    const n = 100000
    for (let i = 0; i < n; i++) {
      const u = a.uniform()
      if (u !== b.uniform()) differ++
      if (u === c.uniform()) same++
      if (!(u >= 0 && u < 1)) outside++
      sum += u
      sum2 += u * u
    }
    expect([differ, same, outside]).toEqual([0, 0, 0])
    expect(Math.abs(sum / n - 0.5)).toBeLessThan(0.005)
    expect(Math.abs(sum2 / n - 1 / 3)).toBeLessThan(0.005)
  })
})
