import { type PriceLattice, maxNodes } from './lattice.js'
import { type SwingParams, v0Level, volumeStep } from './params.js'
import { bangSteps, gridSteps, injectionRate, injectionRates, withdrawalRate, withdrawalRates } from './rates.js'

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
  /** Continuation values: a ring of C rows, one row (all nodes) per volume level. */
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
  const inj = injectionRate(p, k)
  const wd = withdrawalRate(p, k)
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
    ringMax = Math.max(ringMax, Math.min(nLevels, ringRows(halo.below, halo.above)) * lattice.nodes(k))
  }
  const nodesMax = maxNodes(lattice)
  return {
    params, lattice, h, level, inj, wd, below, above,
    cont: new Float64Array(ringMax),
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
 * haloAt(k); for k = N − 1 it holds V_N = 0). Allocation-free.
 *
 * Continuation values C_k(n, g') = Σ p·V_{k+1}(n', g') are summed in CSR order
 * starting from 0, then V = max over the controls of SWING.md of gain + C (bang:
 * linear interpolation of C in volume; grid: whole steps). Every cell's arithmetic
 * depends only on V_{k+1}, never on g0/g1 or the memory layout, so any split of
 * the levels among ranks gives bit-identical values.
 *
 * The tie rules of SWING.md choose among equal values, so they do not affect V
 * (max over floats is exact and order-free; −0 and NaN cannot occur because C
 * sums start from +0); they matter for the policy, see simulatePolicy.
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
  const below = ctx.below[k]
  const above = ctx.above[k]
  const lo = Math.max(0, g0 - below)
  const hi = Math.min(p.nGrid + 1, g1 + above)
  const RR = ringRows(below, above)
  let computed = lo
  for (let g = g0; g < g1; g++) {
    // C rows for levels up to g + above, computed once each, eight or four at a time when possible.
    const need = Math.min(hi, g + above + 1)
    while (computed < need) {
      if (computed + 8 <= hi) {
        continuationRows8(ctx, k, next, computed, lo, RR)
        computed += 8
      } else if (computed + 4 <= hi) {
        continuationRows4(ctx, k, next, computed, lo, RR)
        computed += 4
      } else {
        continuationRow(ctx, k, next, computed, lo, RR)
        computed++
      }
    }
    if (p.control === 'bang') bangLevel(ctx, k, out, g, lo, RR)
    else if (below <= 2 && above <= 2) gridLevelSmall(ctx, out, g, below, above, lo, RR, nK)
    else gridLevelGeneral(ctx, out, g, below, above, lo, RR, nK)
  }
}

// The ring holds the C rows of levels [computed − RR, computed): enough for the
// rows g − below .. g + above of the current level even right after a batch of 8.
function ringRows(below: number, above: number): number {
  return below + above + 8
}

// Row slot of level l in the ring.
function slotOf(l: number, lo: number, RR: number, nK: number): number {
  return ((l - lo) % RR) * nK
}

function continuationRow(ctx: BellmanContext, k: number, next: Grid2, l: number, lo: number, RR: number): void {
  const nK = ctx.lattice.nodes(k)
  const { rowPtr, col, p: prob } = ctx.lattice.transitions(k)
  const ring = ctx.cont
  const nd = next.data
  const ns1 = next.s1
  const base = next.offset + l * next.s0
  const slot = slotOf(l, lo, RR, nK)
  for (let n = 0; n < nK; n++) {
    let s = 0
    const e1 = rowPtr[n + 1]
    for (let e = rowPtr[n]; e < e1; e++) s += prob[e] * nd[base + col[e] * ns1]
    ring[slot + n] = s
  }
}

// Four consecutive levels at once: the same sums per cell, with four independent
// accumulators to hide the add latency and share the loads of p and col (one row
// alone is bound by the latency of its chain of additions).
function continuationRows4(ctx: BellmanContext, k: number, next: Grid2, l: number, lo: number, RR: number): void {
  const nK = ctx.lattice.nodes(k)
  const { rowPtr, col, p: prob } = ctx.lattice.transitions(k)
  const ring = ctx.cont
  const nd = next.data
  const ns0 = next.s0
  const ns1 = next.s1
  const b0 = next.offset + l * ns0
  const b1 = b0 + ns0
  const b2 = b1 + ns0
  const b3 = b2 + ns0
  const o0 = slotOf(l, lo, RR, nK)
  const o1 = slotOf(l + 1, lo, RR, nK)
  const o2 = slotOf(l + 2, lo, RR, nK)
  const o3 = slotOf(l + 3, lo, RR, nK)
  for (let n = 0; n < nK; n++) {
    let s0 = 0
    let s1 = 0
    let s2 = 0
    let s3 = 0
    const e1 = rowPtr[n + 1]
    for (let e = rowPtr[n]; e < e1; e++) {
      const pe = prob[e]
      const c = col[e] * ns1
      s0 += pe * nd[b0 + c]
      s1 += pe * nd[b1 + c]
      s2 += pe * nd[b2 + c]
      s3 += pe * nd[b3 + c]
    }
    ring[o0 + n] = s0
    ring[o1 + n] = s1
    ring[o2 + n] = s2
    ring[o3 + n] = s3
  }
}

// Eight consecutive levels at once, as continuationRows4.
function continuationRows8(ctx: BellmanContext, k: number, next: Grid2, l: number, lo: number, RR: number): void {
  const nK = ctx.lattice.nodes(k)
  const { rowPtr, col, p: prob } = ctx.lattice.transitions(k)
  const ring = ctx.cont
  const nd = next.data
  const ns0 = next.s0
  const ns1 = next.s1
  const b0 = next.offset + l * ns0
  const b1 = b0 + ns0
  const b2 = b1 + ns0
  const b3 = b2 + ns0
  const b4 = b3 + ns0
  const b5 = b4 + ns0
  const b6 = b5 + ns0
  const b7 = b6 + ns0
  const o0 = slotOf(l, lo, RR, nK)
  const o1 = slotOf(l + 1, lo, RR, nK)
  const o2 = slotOf(l + 2, lo, RR, nK)
  const o3 = slotOf(l + 3, lo, RR, nK)
  const o4 = slotOf(l + 4, lo, RR, nK)
  const o5 = slotOf(l + 5, lo, RR, nK)
  const o6 = slotOf(l + 6, lo, RR, nK)
  const o7 = slotOf(l + 7, lo, RR, nK)
  for (let n = 0; n < nK; n++) {
    let s0 = 0
    let s1 = 0
    let s2 = 0
    let s3 = 0
    let s4 = 0
    let s5 = 0
    let s6 = 0
    let s7 = 0
    const e1 = rowPtr[n + 1]
    for (let e = rowPtr[n]; e < e1; e++) {
      const pe = prob[e]
      const c = col[e] * ns1
      s0 += pe * nd[b0 + c]
      s1 += pe * nd[b1 + c]
      s2 += pe * nd[b2 + c]
      s3 += pe * nd[b3 + c]
      s4 += pe * nd[b4 + c]
      s5 += pe * nd[b5 + c]
      s6 += pe * nd[b6 + c]
      s7 += pe * nd[b7 + c]
    }
    ring[o0 + n] = s0
    ring[o1 + n] = s1
    ring[o2 + n] = s2
    ring[o3 + n] = s3
    ring[o4 + n] = s4
    ring[o5 + n] = s5
    ring[o6 + n] = s6
    ring[o7 + n] = s7
  }
}

// Bang-bang at level g: max of C(g), injection and withdrawal with interpolated C.
// A move that is not available is replaced by a copy of q = 0 (amount 0, weight 0,
// row of g), which equals C(g) exactly and so leaves the max unchanged; with w = 0
// the interpolation u·a + w·b is exactly a.
function bangLevel(ctx: BellmanContext, k: number, out: Grid2, g: number, lo: number, RR: number): void {
  const nK = ctx.lattice.nodes(k)
  const ring = ctx.cont
  const sInj = ctx.sInj
  const sWd = ctx.sWd
  const od = out.data
  const os1 = out.s1
  const ob = out.offset + g * out.s0
  const r0 = slotOf(g, lo, RR, nK)
  const qI = ctx.qInj[g]
  const wI = qI > 0 ? ctx.wInj[g] : 0
  const uI = 1 - wI
  const rIa = qI > 0 ? slotOf(ctx.iInj[g], lo, RR, nK) : r0
  const rIb = wI !== 0 ? slotOf(ctx.iInj[g] + 1, lo, RR, nK) : rIa
  const qW = -ctx.qWd[g]
  const wW = qW > 0 ? ctx.wWd[g] : 0
  const uW = 1 - wW
  const rWa = qW > 0 ? slotOf(ctx.iWd[g], lo, RR, nK) : r0
  const rWb = wW !== 0 ? slotOf(ctx.iWd[g] + 1, lo, RR, nK) : rWa
  for (let n = 0; n < nK; n++) {
    const vInj = -qI * sInj[n] + (uI * ring[rIa + n] + wI * ring[rIb + n])
    const vWd = qW * sWd[n] + (uW * ring[rWa + n] + wW * ring[rWb + n])
    od[ob + n * os1] = Math.max(ring[r0 + n], vInj, vWd)
  }
}

// Grid control with at most two steps each way (the daily presets): five candidates
// unrolled; steps cut off by the grid bounds are replaced by copies of q = 0.
function gridLevelSmall(
  ctx: BellmanContext, out: Grid2, g: number, below: number, above: number, lo: number, RR: number, nK: number,
): void {
  const ring = ctx.cont
  const sInj = ctx.sInj
  const sWd = ctx.sWd
  const od = out.data
  const os1 = out.s1
  const ob = out.offset + g * out.s0
  const h = ctx.h
  const nGrid = ctx.params.nGrid
  const r0 = slotOf(g, lo, RR, nK)
  const okD1 = below >= 1 && g >= 1
  const okD2 = below >= 2 && g >= 2
  const okU1 = above >= 1 && g + 1 <= nGrid
  const okU2 = above >= 2 && g + 2 <= nGrid
  // −q per step, as in gridLevelGeneral: −(j·h).
  const qD1 = okD1 ? h : 0
  const qD2 = okD2 ? 2 * h : 0
  const qU1 = okU1 ? -h : 0
  const qU2 = okU2 ? -(2 * h) : 0
  const rD1 = okD1 ? slotOf(g - 1, lo, RR, nK) : r0
  const rD2 = okD2 ? slotOf(g - 2, lo, RR, nK) : r0
  const rU1 = okU1 ? slotOf(g + 1, lo, RR, nK) : r0
  const rU2 = okU2 ? slotOf(g + 2, lo, RR, nK) : r0
  for (let n = 0; n < nK; n++) {
    const sw = sWd[n]
    const si = sInj[n]
    od[ob + n * os1] = Math.max(
      qD2 * sw + ring[rD2 + n],
      qD1 * sw + ring[rD1 + n],
      ring[r0 + n],
      qU1 * si + ring[rU1 + n],
      qU2 * si + ring[rU2 + n],
    )
  }
}

// Grid control, any number of steps: j ascending from −min(below, g) to min(above, nGrid − g).
function gridLevelGeneral(
  ctx: BellmanContext, out: Grid2, g: number, below: number, above: number, lo: number, RR: number, nK: number,
): void {
  const ring = ctx.cont
  const sInj = ctx.sInj
  const sWd = ctx.sWd
  const od = out.data
  const os1 = out.s1
  const ob = out.offset + g * out.s0
  const jMin = Math.max(-below, -g)
  const jMax = Math.min(above, ctx.params.nGrid - g)
  const cnt = jMax - jMin + 1
  const rowOff = ctx.rowOff
  const negQ = ctx.negQ
  for (let t = 0; t < cnt; t++) {
    const j = jMin + t
    rowOff[t] = slotOf(g + j, lo, RR, nK)
    negQ[t] = -(j * ctx.h)
  }
  const tZero = -jMin
  for (let n = 0; n < nK; n++) {
    let best = ring[rowOff[tZero] + n]
    const sw = sWd[n]
    for (let t = 0; t < tZero; t++) best = Math.max(best, negQ[t] * sw + ring[rowOff[t] + n])
    const si = sInj[n]
    for (let t = tZero + 1; t < cnt; t++) best = Math.max(best, negQ[t] * si + ring[rowOff[t] + n])
    od[ob + n * os1] = best
  }
}
