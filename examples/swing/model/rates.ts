import type { SwingParams } from './params.js'

// Rates as multiples of the grid step are computed with a tiny guard so that a rate
// that is a whole number of steps in exact arithmetic (0.3 / 0.1) is not rounded
// to one step fewer (or more) by floating point.
const STEP_GUARD = 1e-9
const HALO_GUARD = 1e-10

/**
 * Whether decision date k is in "summer": phase k/N in [0.25, 0.75), tested in
 * integers (4k ≥ N and 4k < 3N) so that no rounding can move a boundary.
 */
export function isSummer(k: number, N: number): boolean {
  return 4 * k >= N && 4 * k < 3 * N
}

/** Maximal injection at date k: injRate, halved in winter for the `seasonal` profile. */
export function injectionRate(p: SwingParams, k: number): number {
  return p.rates === 'seasonal' && !isSummer(k, p.N) ? p.injRate * 0.5 : p.injRate
}

/** Maximal withdrawal at date k: wdRate, halved in summer for the `seasonal` profile. */
export function withdrawalRate(p: SwingParams, k: number): number {
  return p.rates === 'seasonal' && isSummer(k, p.N) ? p.wdRate * 0.5 : p.wdRate
}

/** inj_k for k = 0..N-1. */
export function injectionRates(p: SwingParams): Float64Array {
  const r = new Float64Array(p.N)
  for (let k = 0; k < p.N; k++) r[k] = injectionRate(p, k)
  return r
}

/** wd_k for k = 0..N-1. */
export function withdrawalRates(p: SwingParams): Float64Array {
  const r = new Float64Array(p.N)
  for (let k = 0; k < p.N; k++) r[k] = withdrawalRate(p, k)
  return r
}

/** Whole grid steps a rate allows with control `grid`: floor(rate/h), guarded against round-off. */
export function gridSteps(rate: number, h: number): number {
  return Math.floor(rate / h + STEP_GUARD)
}

/**
 * Grid levels a move of at most `rate` can touch with control `bang` (linear
 * interpolation reads the two levels around the target): ceil(rate/h), guarded.
 * The Bellman kernel snaps targets within 1e-9 steps of a level onto it, which
 * makes this guard safe (see bellman.ts).
 */
export function bangSteps(rate: number, h: number): number {
  return Math.max(0, Math.ceil(rate / h - HALO_GUARD))
}
