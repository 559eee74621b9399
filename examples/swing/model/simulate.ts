import { bangControls, createBellmanContext, locate } from './bellman.js'
import type { PriceLattice } from './lattice.js'
import { type SwingParams, v0Level } from './params.js'
import { Rng } from './rng.js'
import type { StoredValues } from './serial.js'

/** Mean and standard error of the simulated gains of the optimal policy. */
export interface SimulationResult {
  mean: number
  stdErr: number
  paths: number
}

/**
 * Forward Monte Carlo of the optimal policy on the lattice: every path starts at the
 * root with v0; at each date the control is re-optimised at the path's volume (off
 * the grid for `bang`) from the stored V_{k+1} (continuation values summed exactly
 * as in the Bellman kernel), its gain is added, and the next node is drawn from
 * the transition row. The mean should match V_0 up to the Monte Carlo error.
 *
 * ```ts
 * const r = valueOnLattice(p, lattice, { store: true })
 * const mc = simulatePolicy(p, lattice, r.stored!, { paths: 20000, seed: 1 })
 * ```
 */
export function simulatePolicy(
  params: SwingParams,
  lattice: PriceLattice,
  stored: StoredValues,
  opts: { paths: number; seed: number },
): SimulationResult {
  const ctx = createBellmanContext(params, lattice)
  const rng = new Rng(opts.seed)
  const P = opts.paths
  const node = new Int32Array(P)
  const vol = new Float64Array(P).fill(params.v0)
  const lev = new Int32Array(P).fill(v0Level(params))
  const total = new Float64Array(P)
  const h = ctx.h
  const here = new Int32Array(1)
  const hereW = new Float64Array(1)

  let table = new Float64Array(0)
  let cum = new Float64Array(0)
  for (let k = 0; k < params.N; k++) {
    const { rowPtr, col, p } = lattice.transitions(k)
    const V = stored.values[k + 1]
    const lo = stored.lo[k + 1]
    const hi = stored.hi[k + 1]
    const nn = lattice.nodes(k + 1)
    const nK = lattice.nodes(k)
    const spots = lattice.spots(k)
    // C_k(n, g) on the stored levels of date k+1, summed in CSR order from 0 like bellmanDate.
    if (table.length < (hi - lo) * nK) table = new Float64Array((hi - lo) * nK)
    for (let g = lo; g < hi; g++) {
      const base = (g - lo) * nn
      for (let n = 0; n < nK; n++) {
        let s = 0
        for (let e = rowPtr[n]; e < rowPtr[n + 1]; e++) s += p[e] * V[base + col[e]]
        table[(g - lo) * nK + n] = s
      }
    }
    // Cumulative transition probabilities, for sampling by bisection.
    if (cum.length < p.length) cum = new Float64Array(p.length)
    for (let n = 0; n < nK; n++) {
      let acc = 0
      for (let e = rowPtr[n]; e < rowPtr[n + 1]; e++) cum[e] = acc += p[e]
    }
    for (let path = 0; path < P; path++) {
      const n = node[path]
      const S = spots[n]
      if (params.control === 'bang') {
        const v = vol[path]
        bangControls(ctx, k, v, 0)
        // q = 0: continuation at the current, possibly off-grid, volume.
        locate(ctx, v, here, hereW, 0)
        let best = interpC(table, nK, lo, hi, n, here[0], hereW[0])
        let q = 0
        const qI = ctx.qInj[0]
        if (qI > 0) {
          const val = -qI * (S + params.cInj) + interpC(table, nK, lo, hi, n, ctx.iInj[0], ctx.wInj[0])
          if (val > best) {
            best = val
            q = qI
          }
        }
        const qW = -ctx.qWd[0]
        if (qW > 0) {
          const val = qW * (S - params.cWd) + interpC(table, nK, lo, hi, n, ctx.iWd[0], ctx.wWd[0])
          if (val > best) {
            best = val
            q = -qW
          }
        }
        total[path] += q > 0 ? -q * (S + params.cInj) : q < 0 ? -q * (S - params.cWd) : 0
        let nv = v + q
        if (nv < params.vmin) nv = params.vmin
        if (nv > params.vmax) nv = params.vmax
        vol[path] = nv
      } else {
        const g = lev[path]
        const jMin = Math.max(-ctx.below[k], -g)
        const jMax = Math.min(ctx.above[k], params.nGrid - g)
        let best = -Infinity
        let jBest = 0
        for (let j = jMin; j <= jMax; j++) {
          const c = contC(table, nK, lo, hi, n, g + j)
          const val = j < 0 ? -(j * h) * (S - params.cWd) + c : j > 0 ? -(j * h) * (S + params.cInj) + c : c
          if (val > best) {
            best = val
            jBest = j
          }
        }
        const q = jBest * h
        total[path] += jBest > 0 ? -q * (S + params.cInj) : jBest < 0 ? -q * (S - params.cWd) : 0
        lev[path] = g + jBest
      }
      // Move along the lattice: first entry whose cumulative probability exceeds u·(row mass).
      let a = rowPtr[n]
      let b = rowPtr[n + 1] - 1
      const u = rng.uniform() * cum[b]
      while (a < b) {
        const m = (a + b) >> 1
        if (cum[m] > u) b = m
        else a = m + 1
      }
      node[path] = col[a]
    }
  }
  let mean = 0
  for (let i = 0; i < P; i++) mean += total[i]
  mean /= P
  let ss = 0
  for (let i = 0; i < P; i++) ss += (total[i] - mean) * (total[i] - mean)
  const sd = Math.sqrt(ss / Math.max(1, P - 1))
  return { mean, stdErr: sd / Math.sqrt(P), paths: P }
}

// C_k(n, g) from the date's table of continuation values (levels [lo, hi)).
function contC(table: Float64Array, nK: number, lo: number, hi: number, n: number, g: number): number {
  if (g < lo || g >= hi) throw new Error(`simulation left the stored levels: level ${g} not in [${lo}, ${hi})`)
  return table[(g - lo) * nK + n]
}

// C at an off-grid volume, with the kernel's interpolation formula.
function interpC(table: Float64Array, nK: number, lo: number, hi: number, n: number, i: number, w: number): number {
  return w === 0 ? contC(table, nK, lo, hi, n, i) : (1 - w) * contC(table, nK, lo, hi, n, i) + w * contC(table, nK, lo, hi, n, i + 1)
}
