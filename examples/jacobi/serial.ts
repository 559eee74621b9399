/**
 * A plain serial Jacobi solver with the same boundary and update as the
 * example, independent of molotof: the reference for tests and benchmarks.
 * Returns the full (n+2)×(n+2) grid, row-major.
 */
export function jacobiSerial(n: number, iterations: number, top: (j: number) => number = () => 1): Float64Array {
  const w = n + 2
  let u = new Float64Array(w * w)
  let v = new Float64Array(w * w)
  for (let j = 0; j < w; j++) {
    u[j] = top(j)
    v[j] = top(j)
  }
  for (let it = 0; it < iterations; it++) {
    for (let i = 1; i <= n; i++) {
      const r = i * w
      for (let j = 1; j <= n; j++) {
        v[r + j] = 0.25 * (u[r + j - 1] + u[r + j + 1] + u[r - w + j] + u[r + w + j])
      }
    }
    const t = u
    u = v
    v = t
  }
  return u
}

/** Sum of the interior in row-major order. */
export function interiorSum(grid: Float64Array, n: number): number {
  const w = n + 2
  let s = 0
  for (let i = 1; i <= n; i++) for (let j = 1; j <= n; j++) s += grid[i * w + j]
  return s
}
