import { besselK1Scaled } from './bessel.js'
import { type Csr, type PriceLattice, marginals, spotsFromFactor } from './lattice.js'

/** Transition entries below this are dropped after renormalisation (SWING.md). */
export const NIG_DROP = 1e-14

/** Normal inverse Gaussian parameters; gamma = sqrt(α² − β²). */
export interface NigShape {
  alpha: number
  beta: number
  delta: number
  mu: number
  gamma: number
}

/**
 * The NIG(α, β, δ, μ) law with zero mean and variance v: δ = v·γ³/α², μ = −δβ/γ.
 * `nigDensity(nigWithVariance(15, 3, 0.002), x)`.
 */
export function nigWithVariance(alpha: number, beta: number, v: number): NigShape {
  const gamma = Math.sqrt(alpha * alpha - beta * beta)
  const delta = (v * gamma * gamma * gamma) / (alpha * alpha)
  return { alpha, beta, delta, mu: (-delta * beta) / gamma, gamma }
}

/**
 * NIG density αδ·K1(α·r)/(π·r)·exp(δγ + β(x − μ)), r = sqrt(δ² + (x − μ)²),
 * evaluated with the scaled K1 so that far tails do not underflow early.
 */
export function nigDensity(s: NigShape, x: number): number {
  const d = x - s.mu
  const r = Math.sqrt(s.delta * s.delta + d * d)
  const z = s.alpha * r
  return ((s.alpha * s.delta) / (Math.PI * r)) * besselK1Scaled(z) * Math.exp(s.delta * s.gamma + s.beta * d - z)
}

/**
 * The fixed grid of the `nig` model: x_j = j·hx for |j| ≤ J, with one-date
 * innovation variance v = σ²(1 − e^{−2a·dt})/(2a), hx = nigDxFactor·sqrt(v) and
 * J = floor(nigWidth·σ/sqrt(2a)/hx).
 */
export interface NigGrid {
  dt: number
  /** e^{−a·dt}: X_{k+1} = decay·X_k + ε. */
  decay: number
  v: number
  hx: number
  J: number
  shape: NigShape
}

/** The grid and innovation law for OU parameters (a, σ), N dates over T and the NIG settings. */
export function nigGrid(
  a: number, sigma: number, T: number, N: number,
  alpha: number, beta: number, dxFactor: number, width: number,
): NigGrid {
  const dt = T / N
  const v = (sigma * sigma * (1 - Math.exp(-2 * a * dt))) / (2 * a)
  const hx = dxFactor * Math.sqrt(v)
  const J = Math.floor((width * sigma) / Math.sqrt(2 * a) / hx + 1e-9)
  return { dt, decay: Math.exp(-a * dt), v, hx, J, shape: nigWithVariance(alpha, beta, v) }
}

/**
 * Transition probabilities of node x_i = i·hx (i in −J..J) to the cells
 * [x_j − hx/2, x_j + hx/2] of the grid: composite Simpson with `quad` sub-intervals
 * per cell of the density of ε = X' − decay·x_i. The tails fold into the end cells:
 * the cells beyond ±J are integrated the same way and added to the end cell, out to
 * |ε| ≤ R = 10·sqrt(v) + 40/(α − |β|), beyond which the NIG mass is below 1e-17.
 * The row is then divided by its sum, and entries below 1e-14 are dropped.
 * Returns the kept cells' indices (0..2J, ascending) and probabilities.
 */
export function nigRow(g: NigGrid, i: number, quad: number): { col: number[]; p: number[] } {
  const { hx, J, shape } = g
  const centre = g.decay * i * hx
  const R = 10 * Math.sqrt(g.v) + 40 / (shape.alpha - Math.abs(shape.beta))
  const jLo = Math.min(-J, Math.floor((centre - R) / hx))
  const jHi = Math.max(J, Math.ceil((centre + R) / hx))
  const hs = hx / quad
  const e0 = (jLo - 0.5) * hx - centre // lower edge of cell jLo, in ε
  const mass = new Float64Array(2 * J + 1)
  // f at the cell's left edge is shared with the previous cell.
  let fLeft = nigDensity(shape, e0)
  for (let j = jLo; j <= jHi; j++) {
    const base = (j - jLo) * quad
    let odd = 0
    let even = 0
    for (let q = 1; q < quad; q++) {
      const f = nigDensity(shape, e0 + (base + q) * hs)
      if (q % 2 === 1) odd += f
      else even += f
    }
    const fRight = nigDensity(shape, e0 + (base + quad) * hs)
    const cell = (hs / 3) * (fLeft + 4 * odd + 2 * even + fRight)
    fLeft = fRight
    const target = j < -J ? 0 : j > J ? 2 * J : j + J
    mass[target] += cell
  }
  let sum = 0
  for (let n = 0; n <= 2 * J; n++) sum += mass[n]
  const col: number[] = []
  const p: number[] = []
  for (let n = 0; n <= 2 * J; n++) {
    const q = mass[n] / sum
    if (q >= NIG_DROP) {
      col.push(n)
      p.push(q)
    }
  }
  return { col, p }
}

/**
 * The `nig` price lattice: date 0 is the single root x = 0; dates 1..N have the
 * 2J + 1 grid nodes x_j (node n ↔ j = n − J). The transition matrix is the same for
 * every date (the root uses the row of x = 0). c_k = log E[e^{X_k}] is computed on the
 * lattice from the marginal distributions, so E[S_k] = F_k up to round-off.
 */
export class NigLattice implements PriceLattice {
  readonly dates: number
  readonly grid: NigGrid
  readonly c: Float64Array
  private readonly xGrid: Float64Array
  private readonly full: Csr
  private readonly root: Csr
  private readonly spotArr: Float64Array[] = []

  constructor(
    a: number, sigma: number, T: number, N: number,
    nig: { alpha: number; beta: number; dxFactor: number; width: number; quad: number },
    forward: Float64Array,
  ) {
    this.dates = N
    this.grid = nigGrid(a, sigma, T, N, nig.alpha, nig.beta, nig.dxFactor, nig.width)
    const J = this.grid.J
    this.xGrid = new Float64Array(2 * J + 1)
    for (let n = 0; n <= 2 * J; n++) this.xGrid[n] = (n - J) * this.grid.hx
    const rowPtr = new Int32Array(2 * J + 2)
    const cols: number[] = []
    const ps: number[] = []
    let rootRow: { col: number[]; p: number[] } | undefined
    for (let n = 0; n <= 2 * J; n++) {
      const row = nigRow(this.grid, n - J, nig.quad)
      if (n === J) rootRow = row
      for (let e = 0; e < row.col.length; e++) {
        cols.push(row.col[e])
        ps.push(row.p[e])
      }
      rowPtr[n + 1] = cols.length
    }
    this.full = { rowPtr, col: Int32Array.from(cols), p: Float64Array.from(ps) }
    const r = rootRow as { col: number[]; p: number[] }
    this.root = { rowPtr: Int32Array.of(0, r.col.length), col: Int32Array.from(r.col), p: Float64Array.from(r.p) }
    const dist = marginals(this)
    this.c = new Float64Array(N + 1)
    for (let k = 0; k <= N; k++) {
      const x = this.x(k)
      let m = 0
      for (let n = 0; n < x.length; n++) m += dist[k][n] * Math.exp(x[n])
      this.c[k] = Math.log(m)
    }
    for (let k = 0; k < N; k++) this.spotArr.push(spotsFromFactor(forward[k], this.x(k), this.c[k]))
  }
  nodes(k: number): number {
    return k === 0 ? 1 : this.xGrid.length
  }
  /** Factor values of the nodes of date k (do not modify). */
  x(k: number): Float64Array {
    return k === 0 ? ZERO : this.xGrid
  }
  spot(k: number, n: number): number {
    return this.spotArr[k][n]
  }
  spots(k: number): Float64Array {
    return this.spotArr[k]
  }
  transitions(k: number): Csr {
    return k === 0 ? this.root : this.full
  }
}

const ZERO = Float64Array.of(0)
