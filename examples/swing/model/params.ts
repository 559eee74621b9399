import { ConfigError } from 'molotof'
import { gridSteps, injectionRates, withdrawalRates } from './rates.js'

/**
 * Every parameter of the gas-storage ("swing") valuation of SWING.md.
 * Get one with `resolveParams('daily-g', { nGrid: 200 })`; parameters that the
 * chosen model, curve or control does not use are simply ignored.
 */
export interface SwingParams {
  /** Price model: one OU factor on a trinomial tree, NIG innovations on a grid, or two OU factors. */
  model: 'g' | 'nig' | 'g2d'
  /** Number of decision dates (k = 0..N-1; date N is terminal). */
  N: number
  /** Horizon in years: t_k = k·T/N. */
  T: number
  /** Trinomial sub-steps per decision date (models g and g2d). */
  subSteps: number
  /** Mean reversion and volatility of the (first) OU factor. */
  a: number
  sigma: number
  /** Mean reversion and volatility of the second OU factor (g2d only). */
  a2: number
  sigma2: number
  /**
   * Drift correction c_k of the tree models g and g2d (S = F_k·exp(x − c_k)):
   * `ou` (the default) is SWING.md's closed form ½·σ²/(2a)·(1 − e^{−2a·t_k}), half
   * the continuous OU variance; `lattice` is log E[e^{X_k}] on the tree itself, so
   * that E[S_k] = F_k holds on the lattice to round-off even for coarse trees.
   * nig always computes c_k on its lattice: `lattice` is accepted there, `ou`
   * refused. Unset means the model's own (see driftOf); presets leave it unset.
   */
  drift?: 'ou' | 'lattice'
  /** Forward curve shape, see curves.ts. */
  curve: 'stopt' | 'seasonal' | 'flat'
  base: number
  amp: number
  /** Volume grid v_g = vmin + g·h, g = 0..nGrid, h = (vmax − vmin)/nGrid; v0 must be a grid point. */
  vmin: number
  vmax: number
  nGrid: number
  v0: number
  /** Maximal volume injected / withdrawn per date (before the seasonal factor). */
  injRate: number
  wdRate: number
  /** Costs per unit injected / withdrawn. */
  cInj: number
  cWd: number
  /** Rate profile over the year, see rates.ts. */
  rates: 'const' | 'seasonal'
  /** Control set: bang-bang with interpolation in volume, or all whole grid steps. */
  control: 'bang' | 'grid'
  /** NIG innovation shape (α > |β|) and lattice: h_x = nigDxFactor·sqrt(v), |x| ≤ nigWidth·σ/sqrt(2a). */
  nigAlpha: number
  nigBeta: number
  nigDxFactor: number
  nigWidth: number
  /** Simpson sub-intervals per lattice cell (even). */
  nigQuad: number
}

/** The keys of SwingParams, to reject misspelt overrides. */
export const PARAM_NAMES: readonly (keyof SwingParams)[] = [
  'model', 'N', 'T', 'subSteps', 'a', 'sigma', 'a2', 'sigma2', 'drift', 'curve', 'base', 'amp',
  'vmin', 'vmax', 'nGrid', 'v0', 'injRate', 'wdRate', 'cInj', 'cWd', 'rates', 'control',
  'nigAlpha', 'nigBeta', 'nigDxFactor', 'nigWidth', 'nigQuad',
]

// StOpt's testSimpleStorageTree setting (SWING.md); the unused fields get neutral values.
const STOPT_TREE: SwingParams = {
  model: 'g', N: 100, T: 1, subSteps: 2, a: 0.29, sigma: 0.94, a2: 1, sigma2: 0.3,
  curve: 'stopt', base: 50, amp: 0,
  vmin: 0, vmax: 90000, nGrid: 50, v0: 90000, injRate: 60000, wdRate: 45000, cInj: 0.35, cWd: 0.35,
  rates: 'const', control: 'bang',
  nigAlpha: 15, nigBeta: 3, nigDxFactor: 1, nigWidth: 6, nigQuad: 64,
}

const DAILY_G: SwingParams = {
  ...STOPT_TREE,
  N: 365, T: 1, subSteps: 1, a: 4, sigma: 0.8, curve: 'seasonal', base: 20, amp: 4,
  vmin: 0, vmax: 100, nGrid: 100, v0: 0, injRate: 1, wdRate: 2, cInj: 0.1, cWd: 0.1,
  rates: 'seasonal', control: 'grid',
}

const DAILY_G2D: SwingParams = { ...DAILY_G, model: 'g2d', a: 4, sigma: 0.7, a2: 1, sigma2: 0.3 }

/**
 * The presets of SWING.md (names and parameters fixed there) plus `large-g2d`, a
 * benchmark: daily-g2d's price model over half a year (N = 180, T = 0.5) with a
 * fine volume grid (nGrid = 2000, h = 0.05) and bang-bang control, so the halo
 * is 10 to 40 levels and changes with the season. Up to 2001 levels × 4725 price nodes:
 * 76 MB for one date's value function, 38 MB per rank on 2 ranks; a full-grid
 * serial run takes 20–25 s on one core.
 */
export const PRESETS: Record<string, SwingParams> = freezeAll({
  'stopt-tree': STOPT_TREE,
  'stopt-tree-flat': { ...STOPT_TREE, curve: 'flat', base: 50 },
  'stopt-tree-grid': { ...STOPT_TREE, injRate: 59400, control: 'grid' },
  'daily-g': DAILY_G,
  'daily-nig': { ...DAILY_G, model: 'nig', nigAlpha: 15, nigBeta: 3, nigDxFactor: 1, nigWidth: 6, nigQuad: 64 },
  'daily-g2d': DAILY_G2D,
  'weekly-g2d': { ...DAILY_G2D, N: 52, nGrid: 50, injRate: 8, wdRate: 14 },
  'small-g': {
    ...DAILY_G, N: 24, T: 1, subSteps: 1, a: 2, sigma: 0.6, curve: 'seasonal', base: 20, amp: 4,
    vmin: 0, vmax: 20, nGrid: 20, v0: 0, injRate: 3, wdRate: 5, cInj: 0.1, cWd: 0.1,
  },
  'large-g2d': { ...DAILY_G2D, N: 180, T: 0.5, nGrid: 2000, control: 'bang' },
})

// Presets are shared: freeze them (resolveParams returns copies).
function freezeAll(presets: Record<string, SwingParams>): Record<string, SwingParams> {
  for (const p of Object.values(presets)) Object.freeze(p)
  return Object.freeze(presets)
}

/**
 * The preset `presetName` with `overrides` applied, validated: throws ConfigError
 * (naming the parameter) for an unknown preset, an unknown parameter name or
 * invalid values. `resolveParams('small-g', { nGrid: 40 })`.
 */
export function resolveParams(presetName: string, overrides: Partial<SwingParams> = {}): SwingParams {
  const preset = Object.prototype.hasOwnProperty.call(PRESETS, presetName) ? PRESETS[presetName] : undefined
  if (preset === undefined) {
    throw new ConfigError(
      `invalid swing parameter "preset": unknown preset "${presetName}" (known: ${Object.keys(PRESETS).join(', ')})`,
    )
  }
  for (const key of Object.keys(overrides)) {
    if (!(PARAM_NAMES as readonly string[]).includes(key)) {
      throw new ConfigError(`invalid swing parameter "${key}": no such parameter (known: ${PARAM_NAMES.join(', ')})`)
    }
  }
  const p: SwingParams = { ...preset }
  for (const [key, value] of Object.entries(overrides)) {
    if (value !== undefined) (p as unknown as Record<string, unknown>)[key] = value
  }
  validateParams(p)
  return p
}

/** The drift correction in effect: `p.drift`, or the model's own (ou for g and g2d, lattice for nig). */
export function driftOf(p: SwingParams): 'ou' | 'lattice' {
  return p.drift ?? (p.model === 'nig' ? 'lattice' : 'ou')
}

/** Volume step h = (vmax − vmin)/nGrid. */
export function volumeStep(p: SwingParams): number {
  return (p.vmax - p.vmin) / p.nGrid
}

/** The grid level of v0 (validateParams guarantees it is one). */
export function v0Level(p: SwingParams): number {
  return Math.round((p.v0 - p.vmin) / volumeStep(p))
}

function fail(name: string, why: string): never {
  throw new ConfigError(`invalid swing parameter "${name}": ${why}`)
}

function oneOf<T extends string>(p: SwingParams, name: keyof SwingParams, allowed: readonly T[]): void {
  const v = p[name]
  if (!(allowed as readonly unknown[]).includes(v)) fail(name, `must be one of ${allowed.join(', ')} (got ${String(v)})`)
}

function finite(p: SwingParams, name: keyof SwingParams): number {
  const v = p[name]
  if (typeof v !== 'number' || !Number.isFinite(v)) fail(name, `must be a finite number (got ${String(v)})`)
  return v
}

function positive(p: SwingParams, name: keyof SwingParams): number {
  const v = finite(p, name)
  if (!(v > 0)) fail(name, `must be positive (got ${v})`)
  return v
}

function positiveInt(p: SwingParams, name: keyof SwingParams): number {
  const v = positive(p, name)
  if (!Number.isInteger(v)) fail(name, `must be a positive integer (got ${v})`)
  return v
}

function nonNegative(p: SwingParams, name: keyof SwingParams): number {
  const v = finite(p, name)
  if (v < 0) fail(name, `must not be negative (got ${v})`)
  return v
}

/**
 * Throws ConfigError naming the offending parameter unless `p` describes a valid
 * valuation. Besides ranges, it rejects a volume grid too coarse for the rates:
 * with control `grid`, a positive rate below one step h at every date can never move.
 */
export function validateParams(p: SwingParams): void {
  oneOf(p, 'model', ['g', 'nig', 'g2d'])
  oneOf(p, 'curve', ['stopt', 'seasonal', 'flat'])
  oneOf(p, 'rates', ['const', 'seasonal'])
  oneOf(p, 'control', ['bang', 'grid'])
  positiveInt(p, 'N')
  positive(p, 'T')
  positiveInt(p, 'subSteps')
  positive(p, 'a')
  positive(p, 'sigma')
  if (p.model === 'g2d') {
    positive(p, 'a2')
    positive(p, 'sigma2')
  }
  if (p.drift !== undefined) {
    oneOf(p, 'drift', ['ou', 'lattice'])
    if (p.model === 'nig' && p.drift === 'ou') {
      fail(
        'drift',
        'model nig always computes c_k = log E[e^{X_k}] on its lattice; the closed-form OU correction "ou" ' +
          'applies only to the tree models g and g2d (leave drift unset or use lattice)',
      )
    }
  }
  finite(p, 'base')
  finite(p, 'amp')
  const vmin = finite(p, 'vmin')
  const vmax = finite(p, 'vmax')
  if (!(vmin < vmax)) fail('vmax', `must exceed vmin (got vmin = ${vmin}, vmax = ${vmax})`)
  positiveInt(p, 'nGrid')
  const v0 = finite(p, 'v0')
  const h = volumeStep(p)
  const g = Math.round((v0 - vmin) / h)
  if (g < 0 || g > p.nGrid || Math.abs(vmin + g * h - v0) > 1e-9 * (vmax - vmin)) {
    fail('v0', `must be a point of the volume grid vmin + g·h, h = ${h}, g = 0..${p.nGrid} (got ${v0})`)
  }
  nonNegative(p, 'injRate')
  nonNegative(p, 'wdRate')
  nonNegative(p, 'cInj')
  nonNegative(p, 'cWd')
  if (p.model === 'nig') {
    const alpha = positive(p, 'nigAlpha')
    const beta = finite(p, 'nigBeta')
    if (!(Math.abs(beta) < alpha)) fail('nigBeta', `NIG needs |β| < α (got α = ${alpha}, β = ${beta})`)
    positive(p, 'nigDxFactor')
    positive(p, 'nigWidth')
    const q = positiveInt(p, 'nigQuad')
    if (q % 2 !== 0) fail('nigQuad', `Simpson's rule needs an even number of sub-intervals (got ${q})`)
  }
  if (p.control === 'grid') {
    coarse(p, 'injRate', 'injection', injectionRates(p), h)
    coarse(p, 'wdRate', 'withdrawal', withdrawalRates(p), h)
  }
}

// A zero rate is an explicit choice (no move that way); a positive one that rounds
// down to zero steps at every date is almost certainly a mistake.
function coarse(p: SwingParams, name: 'injRate' | 'wdRate', what: string, rates: Float64Array, h: number): void {
  if (p[name] === 0) return
  let most = 0
  for (let k = 0; k < rates.length; k++) most = Math.max(most, rates[k])
  if (gridSteps(most, h) === 0) {
    fail(
      name,
      `grid too coarse for the rates: the ${what} rate (at most ${most} per date) is below one volume step ` +
        `h = ${h}, so with control "grid" no ${what} is ever possible; raise nGrid or ${name}`,
    )
  }
}
