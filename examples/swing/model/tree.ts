import { type Csr, type PriceLattice, latticeDrift, spotsFromFactor } from './lattice.js'

/** Transition entries at or below this are dropped (SWING.md), without renormalising. */
export const TREE_DROP = 1e-9

const SQRT_2_3 = Math.sqrt(2 / 3)

/**
 * A Hull–White trinomial tree for dX = −aX dt + σ dW, X_0 = 0, built exactly as in
 * the "Exact construction" paragraph of SWING.md, with `subSteps` equal sub-steps per
 * decision date. Sub-date i has 2·nb[i] + 1 nodes at x = (n − nb[i])·dx[i];
 * decision date k is sub-date k·subSteps.
 *
 * ```ts
 * const tree = buildOuTree(0.29, 0.94, 1, 100, 2)
 * const lattice = new TreeLattice(tree, forwardCurve(params))
 * ```
 */
export interface OuTree {
  readonly a: number
  readonly sigma: number
  readonly N: number
  readonly subSteps: number
  /** Sub-dates s_i = i·T/(N·subSteps), i = 0..N·subSteps. */
  readonly subDates: Float64Array
  /** Node spacing dx_i (dx_0 = 0). */
  readonly dx: Float64Array
  /** Nodes below 0 at each sub-date. */
  readonly nb: Int32Array
  /** Decision dates t_k = k·T/N, k = 0..N. */
  readonly t: Float64Array
  /** c_k = ½·σ²/(2a)·(1 − e^{−2a·t_k}), k = 0..N. */
  readonly c: Float64Array
}

/** Builds the sub-date grid, the spacings dx_i and the widths nb_i of an OU tree. */
export function buildOuTree(a: number, sigma: number, T: number, N: number, subSteps: number): OuTree {
  const m = N * subSteps
  const s = new Float64Array(m + 1)
  for (let i = 0; i <= m; i++) s[i] = (i * T) / m
  const dx = new Float64Array(m + 1)
  dx[0] = sigma * Math.sqrt((3 / (2 * a)) * (1 - Math.exp(-2 * a * s[0])))
  for (let i = 1; i <= m; i++) dx[i] = sigma * Math.sqrt((3 / (2 * a)) * (1 - Math.exp(-2 * a * (s[i] - s[i - 1]))))
  const nb = new Int32Array(m + 1)
  nb[0] = 0
  if (m >= 1) nb[1] = 1
  for (let i = 1; i < m; i++) {
    const ratio = (dx[i] / dx[i + 1]) * Math.exp(-a * (s[i + 1] - s[i]))
    nb[i + 1] = Math.trunc(-SQRT_2_3 + nb[i] * (ratio - 1)) + nb[i] + 1
  }
  const t = new Float64Array(N + 1)
  const c = new Float64Array(N + 1)
  for (let k = 0; k <= N; k++) {
    t[k] = (k * T) / N
    c[k] = 0.5 * ((sigma * sigma) / (2 * a)) * (1 - Math.exp(-2 * a * t[k]))
  }
  return { a, sigma, N, subSteps, subDates: s, dx, nb, t, c }
}

/** Factor values x_n = (n − nb_i)·dx_i of the nodes of sub-date i. */
export function subDateX(tree: OuTree, i: number): Float64Array {
  const nb = tree.nb[i]
  const x = new Float64Array(2 * nb + 1)
  for (let n = 0; n < x.length; n++) x[n] = (n - nb) * tree.dx[i]
  return x
}

/** Factor values of the nodes of decision date k. */
export function dateX(tree: OuTree, k: number): Float64Array {
  return subDateX(tree, k * tree.subSteps)
}

/**
 * One trinomial sub-step from sub-date i to i+1: node n goes to facing[n] − 1,
 * facing[n], facing[n] + 1 with probabilities down[n], mid[n], up[n].
 */
export interface TrinomialStep {
  facing: Int32Array
  down: Float64Array
  mid: Float64Array
  up: Float64Array
}

/** The trinomial branching of sub-date i (SWING.md, "Exact construction"). */
export function trinomialStep(tree: OuTree, i: number): TrinomialStep {
  const nbI = tree.nb[i]
  const nbJ = tree.nb[i + 1]
  const size = 2 * nbI + 1
  const facing = new Int32Array(size)
  const down = new Float64Array(size)
  const mid = new Float64Array(size)
  const up = new Float64Array(size)
  facing[nbI] = nbJ
  down[nbI] = 1 / 6
  mid[nbI] = 2 / 3
  up[nbI] = 1 / 6
  if (nbI > 0) {
    const E = (Math.exp(-tree.a * (tree.subDates[i + 1] - tree.subDates[i])) * tree.dx[i]) / tree.dx[i + 1]
    for (let j = 1; j <= nbI; j++) {
      const u = Math.trunc(-SQRT_2_3 + j * (E - 1))
      const e = u + j - j * E
      const e2 = e * e
      const pPlus = 0.5 * (1 / 3 + e2 + e)
      const pMid = 2 / 3 - e2
      const pMinus = 0.5 * (1 / 3 + e2 - e)
      // Node above the middle: conditional mean lies e below its facing node.
      facing[nbI + j] = nbJ + u + j
      down[nbI + j] = pPlus
      mid[nbI + j] = pMid
      up[nbI + j] = pMinus
      // Its mirror image below the middle.
      facing[nbI - j] = nbJ - u - j
      down[nbI - j] = pMinus
      mid[nbI - j] = pMid
      up[nbI - j] = pPlus
    }
  }
  return { facing, down, mid, up }
}

/**
 * Transitions from decision date k to k+1: the product of the sub-step matrices
 * (summed node by node in ascending order, down/mid/up within a node), entries
 * ≤ 1e-9 dropped.
 */
export function dateTransitions(tree: OuTree, k: number): Csr {
  const m = tree.subSteps
  const i0 = k * m
  const steps: TrinomialStep[] = []
  let width = 0
  for (let s = 0; s <= m; s++) width = Math.max(width, 2 * tree.nb[i0 + s] + 1)
  for (let s = 0; s < m; s++) steps.push(trinomialStep(tree, i0 + s))
  const nFrom = 2 * tree.nb[i0] + 1
  let cur = new Float64Array(width)
  let nxt = new Float64Array(width)
  const rowPtr = new Int32Array(nFrom + 1)
  const cols: number[] = []
  const probs: number[] = []
  for (let n0 = 0; n0 < nFrom; n0++) {
    cur.fill(0)
    cur[n0] = 1
    let lo = n0
    let hi = n0
    for (let s = 0; s < m; s++) {
      const { facing, down, mid, up } = steps[s]
      nxt.fill(0)
      let nlo = Number.MAX_SAFE_INTEGER
      let nhi = -1
      for (let n = lo; n <= hi; n++) {
        const mass = cur[n]
        if (mass === 0) continue
        const f = facing[n]
        nxt[f - 1] += mass * down[n]
        nxt[f] += mass * mid[n]
        nxt[f + 1] += mass * up[n]
        if (f - 1 < nlo) nlo = f - 1
        if (f + 1 > nhi) nhi = f + 1
      }
      const tmp = cur
      cur = nxt
      nxt = tmp
      lo = nlo
      hi = nhi
    }
    for (let n = lo; n <= hi; n++) {
      if (cur[n] > TREE_DROP) {
        cols.push(n)
        probs.push(cur[n])
      }
    }
    rowPtr[n0 + 1] = cols.length
  }
  return { rowPtr, col: Int32Array.from(cols), p: Float64Array.from(probs) }
}

/**
 * Which drift correction c_k a tree lattice uses: `ou`, the closed form of SWING.md
 * (OuTree.c), or `lattice`, log E[e^{X_k}] on the lattice itself (latticeDrift).
 */
export type Drift = 'ou' | 'lattice'

/**
 * The `g` price lattice: one OU tree, S_k(n) = F_k·exp(x_n − c_k). `forward` holds
 * F_k for k = 0..N-1 (forwardCurve(params)); `drift` chooses c_k (default `ou`,
 * SWING.md's tree.c). Everything is precomputed.
 */
export class TreeLattice implements PriceLattice {
  readonly dates: number
  readonly tree: OuTree
  /** The drift correction c_k used in the spots, k = 0..N: tree.c itself for `ou`. */
  readonly c: Float64Array
  private readonly xs: Float64Array[] = []
  private readonly spotArr: Float64Array[] = []
  private readonly trans: Csr[] = []

  constructor(tree: OuTree, forward: Float64Array, drift: Drift = 'ou') {
    this.tree = tree
    this.dates = tree.N
    for (let k = 0; k <= tree.N; k++) this.xs.push(dateX(tree, k))
    for (let k = 0; k < tree.N; k++) this.trans.push(dateTransitions(tree, k))
    this.c = drift === 'ou' ? tree.c : latticeDrift(this, (k) => this.xs[k])
    for (let k = 0; k < tree.N; k++) this.spotArr.push(spotsFromFactor(forward[k], this.xs[k], this.c[k]))
  }
  nodes(k: number): number {
    return this.xs[k].length
  }
  /** Factor values of the nodes of date k, k = 0..N (do not modify). */
  x(k: number): Float64Array {
    return this.xs[k]
  }
  spot(k: number, n: number): number {
    return this.spotArr[k][n]
  }
  spots(k: number): Float64Array {
    return this.spotArr[k]
  }
  transitions(k: number): Csr {
    return this.trans[k]
  }
}
