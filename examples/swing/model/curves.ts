import { match } from 'ts-pattern'
import type { SwingParams } from './params.js'

/**
 * Forward price F_k of decision date k (SWING.md):
 * `stopt` 50 + 20·sin(π·k·52/N), `seasonal` base + amp·cos(2πk/N), `flat` base.
 */
export function forwardAt(p: SwingParams, k: number): number {
  return match(p.curve)
    .with('stopt', () => 50 + 20 * Math.sin((Math.PI * k * 52) / p.N))
    .with('seasonal', () => p.base + p.amp * Math.cos((2 * Math.PI * k) / p.N))
    .with('flat', () => p.base)
    .exhaustive()
}

/** F_k for k = 0..N (the entry for the terminal date N is never used for a decision). */
export function forwardCurve(p: SwingParams): Float64Array {
  const f = new Float64Array(p.N + 1)
  for (let k = 0; k <= p.N; k++) f[k] = forwardAt(p, k)
  return f
}
