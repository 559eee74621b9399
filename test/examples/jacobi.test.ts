import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { launch, runLocal } from '../../src/index.js'
import jacobi, { type JacobiResult } from '../../examples/jacobi/jacobi.js'
import { interiorSum, jacobiSerial } from '../../examples/jacobi/serial.js'
import harmonic from '../fixtures/harmonic.js'

/** Reassemble the interior from each rank's rows. */
function assemble(results: JacobiResult[], n: number): Float64Array {
  const out = new Float64Array(n * n)
  for (const r of results) out.set(r.rows!.values, (r.rows!.first - 1) * n)
  return out
}

function serialInterior(n: number, iterations: number): Float64Array {
  const g = jacobiSerial(n, iterations)
  const out = new Float64Array(n * n)
  for (let i = 1; i <= n; i++) out.set(g.subarray(i * (n + 2) + 1, i * (n + 2) + 1 + n), (i - 1) * n)
  return out
}

function expectBitIdentical(a: Float64Array, b: Float64Array): void {
  expect(a.length).toBe(b.length)
  const bitsA = new BigUint64Array(a.buffer, a.byteOffset, a.length)
  const bitsB = new BigUint64Array(b.buffer, b.byteOffset, b.length)
  let firstDiff = -1
  for (let k = 0; k < bitsA.length && firstDiff < 0; k++) if (bitsA[k] !== bitsB[k]) firstDiff = k
  expect(firstDiff).toBe(-1)
}

/** Max-norm of the discrete Laplace residual on the serial final grid (boundary included), from its definition. */
function serialResidual(n: number, iterations: number): number {
  const g = jacobiSerial(n, iterations)
  const w = n + 2
  let max = 0
  for (let i = 1; i <= n; i++) {
    for (let j = 1; j <= n; j++) max = Math.max(max, Math.abs(0.25 * (g[i * w + j - 1] + g[i * w + j + 1] + g[(i - 1) * w + j] + g[(i + 1) * w + j]) - g[i * w + j]))
  }
  return max
}

describe('examples/jacobi', () => {
  // The residual reads the neighbours' rows of the final grid: the skeleton's last halo exchange must have brought them.
  it.each([1, 2, 3, 4, 5])('reports the residual of the serial final grid on %i rank(s), also when resumed at the last step', async (ranks) => {
    const n = 8
    const iterations = 6
    const argv = ['--n', String(n), '--iterations', String(iterations)]
    const expected = serialResidual(n, iterations)
    expect(expected).toBeGreaterThan(0)
    const straight = await runLocal(jacobi, { ranks, argv })
    expect(straight.map((r) => r.residual)).toEqual(straight.map(() => expected))
    const dir = mkdtempSync(join(tmpdir(), 'molotof-jacobi-last-'))
    try {
      const ft = { dir, policy: { every: 1 }, keep: 2, resume: false }
      await expect(runLocal(jacobi, { ranks, argv, checkpoint: { ...ft, interrupt: { skeleton: 0, step: iterations - 1 } } })).rejects.toThrow(/interrupted/)
      const resumed = await runLocal(jacobi, { ranks, argv, checkpoint: { ...ft, resume: true }, onLog: () => {} })
      expect(resumed.map((r) => r.residual)).toEqual(resumed.map(() => expected))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it.each([1, 2, 3, 4])('is bit-identical to a plain serial loop on %i rank(s), several n (in-process ranks)', async (ranks) => {
    for (const n of [1, 3, 7, 13, 30]) {
      const iterations = 37
      const results = await runLocal(jacobi, { ranks, argv: ['--n', String(n), '--iterations', String(iterations), '--return-rows'] })
      expectBitIdentical(assemble(results, n), serialInterior(n, iterations))
      expect(Object.is(results[0].checksum, interiorSum(jacobiSerial(n, iterations), n))).toBe(true)
      expect(new Set(results.map((r) => r.checksum)).size).toBe(1)
    }
  })

  it.each([1, 2, 3, 4])('is bit-identical to the serial loop on %i worker thread(s), n not divisible by the rank count', async (ranks) => {
    const n = 61
    const iterations = 50
    const run = await launch<JacobiResult>('examples/jacobi/jacobi.ts', {
      ranks,
      argv: ['--n', String(n), '--iterations', String(iterations), '--return-rows'],
      onLog: () => {},
    })
    expectBitIdentical(assemble(run.values, n), serialInterior(n, iterations))
    expect(run.text).toContain(`checksum ${interiorSum(jacobiSerial(n, iterations), n)}`)
  })

  it('converges to the analytic harmonic solution: the error shrinks with iterations', async () => {
    const errors: number[] = []
    for (const iterations of [10, 100, 400, 1600]) {
      const [err] = await runLocal(harmonic, { ranks: 3, argv: ['--n', '14', '--iterations', String(iterations)] })
      errors.push(err)
    }
    for (let k = 1; k < errors.length; k++) expect(errors[k]).toBeLessThan(errors[k - 1])
    expect(errors[errors.length - 1]).toBeLessThan(1e-6)
  })
})
