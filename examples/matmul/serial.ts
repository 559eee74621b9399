import { aAt, bAt } from './matrices.js'

/**
 * C = rounds · A·B by a plain triple loop, independent of molotof: the
 * reference for tests. Row-major n×n.
 */
export function matmulSerial(n: number, rounds = 1): Float64Array {
  const c = new Float64Array(n * n)
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < n; i++) {
      for (let k = 0; k < n; k++) {
        const aik = aAt(i, k)
        for (let j = 0; j < n; j++) c[i * n + j] += aik * bAt(k, j)
      }
    }
  }
  return c
}
