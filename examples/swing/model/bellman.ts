import { type PriceLattice, maxNodes } from './lattice.js'
import { type SwingParams, v0Level, volumeStep } from './params.js'
import { bangSteps, gridSteps, injectionRates, withdrawalRates } from './rates.js'

/**
 * A 2-D array of values addressed in global coordinates: V(g, n) for volume level g
 * and price node n is `data[offset + g*s0 + n*s1]` (a molotof Domain2D's
 * data/offset/s0/s1 fit directly).
 */
export interface Grid2 {
  data: Float64Array
  offset: number
  s0: number
  s1: number
}

/** Targets within this many grid steps of a level are taken as that level (see locate). */
export const SNAP = 1e-9

/**
 * Everything the per-date kernel needs that does not change from date to date,
 * plus reusable scratch buffers so that bellmanDate allocates nothing.
 * Build once per rank: `const ctx = createBellmanContext(params, lattice)`.
 */
export interface BellmanContext {
  readonly params: SwingParams
  readonly lattice: PriceLattice
  /** Volume step h and levels v_g = vmin + g·h, g = 0..nGrid. */
  readonly h: number
  readonly level: Float64Array
  /** inj_k, wd_k and the halos below/above of every decision date. */
  readonly inj: Float64Array
  readonly wd: Float64Array
  readonly below: Int32Array
  readonly above: Int32Array
  /** Continuation values: a ring of C rows (level-major) or one C column (node-major). */
  readonly cont: Float64Array
  /** S + cInj and S − cWd of the nodes of the current date. */
  readonly sInj: Float64Array
  readonly sWd: Float64Array
  /** Per volume level of the current call (bang): targets as (cell, weight) and amounts. */
  readonly qInj: Float64Array
  readonly iInj: Int32Array
  readonly wInj: Float64Array
  readonly qWd: Float64Array
  readonly iWd: Int32Array
  readonly wWd: Float64Array
  /** Per control of the current level (grid): C row offsets and −q. */
  readonly rowOff: Int32Array
  readonly negQ: Float64Array
}

/** Halo (volume levels below and above) that date k's Bellman step reads around its own levels. */
export function haloAt(p: SwingParams, k: number): { below: number; above: number } {
  const h = volumeStep(p)
  const inj = injectionRates(p)[k]
  const wd = withdrawalRates(p)[k]
  return p.control === 'grid'
    ? { below: gridSteps(wd, h), above: gridSteps(inj, h) }
    : { below: bangSteps(wd, h), above: bangSteps(inj, h) }
}

/**
 * The levels [lo[k], hi[k]) reachable from v0 at each date k = 0..N: the single
 * level of v0 at k = 0, then each window grown by haloAt(k) and clipped to the grid.
 * Computing V_k on these windows only gives the same V_0 bit for bit.
 */
export function reachableWindows(p: SwingParams): { lo: Int32Array; hi: Int32Array } {
  const lo = new Int32Array(p.N + 1)
  const hi = new Int32Array(p.N + 1)
  const g = v0Level(p)
  lo[0] = g
  hi[0] = g + 1
  for (let k = 0; k < p.N; k++) {
    const { below, above } = haloAt(p, k)
    lo[k + 1] = Math.max(0, lo[k] - below)
    hi[k + 1] = Math.min(p.nGrid + 1, hi[k] + above)
  }
  return { lo, hi }
}

/** The window [gLo, gHi) of reachableWindows at date k. */
export function reachableWindow(p: SwingParams, k: number): [number, number] {
  const w = reachableWindows(p)
  return [w.lo[k], w.hi[k]]
}

/** Creates the context of bellmanDate for `lattice` (scratch sized for every date). */
export function createBellmanContext(params: SwingParams, lattice: PriceLattice): BellmanContext {
  const N = params.N
  const nLevels = params.nGrid + 1
  const h = volumeStep(params)
  const level = new Float64Array(nLevels)
  for (let g = 0; g < nLevels; g++) level[g] = params.vmin + g * h
  const inj = injectionRates(params)
  const wd = withdrawalRates(params)
  const below = new Int32Array(N)
  const above = new Int32Array(N)
  let rowsMax = 0
  let ringMax = 0
  for (let k = 0; k < N; k++) {
    const halo = haloAt(params, k)
    below[k] = halo.below
    above[k] = halo.above
    rowsMax = Math.max(rowsMax, halo.below + halo.above + 1)
    ringMax = Math.max(ringMax, Math.min(nLevels, halo.below + halo.above + 1) * lattice.nodes(k))
  }
  const nodesMax = maxNodes(lattice)
  return {
    params, lattice, h, level, inj, wd, below, above,
    cont: new Float64Array(Math.max(ringMax, nLevels)),
    sInj: new Float64Array(nodesMax),
    sWd: new Float64Array(nodesMax),
    qInj: new Float64Array(nLevels),
    iInj: new Int32Array(nLevels),
    wInj: new Float64Array(nLevels),
    qWd: new Float64Array(nLevels),
    iWd: new Int32Array(nLevels),
    wWd: new Float64Array(nLevels),
    rowOff: new Int32Array(rowsMax),
    negQ: new Float64Array(rowsMax),
  }
}

/**
 * Where volume x falls for linear interpolation: cell i = clamp(floor((x − vmin)/h),
 * 0, nGrid − 1) and weight w = clamp((x − v_i)/h, 0, 1) (SWING.md). A target within
 * 1e-9 steps of a level is snapped onto it (w = 0, and i may then be nGrid): this
 * guards the floor against round-off on both sides, and with w = 0 the level i + 1
 * is never read, which keeps every read inside the halo of haloAt.
 * Writes (i, w) to out[at] of the two arrays.
 */
export function locate(ctx: BellmanContext, x: number, iOut: Int32Array, wOut: Float64Array, at: number): void {
  const p = ctx.params
  const r = (x - p.vmin) / ctx.h
  const rr = Math.round(r)
  if (Math.abs(r - rr) <= SNAP) {
    iOut[at] = rr < 0 ? 0 : rr > p.nGrid ? p.nGrid : rr
    wOut[at] = 0
    return
  }
  let i = Math.floor(r)
  if (i < 0) i = 0
  else if (i > p.nGrid - 1) i = p.nGrid - 1
  let w = (x - ctx.level[i]) / ctx.h
  if (w < 0) w = 0
  else if (w > 1) w = 1
  if (w === 1) {
    i++
    w = 0
  }
  iOut[at] = i
  wOut[at] = w
}

/**
 * The bang-bang controls of volume v at date k: fills qInj/iInj/wInj and qWd/iWd/wWd
 * at index `at` (q = +min(vmax − v, inj_k) and −min(v − vmin, wd_k); a zero amount
 * means the move is not available).
 */
export function bangControls(ctx: BellmanContext, k: number, v: number, at: number): void {
  const p = ctx.params
  const qi = Math.min(p.vmax - v, ctx.inj[k])
  ctx.qInj[at] = qi > 0 ? qi : 0
  if (qi > 0) locate(ctx, v + qi, ctx.iInj, ctx.wInj, at)
  const qw = -Math.min(v - p.vmin, ctx.wd[k])
  ctx.qWd[at] = qw < 0 ? qw : 0
  if (qw < 0) locate(ctx, v + qw, ctx.iWd, ctx.wWd, at)
}

/**
 * One backward Bellman step: V_k(g, n) for every node n < nodes(k) and level g in
 * [g0, g1), written to `out`, reading V_{k+1} from `next` (which must hold all
 * nodes of date k+1 and the levels [g0 − below, g1 − 1 + above] ∩ [0, nGrid] of
 * haloAt(k); for k = N − 1 it holds V_N = 0).
 *
 * Continuation values C_k(n, g') = Σ p·V_{k+1}(n', g') are summed in CSR order
 * from 0, then maximised per SWING.md (bang: q = 0 first, injection if strictly
 * better, then withdrawal if strictly better; grid: j ascending, first maximum).
 * Every cell's arithmetic depends only on V_{k+1}, never on g0/g1 or the memory
 * layout, so any split of the levels among ranks gives bit-identical values.
 * The loop order follows the layout: levels outer when nodes are the contiguous
 * index of `next`, nodes outer otherwise.
 */
export function bellmanDate(ctx: BellmanContext, k: number, next: Grid2, out: Grid2, g0: number, g1: number): void {
  if (g1 <= g0) return
  const p = ctx.params
  const nK = ctx.lattice.nodes(k)
  const spots = ctx.lattice.spots(k)
  const sInj = ctx.sInj
  const sWd = ctx.sWd
  for (let n = 0; n < nK; n++) {
    sInj[n] = spots[n] + p.cInj
    sWd[n] = spots[n] - p.cWd
  }
  if (p.control === 'bang') {
    for (let g = g0; g < g1; g++) bangControls(ctx, k, ctx.level[g], g)
  }
  if (Math.abs(next.s1) <= Math.abs(next.s0)) levelMajor(ctx, k, next, out, g0, g1)
  else nodeMajor(ctx, k, next, out, g0, g1)
}

// Levels outer: C rows (all nodes of one level) are computed once each into a ring
// of below + above + 1 rows, just before the first level that needs them.
function levelMajor(ctx: BellmanContext, k: number, next: Grid2, out: Grid2, g0: number, g1: number): void {
  const p = ctx.params
  const nK = ctx.lattice.nodes(k)
  const { rowPtr, col, p: prob } = ctx.lattice.transitions(k)
  const below = ctx.below[k]
  const above = ctx.above[k]
  const lo = Math.max(0, g0 - below)
  const hi = Math.min(p.nGrid + 1, g1 + above)
  const R = below + above + 1
  const ring = ctx.cont
  const nd = next.data
  const ns0 = next.s0
  const ns1 = next.s1
  const od = out.data
  const os1 = out.s1
  const sInj = ctx.sInj
  const sWd = ctx.sWd
  const bang = p.control === 'bang'
  let computed = lo
  for (let g = g0; g < g1; g++) {
    const need = Math.min(hi, g + above + 1)
    for (; computed < need; computed++) {
      const slot = ((computed - lo) % R) * nK
      const base = next.offset + computed * ns0
      for (let n = 0; n < nK; n++) {
        let s = 0
        const e1 = rowPtr[n + 1]
        for (let e = rowPtr[n]; e < e1; e++) s += prob[e] * nd[base + col[e] * ns1]
        ring[slot + n] = s
      }
    }
    const ob = out.offset + g * out.s0
    const r0 = ((g - lo) % R) * nK
    if (bang) {
      const qI = ctx.qInj[g]
      const qW = -ctx.qWd[g]
      const wI = ctx.wInj[g]
      const wW = ctx.wWd[g]
      const uI = 1 - wI
      const uW = 1 - wW
      const rIa = qI > 0 ? ((ctx.iInj[g] - lo) % R) * nK : 0
      const rIb = qI > 0 && wI !== 0 ? ((ctx.iInj[g] + 1 - lo) % R) * nK : rIa
      const rWa = qW > 0 ? ((ctx.iWd[g] - lo) % R) * nK : 0
      const rWb = qW > 0 && wW !== 0 ? ((ctx.iWd[g] + 1 - lo) % R) * nK : rWa
      for (let n = 0; n < nK; n++) {
        let best = ring[r0 + n]
        if (qI > 0) {
          const c = wI === 0 ? ring[rIa + n] : uI * ring[rIa + n] + wI * ring[rIb + n]
          const val = -qI * sInj[n] + c
          if (val > best) best = val
        }
        if (qW > 0) {
          const c = wW === 0 ? ring[rWa + n] : uW * ring[rWa + n] + wW * ring[rWb + n]
          const val = qW * sWd[n] + c
          if (val > best) best = val
        }
        od[ob + n * os1] = best
      }
    } else {
      const jMin = Math.max(-below, -g)
      const jMax = Math.min(above, p.nGrid - g)
      const cnt = jMax - jMin + 1
      const rowOff = ctx.rowOff
      const negQ = ctx.negQ
      for (let t = 0; t < cnt; t++) {
        const j = jMin + t
        rowOff[t] = ((g + j - lo) % R) * nK
        negQ[t] = -(j * ctx.h)
      }
      const tZero = -jMin
      for (let n = 0; n < nK; n++) {
        let best = -Infinity
        for (let t = 0; t < tZero; t++) {
          const val = negQ[t] * sWd[n] + ring[rowOff[t] + n]
          if (val > best) best = val
        }
        const v0 = ring[rowOff[tZero] + n]
        if (v0 > best) best = v0
        for (let t = tZero + 1; t < cnt; t++) {
          const val = negQ[t] * sInj[n] + ring[rowOff[t] + n]
          if (val > best) best = val
        }
        od[ob + n * os1] = best
      }
    }
  }
}

// Nodes outer: one C column (all needed levels of one node), then every level of
// that node. Same arithmetic per cell as levelMajor.
function nodeMajor(ctx: BellmanContext, k: number, next: Grid2, out: Grid2, g0: number, g1: number): void {
  const p = ctx.params
  const nK = ctx.lattice.nodes(k)
  const { rowPtr, col, p: prob } = ctx.lattice.transitions(k)
  const below = ctx.below[k]
  const above = ctx.above[k]
  const lo = Math.max(0, g0 - below)
  const hi = Math.min(p.nGrid + 1, g1 + above)
  const cc = ctx.cont
  const nd = next.data
  const ns0 = next.s0
  const ns1 = next.s1
  const od = out.data
  const os0 = out.s0
  const bang = p.control === 'bang'
  const h = ctx.h
  const nGrid = p.nGrid
  for (let n = 0; n < nK; n++) {
    for (let g = lo; g < hi; g++) cc[g - lo] = 0
    const e1 = rowPtr[n + 1]
    for (let e = rowPtr[n]; e < e1; e++) {
      const pe = prob[e]
      const base = next.offset + col[e] * ns1
      for (let g = lo; g < hi; g++) cc[g - lo] += pe * nd[base + g * ns0]
    }
    const sI = ctx.sInj[n]
    const sW = ctx.sWd[n]
    const ob = out.offset + n * out.s1
    if (bang) {
      for (let g = g0; g < g1; g++) {
        let best = cc[g - lo]
        const qI = ctx.qInj[g]
        if (qI > 0) {
          const i = ctx.iInj[g] - lo
          const w = ctx.wInj[g]
          const c = w === 0 ? cc[i] : (1 - w) * cc[i] + w * cc[i + 1]
          const val = -qI * sI + c
          if (val > best) best = val
        }
        const qW = -ctx.qWd[g]
        if (qW > 0) {
          const i = ctx.iWd[g] - lo
          const w = ctx.wWd[g]
          const c = w === 0 ? cc[i] : (1 - w) * cc[i] + w * cc[i + 1]
          const val = qW * sW + c
          if (val > best) best = val
        }
        od[ob + g * os0] = best
      }
    } else {
      for (let g = g0; g < g1; g++) {
        const jMin = Math.max(-below, -g)
        const jMax = Math.min(above, nGrid - g)
        let best = -Infinity
        for (let j = jMin; j < 0; j++) {
          const val = -(j * h) * sW + cc[g + j - lo]
          if (val > best) best = val
        }
        const v0 = cc[g - lo]
        if (v0 > best) best = v0
        for (let j = 1; j <= jMax; j++) {
          const val = -(j * h) * sI + cc[g + j - lo]
          if (val > best) best = val
        }
        od[ob + g * os0] = best
      }
    }
  }
}
