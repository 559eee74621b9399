/**
 * First index of part `k` when `n` items are split into `parts` nearly equal,
 * contiguous parts (the first `n % parts` parts get one more). `splitPoint(n, p, p) === n`.
 *
 * ```ts
 * const lo = splitPoint(10, 3, ctx.rank), hi = splitPoint(10, 3, ctx.rank + 1)  // 0..4, 4..7, 7..10
 * ```
 */
export function splitPoint(n: number, parts: number, k: number): number {
  const q = Math.floor(n / parts)
  const r = n % parts
  return k * q + Math.min(k, r)
}
