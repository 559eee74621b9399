import { ConfigError } from 'molotof'
import { describe, expect, it } from 'vitest'
import { maxNodes } from '../../../examples/swing/model/lattice.js'
import { buildLattice } from '../../../examples/swing/model/models.js'
import { PRESETS, type SwingParams, driftOf, resolveParams, validateParams } from '../../../examples/swing/model/params.js'

function rejects(preset: string, overrides: Partial<SwingParams>, name: string, extra?: RegExp): void {
  let err: unknown
  try {
    resolveParams(preset, overrides)
  } catch (e) {
    err = e
  }
  expect(err).toBeInstanceOf(ConfigError)
  const msg = (err as Error).message
  expect(msg).toContain(`"${name}"`)
  if (extra) expect(msg).toMatch(extra)
}

describe('presets', () => {
  it('has the presets of SWING.md with their parameters', () => {
    expect(Object.keys(PRESETS).sort()).toEqual(
      ['daily-g', 'daily-g2d', 'daily-nig', 'large-g2d', 'small-g', 'stopt-tree', 'stopt-tree-flat', 'stopt-tree-grid', 'weekly-g2d'],
    )
    for (const name of Object.keys(PRESETS)) expect(() => validateParams({ ...PRESETS[name] })).not.toThrow()
    expect(PRESETS['stopt-tree']).toMatchObject({
      model: 'g', N: 100, T: 1, subSteps: 2, a: 0.29, sigma: 0.94, curve: 'stopt', vmin: 0, vmax: 90000, nGrid: 50,
      v0: 90000, injRate: 60000, wdRate: 45000, cInj: 0.35, cWd: 0.35, rates: 'const', control: 'bang',
    })
    expect(PRESETS['stopt-tree-flat']).toMatchObject({ curve: 'flat', base: 50, control: 'bang' })
    expect(PRESETS['stopt-tree-grid']).toMatchObject({ injRate: 59400, control: 'grid', curve: 'stopt' })
    expect(PRESETS['daily-g']).toMatchObject({
      model: 'g', N: 365, T: 1, subSteps: 1, a: 4, sigma: 0.8, curve: 'seasonal', base: 20, amp: 4, vmin: 0, vmax: 100,
      nGrid: 100, v0: 0, injRate: 1, wdRate: 2, cInj: 0.1, cWd: 0.1, rates: 'seasonal', control: 'grid',
    })
    expect(PRESETS['daily-nig']).toMatchObject({
      ...PRESETS['daily-g'], model: 'nig', nigAlpha: 15, nigBeta: 3, nigDxFactor: 1, nigWidth: 6, nigQuad: 64,
    })
    expect(PRESETS['daily-g2d']).toMatchObject({ ...PRESETS['daily-g'], model: 'g2d', a: 4, sigma: 0.7, a2: 1, sigma2: 0.3 })
    expect(PRESETS['weekly-g2d']).toMatchObject({ ...PRESETS['daily-g2d'], N: 52, nGrid: 50, injRate: 8, wdRate: 14 })
    expect(PRESETS['small-g']).toMatchObject({
      model: 'g', N: 24, a: 2, sigma: 0.6, curve: 'seasonal', base: 20, amp: 4, vmax: 20, nGrid: 20, v0: 0,
      injRate: 3, wdRate: 5, cInj: 0.1, cWd: 0.1, rates: 'seasonal', control: 'grid',
    })
    // The benchmark preset: at least 32 MB of V per rank on 2 ranks.
    const big = PRESETS['large-g2d']
    expect(big.model).toBe('g2d')
    // Half the levels times the widest date's price nodes, 8 bytes each (the node count
    // from the lattice itself, not assumed).
    expect(((big.nGrid + 1) / 2) * maxNodes(buildLattice({ ...big })) * 8).toBeGreaterThan(32 * 2 ** 20)
  })

  it('applies overrides and validates them', () => {
    expect(resolveParams('small-g', { nGrid: 40 }).nGrid).toBe(40)
    expect(PRESETS['small-g'].nGrid).toBe(20)
  })

  it('drift: unset in the presets, the model decides (ou for the trees, lattice for nig)', () => {
    for (const name of Object.keys(PRESETS)) expect(PRESETS[name].drift).toBeUndefined()
    expect(driftOf(resolveParams('daily-g'))).toBe('ou')
    expect(driftOf(resolveParams('weekly-g2d'))).toBe('ou')
    expect(driftOf(resolveParams('daily-nig'))).toBe('lattice')
    expect(driftOf(resolveParams('daily-g', { model: 'nig' }))).toBe('lattice')
    expect(driftOf(resolveParams('small-g', { drift: 'lattice' }))).toBe('lattice')
    expect(driftOf(resolveParams('daily-g2d', { drift: 'lattice' }))).toBe('lattice')
    expect(driftOf(resolveParams('daily-nig', { drift: 'lattice' }))).toBe('lattice') // what nig does anyway
    expect(driftOf(resolveParams('daily-g', { drift: 'ou' }))).toBe('ou')
  })
})

describe('bad input names the parameter', () => {
  it('unknown preset or parameter', () => {
    rejects('no-such', {}, 'preset', /unknown preset "no-such"/)
    rejects('small-g', { nGird: 3 } as unknown as Partial<SwingParams>, 'nGird', /no such parameter/)
  })

  it('v0 off the volume grid or outside it', () => {
    rejects('small-g', { v0: 0.5 }, 'v0', /grid/)
    rejects('small-g', { v0: 21 }, 'v0')
    rejects('small-g', { v0: -1 }, 'v0')
  })

  it('vmin ≥ vmax', () => {
    rejects('small-g', { vmin: 20 }, 'vmax', /vmin/)
    rejects('small-g', { vmin: 30, v0: 30 }, 'vmax')
  })

  it('negative rates or costs', () => {
    for (const name of ['injRate', 'wdRate', 'cInj', 'cWd'] as const) rejects('small-g', { [name]: -1 }, name, /negative/)
  })

  it('non-positive or non-integer sizes and model parameters', () => {
    for (const name of ['N', 'T', 'nGrid', 'subSteps', 'a', 'sigma'] as const) {
      rejects('small-g', { [name]: 0 }, name, /positive/)
      rejects('small-g', { [name]: -2 }, name, /positive/)
    }
    rejects('small-g', { N: 2.5 }, 'N', /integer/)
    rejects('small-g', { nGrid: Number.NaN }, 'nGrid', /finite/)
    rejects('daily-g2d', { a2: 0 }, 'a2')
    rejects('daily-g2d', { sigma2: -1 }, 'sigma2')
  })

  it('NIG with |β| ≥ α, or an odd Simpson count', () => {
    rejects('daily-nig', { nigBeta: 15 }, 'nigBeta', /\|β\| < α/)
    rejects('daily-nig', { nigBeta: -20 }, 'nigBeta')
    rejects('daily-nig', { nigQuad: 63 }, 'nigQuad', /even/)
    rejects('daily-nig', { nigAlpha: 0 }, 'nigAlpha')
  })

  it('unknown drift, or drift ou with model nig', () => {
    rejects('small-g', { drift: 'foo' as SwingParams['drift'] }, 'drift', /must be one of ou, lattice \(got foo\)/)
    rejects('daily-nig', { drift: 'ou' }, 'drift', /model nig always computes c_k .* on its lattice/)
    rejects('daily-g', { model: 'nig', drift: 'ou' }, 'drift', /nig/)
  })

  it('unknown model, curve, rates or control', () => {
    rejects('small-g', { model: 'bs' as SwingParams['model'] }, 'model')
    rejects('small-g', { curve: 'x' as SwingParams['curve'] }, 'curve')
    rejects('small-g', { rates: 'x' as SwingParams['rates'] }, 'rates')
    rejects('small-g', { control: 'x' as SwingParams['control'] }, 'control')
  })

  it('grid too coarse for the rates (control grid)', () => {
    // h = 2: injection is at most 1 per date, so it can never move a whole step.
    rejects('daily-g', { nGrid: 50 }, 'injRate', /grid too coarse.*no injection is ever possible/)
    rejects('daily-g', { wdRate: 0.9 }, 'wdRate', /grid too coarse.*no withdrawal is ever possible/)
    // Half the year below one step is fine: the season changes the stencil.
    expect(() => resolveParams('daily-g')).not.toThrow()
    // Bang control interpolates, so it is not concerned; a zero rate is an explicit choice.
    expect(() => resolveParams('daily-g', { nGrid: 50, control: 'bang' })).not.toThrow()
    expect(() => resolveParams('daily-g', { injRate: 0 })).not.toThrow()
  })
})
