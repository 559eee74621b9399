import { forwardCurve } from './curves.js'
import type { SwingParams } from './params.js'

/**
 * Transitions from the nodes of date k to those of date k+1 in CSR form: node n's
 * successors are `col[rowPtr[n] .. rowPtr[n+1])` (ascending) with probabilities `p[...]`.
 */
export interface Csr {
  rowPtr: Int32Array
  col: Int32Array
  p: Float64Array
}

/**
 * What every price model produces: a recombining lattice of spot prices with
 * Markov transitions between consecutive decision dates. Built once, deterministic.
 * Node 0 of date 0 is the root (today's state).
 */
export interface PriceLattice {
  /** N: decision dates 0..N-1, date N terminal. */
  readonly dates: number
  /** Node count at date k, k = 0..N. */
  nodes(k: number): number
  /** Spot S_k(n) = F_k·exp(x_n − c_k), k < N. */
  spot(k: number, n: number): number
  /**
   * Spot prices of all nodes of date k (k < N) as one array; do not modify it.
   * Hot loops use this rather than spot().
   */
  spots(k: number): Float64Array
  /**
   * Transitions from date k to k+1. Implementations may build them on demand
   * into reused buffers: use the result before asking for two other dates.
   */
  transitions(k: number): Csr
}

/** The largest node count over dates 0..N. */
export function maxNodes(l: PriceLattice): number {
  let m = 0
  for (let k = 0; k <= l.dates; k++) m = Math.max(m, l.nodes(k))
  return m
}

/**
 * The one-node lattice of the intrinsic value: S_k = F_k, a single node per date
 * reached with probability 1. `valueOnLattice(p, flatLattice(p))` is the intrinsic value.
 */
export function flatLattice(p: SwingParams): PriceLattice {
  const f = forwardCurve(p)
  const spots: Float64Array[] = []
  for (let k = 0; k < p.N; k++) spots.push(Float64Array.of(f[k]))
  const one: Csr = { rowPtr: Int32Array.of(0, 1), col: Int32Array.of(0), p: Float64Array.of(1) }
  return {
    dates: p.N,
    nodes: () => 1,
    spot: (k) => f[k],
    spots: (k) => spots[k],
    transitions: () => one,
  }
}

/**
 * The marginal distributions of the lattice: `dist[k][n]` = probability of being at
 * node n at date k starting from the root, k = 0..N (summed in CSR order).
 */
export function marginals(l: PriceLattice): Float64Array[] {
  const out: Float64Array[] = [Float64Array.of(1)]
  for (let k = 0; k < l.dates; k++) {
    const from = out[k]
    const to = new Float64Array(l.nodes(k + 1))
    const { rowPtr, col, p } = l.transitions(k)
    for (let n = 0; n < from.length; n++) {
      const m = from[n]
      if (m === 0) continue
      for (let e = rowPtr[n]; e < rowPtr[n + 1]; e++) to[col[e]] += m * p[e]
    }
    out.push(to)
  }
  return out
}

/** Spot arrays from x-values: S_n = F·exp(x_n − c). Shared by the tree and NIG lattices. */
export function spotsFromFactor(f: number, x: Float64Array, c: number): Float64Array {
  const s = new Float64Array(x.length)
  for (let n = 0; n < x.length; n++) s[n] = f * Math.exp(x[n] - c)
  return s
}

/**
 * The drift correction computed on the lattice itself: c_k = log Σ_n π_k(n)·e^{x_k(n)},
 * k = 0..N, where π_k is the distribution at date k reached from the root by
 * propagating the node probabilities forward through transitions(0..k−1). With it,
 * E[F_k·exp(x − c_k)] = F_k on the lattice up to round-off, whatever its
 * discretisation error (entries dropped from the transitions included).
 * `x(k)` gives the factor values of date k's nodes. Probabilities stay in [0, 1];
 * the exponential moment is summed shifted by the largest x (log-sum-exp), so no
 * overflow or underflow whatever the width of the lattice.
 * Only transitions(k) is used, one date at a time, in increasing k.
 */
export function latticeDrift(
  l: Pick<PriceLattice, 'dates' | 'nodes' | 'transitions'>,
  x: (k: number) => Float64Array,
): Float64Array {
  const c = new Float64Array(l.dates + 1)
  let dist = Float64Array.of(1)
  for (let k = 0; ; k++) {
    c[k] = logExpMoment(dist, x(k))
    if (k === l.dates) break
    const next = new Float64Array(l.nodes(k + 1))
    const { rowPtr, col, p } = l.transitions(k)
    for (let n = 0; n < dist.length; n++) {
      const m = dist[n]
      if (m === 0) continue
      for (let e = rowPtr[n]; e < rowPtr[n + 1]; e++) next[col[e]] += m * p[e]
    }
    dist = next
  }
  return c
}

/** log Σ w_n·e^{x_n} over the nodes of positive weight, as max x + log Σ w_n·e^{x_n − max x}. */
function logExpMoment(w: Float64Array, x: Float64Array): number {
  if (w.length !== x.length) throw new Error(`latticeDrift: ${w.length} probabilities for ${x.length} nodes`)
  let top = -Infinity
  for (let n = 0; n < w.length; n++) if (w[n] > 0 && x[n] > top) top = x[n]
  let s = 0
  for (let n = 0; n < w.length; n++) if (w[n] > 0) s += w[n] * Math.exp(x[n] - top)
  return top + Math.log(s)
}
