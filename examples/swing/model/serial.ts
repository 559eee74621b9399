import { type BellmanContext, type Grid2, bellmanDate, createBellmanContext, reachableWindows } from './bellman.js'
import { type PriceLattice, flatLattice, maxNodes } from './lattice.js'
import { buildLattice } from './models.js'
import { type SwingParams, v0Level } from './params.js'

/** Options of the serial valuation. */
export interface SerialOptions {
  /** Compute only the volumes reachable from v0 (reachableWindows) instead of the full grid. */
  window?: boolean
  /** Keep V_k of every date (for simulatePolicy). */
  store?: boolean
  /** Memory layout of the two work arrays: 'C' = nodes contiguous (default), 'F' = levels contiguous. */
  layout?: 'C' | 'F'
}

/**
 * V_k of every date k = 0..N on the levels [lo[k], hi[k]) that were computed:
 * V_k(g, n) = values[k][(g − lo[k])·nodes(k) + n]. V_N is all zeros.
 */
export interface StoredValues {
  lo: Int32Array
  hi: Int32Array
  values: Float64Array[]
}

/**
 * The serial backward induction on `lattice`: returns V_0(root, v0) and, with
 * `store`, every date's values. Allocates its two work arrays (sized for the
 * largest date) and alternates them; in window mode the unused parts are filled
 * with NaN first, so a read outside the window would show in the result.
 */
export function valueOnLattice(
  params: SwingParams,
  lattice: PriceLattice,
  opts: SerialOptions = {},
  ctx: BellmanContext = createBellmanContext(params, lattice),
): { value: number; stored?: StoredValues } {
  const N = params.N
  const nLevels = params.nGrid + 1
  const win = opts.window ? reachableWindows(params) : undefined
  const lo = new Int32Array(N + 1)
  const hi = new Int32Array(N + 1)
  for (let k = 0; k <= N; k++) {
    lo[k] = win ? win.lo[k] : 0
    hi[k] = win ? win.hi[k] : nLevels
  }
  const size = nLevels * maxNodes(lattice)
  let nextBuf = new Float64Array(size)
  let outBuf = new Float64Array(size)
  const layout = opts.layout ?? 'C'
  const gridOf = (buf: Float64Array, k: number): Grid2 => {
    const nodes = lattice.nodes(k)
    const levels = hi[k] - lo[k]
    return layout === 'C'
      ? { data: buf, offset: -lo[k] * nodes, s0: nodes, s1: 1 }
      : { data: buf, offset: -lo[k], s0: 1, s1: levels }
  }
  const stored: Float64Array[] | undefined = opts.store ? new Array<Float64Array>(N + 1) : undefined
  if (win) nextBuf.fill(NaN)
  nextBuf.fill(0, 0, (hi[N] - lo[N]) * lattice.nodes(N)) // V_N = 0 on date N's levels
  if (stored) stored[N] = new Float64Array((hi[N] - lo[N]) * lattice.nodes(N))
  for (let k = N - 1; k >= 0; k--) {
    if (win) outBuf.fill(NaN)
    const next = gridOf(nextBuf, k + 1)
    const out = gridOf(outBuf, k)
    bellmanDate(ctx, k, next, out, lo[k], hi[k])
    if (stored) stored[k] = copyOut(out, lo[k], hi[k], lattice.nodes(k))
    const tmp = nextBuf
    nextBuf = outBuf
    outBuf = tmp
  }
  const root = gridOf(nextBuf, 0)
  const value = root.data[root.offset + v0Level(params) * root.s0]
  return stored ? { value, stored: { lo, hi, values: stored } } : { value }
}

function copyOut(g: Grid2, lo: number, hi: number, nodes: number): Float64Array {
  const a = new Float64Array((hi - lo) * nodes)
  for (let l = lo; l < hi; l++) {
    for (let n = 0; n < nodes; n++) a[(l - lo) * nodes + n] = g.data[g.offset + l * g.s0 + n * g.s1]
  }
  return a
}

/** The intrinsic value: the same DP on the one-node lattice S_k = F_k. */
export function intrinsicValue(params: SwingParams, opts: SerialOptions = {}): number {
  return valueOnLattice(params, flatLattice(params), { ...opts, store: false }).value
}

/**
 * Builds the lattice and values the storage serially:
 * `const { value, intrinsic } = valueSwing(resolveParams('stopt-tree'))`.
 */
export function valueSwing(
  params: SwingParams,
  opts: SerialOptions = {},
): { value: number; intrinsic: number; lattice: PriceLattice; stored?: StoredValues } {
  const lattice = buildLattice(params)
  const { value, stored } = valueOnLattice(params, lattice, opts)
  const intrinsic = intrinsicValue(params, opts)
  return stored ? { value, intrinsic, lattice, stored } : { value, intrinsic, lattice }
}
