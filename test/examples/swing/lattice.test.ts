import { describe, expect, it } from 'vitest'
import { besselK1, besselK1Scaled } from '../../../examples/swing/model/bessel.js'
import { forwardCurve } from '../../../examples/swing/model/curves.js'
import { type PriceLattice, marginals } from '../../../examples/swing/model/lattice.js'
import { buildLattice } from '../../../examples/swing/model/models.js'
import { NigLattice, nigDensity, nigWithVariance } from '../../../examples/swing/model/nig.js'
import { PRESETS, type SwingParams, resolveParams } from '../../../examples/swing/model/params.js'
import { TreeLattice, buildOuTree, trinomialStep } from '../../../examples/swing/model/tree.js'
import { ProductTreeLattice } from '../../../examples/swing/model/tree2d.js'

const ouVariance = (a: number, sigma: number, dt: number) => (sigma * sigma * (1 - Math.exp(-2 * a * dt))) / (2 * a)

function maxRowDefect(l: PriceLattice): number {
  let worst = 0
  let nonPositive = 0
  for (let k = 0; k < l.dates; k++) {
    const { rowPtr, col, p } = l.transitions(k)
    expect(rowPtr.length).toBe(l.nodes(k) + 1)
    for (let n = 0; n < l.nodes(k); n++) {
      let s = 0
      for (let e = rowPtr[n]; e < rowPtr[n + 1]; e++) {
        if (!(p[e] > 0) || col[e] < 0 || col[e] >= l.nodes(k + 1) || (e > rowPtr[n] && col[e] <= col[e - 1])) nonPositive++
        s += p[e]
      }
      worst = Math.max(worst, Math.abs(s - 1))
    }
  }
  expect(nonPositive).toBe(0) // probabilities positive, columns valid and ascending
  return worst
}

/**
 * max_k |E[S_k]/F_k − 1| with E[S_k] = Σ_n π_k(n)·S_k(n), π_k propagated from the
 * root through the lattice's transitions by marginals(), not by latticeDrift (the
 * implementation's own propagation for drift `lattice`).
 */
function maxMeanSpotDefect(l: PriceLattice, F: Float64Array): number {
  const dist = marginals(l)
  let worst = 0
  for (let k = 0; k < l.dates; k++) {
    const s = l.spots(k)
    let m = 0
    for (let n = 0; n < s.length; n++) m += dist[k][n] * s[n]
    worst = Math.max(worst, Math.abs(m / F[k] - 1))
  }
  return worst
}

const martingaleError = (name: string, overrides: Partial<SwingParams> = {}): number => {
  const p = resolveParams(name, overrides)
  return maxMeanSpotDefect(buildLattice(p), forwardCurve(p))
}

/**
 * Conditional mean and variance of x over one decision date, from every node of
 * every date, relative to the OU values e^{−aΔt}·x and σ²(1 − e^{−2aΔt})/(2a).
 * Each trinomial sub-step matches the conditional mean (linear in x) and variance
 * exactly, so their product does too (law of total variance); only round-off
 * remains (no entry is dropped for these presets, see the row sums), hence 1e-12.
 */
function maxMomentDefect(
  l: PriceLattice, x: (k: number, n: number) => number, mean: (x0: number, n: number, k: number) => number, v: number,
): { mean: number; variance: number } {
  let dm = 0
  let dv = 0
  for (let k = 0; k < l.dates; k++) {
    const { rowPtr, col, p } = l.transitions(k)
    for (let n = 0; n < l.nodes(k); n++) {
      let m = 0
      for (let e = rowPtr[n]; e < rowPtr[n + 1]; e++) m += p[e] * x(k + 1, col[e])
      let s2 = 0
      for (let e = rowPtr[n]; e < rowPtr[n + 1]; e++) s2 += p[e] * (x(k + 1, col[e]) - m) ** 2
      dm = Math.max(dm, Math.abs(m - mean(x(k, n), n, k)) / Math.sqrt(v))
      dv = Math.max(dv, Math.abs(s2 / v - 1))
    }
  }
  return { mean: dm, variance: dv }
}

describe('trinomial tree (g)', () => {
  for (const name of ['stopt-tree', 'daily-g', 'small-g']) {
    it(`${name}: conditional mean and variance per decision date match the OU process`, () => {
      const p = resolveParams(name)
      const l = buildLattice(p) as TreeLattice
      expect(l).toBeInstanceOf(TreeLattice)
      const dt = p.T / p.N
      const decay = Math.exp(-p.a * dt)
      const d = maxMomentDefect(l, (k, n) => l.x(k)[n], (x0) => decay * x0, ouVariance(p.a, p.sigma, dt))
      expect(d.mean).toBeLessThan(1e-12)
      expect(d.variance).toBeLessThan(1e-12)
      expect(maxRowDefect(l)).toBeLessThan(1e-14)
    })
  }

  it('follows the exact construction: widths, spacing and branching', () => {
    const tree = buildOuTree(0.29, 0.94, 1, 100, 2)
    expect(tree.nb[0]).toBe(0)
    expect(tree.nb[1]).toBe(1)
    expect(tree.dx[0]).toBe(0)
    // Widening stops near j_max ≈ 0.1835/(1 − e^{−a·dt}).
    const jmax = Math.max(...tree.nb)
    expect(Math.abs(jmax - 0.1835 / (1 - Math.exp(-0.29 * 0.005)))).toBeLessThan(1.5)
    for (let i = 1; i < tree.nb.length - 1; i++) expect(tree.nb[i + 1] - tree.nb[i]).toBeGreaterThanOrEqual(0)
    const step = trinomialStep(tree, 150)
    for (let n = 0; n < step.facing.length; n++) {
      expect(step.facing[n] - 1).toBeGreaterThanOrEqual(0)
      expect(step.facing[n] + 1).toBeLessThanOrEqual(2 * tree.nb[151])
      expect(Math.min(step.down[n], step.mid[n], step.up[n])).toBeGreaterThanOrEqual(0)
    }
    // c_k is half the variance of X_{t_k} (E[e^X] = e^{Var/2} for a centred Gaussian) and
    // Var X_t = ∫₀ᵗ σ²·e^{−2a(t−s)} ds: integrated here by Simpson's rule, not taken from
    // the closed form the code uses.
    const halfVariance = (t: number) => {
      const m = 1000
      const h = t / m
      let sum = 0
      for (let i = 0; i <= m; i++) sum += (i === 0 || i === m ? 1 : i % 2 === 1 ? 4 : 2) * 0.94 ** 2 * Math.exp(-0.58 * (t - i * h))
      return (sum * h) / 3 / 2
    }
    expect(tree.t[100]).toBe(1)
    for (let k = 0; k <= 100; k++) expect(Math.abs(tree.c[k] - halfVariance(tree.t[k]))).toBeLessThan(1e-13)
    expect(tree.c[100]).toBeCloseTo(0.335236037, 9) // ½·0.8836/0.58·(1 − e^{−0.58}) on a calculator
  })

  // With the closed-form c_k of SWING.md (drift `ou`, the default), E[e^{x − c_k}] on
  // the tree is 1 only up to the higher cumulants the tree does not match: a few 1e-8
  // with daily (or finer) steps. The coarse presets are tested below.
  for (const name of ['stopt-tree', 'daily-g']) {
    it(`${name}: E[S_k] = F_k within 1e-7 at every date (drift ou)`, () => {
      expect(martingaleError(name)).toBeLessThan(1e-7)
    })
  }

  // Monthly small-g (a·dt = 1/6) misses by 1.1e-4 with the closed form: the
  // trinomial step matches the OU mean and variance exactly, but not the
  // exponential moment. It is the discretisation, not a bug: sub-steps shrink it
  // (measured 1.1e-4, 4.1e-6, 3.0e-9 for 1, 4, 16 sub-steps).
  it('small-g: the martingale error of drift ou is the tree discretisation and shrinks with subSteps', () => {
    const e = [1, 4, 16].map((subSteps) => martingaleError('small-g', { subSteps }))
    expect(e[0]).toBeGreaterThan(1e-5)
    expect(e[1]).toBeLessThan(e[0] / 10)
    expect(e[2]).toBeLessThan(e[1] / 100)
    expect(e[2]).toBeLessThan(1e-8)
  })
})

describe('drift lattice: c_k = log E[e^{X_k}] on the tree', () => {
  // Every preset of a tree model, coarse ones included: E[S_k] = F_k to round-off
  // (measured at most 1e-14).
  const treePresets = Object.keys(PRESETS).filter((name) => PRESETS[name].model !== 'nig')
  it('covers the g and g2d presets', () => {
    expect(treePresets).toEqual(expect.arrayContaining(['stopt-tree', 'daily-g', 'small-g', 'daily-g2d', 'weekly-g2d']))
  })
  for (const name of treePresets) {
    it(`${name}: E[S_k] = F_k within 1e-12 at every date`, () => {
      expect(martingaleError(name, { drift: 'lattice' })).toBeLessThan(1e-12)
    })
  }

  it('changes c_k only: same nodes and transitions, spots scaled by e^{c_ou − c_lattice} per date', () => {
    const ou = buildLattice(resolveParams('small-g')) as TreeLattice
    const lat = buildLattice(resolveParams('small-g', { drift: 'lattice' })) as TreeLattice
    expect(ou.c).toBe(ou.tree.c)
    expect(lat.c[0]).toBe(0)
    for (let k = 0; k < ou.dates; k++) {
      expect(lat.transitions(k)).toEqual(ou.transitions(k))
      const r = Math.exp(ou.c[k] - lat.c[k])
      for (let n = 0; n < ou.nodes(k); n++) expect(Math.abs(lat.spot(k, n) / (ou.spot(k, n) * r) - 1)).toBeLessThan(1e-14)
      // Close to the closed form: the tree's exponential moment is off by ~1e-4 at most.
      expect(Math.abs(lat.c[k] - ou.c[k])).toBeLessThan(2e-4)
    }
  })

  it('g2d with entries dropped from the product: computed on the product, where the factor sum would miss', () => {
    // Eight weekly dates with 10 sub-steps each: products of tiny entries fall below
    // 1e-9 and are dropped, so the product's marginals are no longer the products of
    // the factors'. The sum of the factors' lattice drifts would be off by 1.4e-7.
    const p = resolveParams('weekly-g2d', { N: 8, T: 8 / 52, subSteps: 10, drift: 'lattice' })
    const l = buildLattice(p) as ProductTreeLattice
    expect(maxMeanSpotDefect(l, forwardCurve(p))).toBeLessThan(1e-12)
    let gap = 0
    for (let k = 0; k <= p.N; k++) gap = Math.max(gap, Math.abs(l.c[k] - (l.f1.c[k] + l.f2.c[k])))
    expect(gap).toBeGreaterThan(1e-7)
  })
})

describe('product of two trees (g2d)', () => {
  for (const name of ['daily-g2d', 'weekly-g2d']) {
    it(`${name}: moments per date and row sums`, () => {
      const p = resolveParams(name)
      const l = buildLattice(p) as ProductTreeLattice
      expect(l).toBeInstanceOf(ProductTreeLattice)
      const dt = p.T / p.N
      const d1 = Math.exp(-p.a * dt)
      const d2 = Math.exp(-p.a2 * dt)
      const v = ouVariance(p.a, p.sigma, dt) + ouVariance(p.a2, p.sigma2, dt)
      const mean = (_x0: number, n: number, k: number) => {
        const w = l.f2.nodes(k)
        return d1 * l.f1.x(k)[Math.floor(n / w)] + d2 * l.f2.x(k)[n % w]
      }
      const d = maxMomentDefect(l, (k, n) => l.xAt(k, n), mean, v)
      expect(d.mean).toBeLessThan(1e-12)
      expect(d.variance).toBeLessThan(1e-12)
      expect(maxRowDefect(l)).toBeLessThan(1e-14)
      expect(l.nodes(p.N - 1)).toBe(l.f1.nodes(p.N - 1) * l.f2.nodes(p.N - 1))
    })
  }

  it('daily-g2d: E[S_k] = F_k within 1e-7 at every date (drift ou)', () => {
    expect(martingaleError('daily-g2d')).toBeLessThan(1e-7)
  })

  // Weekly steps miss by 6.8e-5 with the closed form; sub-steps shrink it like for small-g
  // (measured 6.8e-5, 2.5e-5, 1.1e-6 for 1, 2, 4 sub-steps).
  it('weekly-g2d: the martingale error of drift ou shrinks with subSteps', () => {
    const e = [1, 2, 4].map((subSteps) => martingaleError('weekly-g2d', { subSteps }))
    expect(e[0]).toBeGreaterThan(1e-5)
    expect(e[1]).toBeLessThan(e[0])
    expect(e[2]).toBeLessThan(e[1] / 10)
    expect(e[2]).toBeLessThan(2e-6)
  })

  it('transitions stay valid for the two most recently asked dates', () => {
    const l = buildLattice(resolveParams('weekly-g2d'))
    const a = l.transitions(10)
    const copyA = Float64Array.from(a.p)
    const b = l.transitions(11)
    expect(Float64Array.from(l.transitions(10).p)).toEqual(copyA)
    expect(l.transitions(11)).toBe(b)
    expect(Array.from(a.p)).toEqual(Array.from(copyA))
  })
})

describe('NIG lattice', () => {
  it('K1 matches reference values to 1e-15 relative, also around the switches between methods', () => {
    // e^z·K1(z) from mpmath at 30 digits.
    const ref: [number, number][] = [
      [0.001, 1000.9967345590684524], [0.1, 10.890182683049696574], [1, 1.6361534862632582465],
      [1.999, 1.0338018208600278609], [2, 1.0334768470686885732], [2.001, 1.0331521611403637097], [5, 0.60027385878831258294], [10, 0.41076657059578875113],
      [24.99, 0.25442968936652082749], [25, 0.25437732954208525059], [25.01, 0.25432500199117435367], [30, 0.23165412937771180227], [100, 0.12579995047957852933],
    ]
    for (const [z, v] of ref) expect(Math.abs(besselK1Scaled(z) / v - 1)).toBeLessThan(1e-15)
    expect(Math.abs(besselK1(1) / 0.6019072301972346 - 1)).toBeLessThan(1e-15)
  })

  it('the innovation density has mass 1, mean 0 and variance v', () => {
    const v = 0.0017
    const s = nigWithVariance(15, 3, v)
    // Simpson on a wide interval.
    const a = -4
    const b = 4
    const m = 400000
    const h = (b - a) / m
    const mom = [0, 0, 0]
    for (let i = 0; i <= m; i++) {
      const x = a + i * h
      const w = i === 0 || i === m ? 1 : i % 2 === 1 ? 4 : 2
      const f = w * nigDensity(s, x)
      mom[0] += f
      mom[1] += f * x
      mom[2] += f * x * x
    }
    for (let j = 0; j < 3; j++) mom[j] *= h / 3
    expect(Math.abs(mom[0] - 1)).toBeLessThan(1e-10)
    expect(Math.abs(mom[1])).toBeLessThan(1e-10)
    expect(Math.abs(mom[2] / v - 1)).toBeLessThan(1e-8)
  })

  it('daily-nig: rows sum to 1, E[S_k] = F_k to round-off, one root node', () => {
    const p = resolveParams('daily-nig')
    const l = buildLattice(p) as NigLattice
    expect(l).toBeInstanceOf(NigLattice)
    expect(l.nodes(0)).toBe(1)
    // v = 0.8²·(1 − e^{−2·4/365})/(2·4) = 0.0017343…, hx = √v = 0.041646…, and the grid
    // reaches nigWidth·σ/√(2a) = 6·0.8/√8 = 1.69706…: J = floor(1.69706/0.041646) = floor(40.75) = 40.
    expect(l.grid.v).toBeCloseTo(0.0017343486670, 14)
    expect(l.grid.J).toBe(40)
    expect(l.nodes(1)).toBe(81)
    expect(maxRowDefect(l)).toBeLessThan(1e-12)
    expect(maxMeanSpotDefect(l, forwardCurve(p))).toBeLessThan(1e-13)
  })
})
