import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { CheckpointStore } from '../../src/checkpoint/store/checkpoint-store.js'
import { launch, runLocal, Supervisor, type SupervisorEvent, type Transport } from '../../src/index.js'
import matmul, { type MatmulResult } from '../../examples/matmul/matmul.js'
import { aAt, bAt } from '../../examples/matmul/matrices.js'
import { matmulSerial } from '../../examples/matmul/serial.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
const freshDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'molotof-matmul-'))
  dirs.push(d)
  return d
}

/** Reassemble C from each rank's rows. */
function assemble(results: MatmulResult[], n: number): Float64Array {
  const c = new Float64Array(n * n)
  for (const r of results) c.set(r.rows!.values, r.rows!.first * n)
  return c
}

function expectBitIdentical(a: Float64Array, b: Float64Array): void {
  expect(a.length).toBe(b.length)
  const x = new BigUint64Array(a.buffer, a.byteOffset, a.length)
  const y = new BigUint64Array(b.buffer, b.byteOffset, b.length)
  let first = -1
  for (let k = 0; k < x.length && first < 0; k++) if (x[k] !== y[k]) first = k
  expect(first).toBe(-1)
}

/** Σ C = rounds · Σ_k (Σ_i A[i][k]) (Σ_j B[k][j]): an O(n²) check that does not multiply matrices. */
function checksumBySums(n: number, rounds: number): number {
  let s = 0
  for (let k = 0; k < n; k++) {
    let colA = 0
    let rowB = 0
    for (let i = 0; i < n; i++) colA += aAt(i, k)
    for (let j = 0; j < n; j++) rowB += bAt(k, j)
    s += colA * rowB
  }
  return rounds * s
}

describe('examples/matmul (data circulation)', () => {
  it.each([1, 2, 3, 4])('C is bit-identical to a plain triple loop on %i rank(s), several n (in-process ranks)', async (ranks) => {
    for (const n of [1, 3, 7, 24]) {
      const rounds = 2
      const results = await runLocal(matmul, { ranks, argv: ['--n', String(n), '--rounds', String(rounds), '--return-rows'] })
      expectBitIdentical(assemble(results, n), matmulSerial(n, rounds))
      expect(results[0].checksum).toBe(checksumBySums(n, rounds))
    }
  })

  for (const transport of ['threads', 'processes'] as Transport[]) {
    it.each([1, 2, 3, 4])(`C is bit-identical to the triple loop on %i rank(s), ${transport} transport`, async (ranks) => {
      const n = 29
      const run = await launch<MatmulResult>('examples/matmul/matmul.ts', { ranks, transport, argv: ['--n', String(n), '--return-rows'], onLog: () => {} })
      expectBitIdentical(assemble(run.values, n), matmulSerial(n))
      expect(run.text).toContain(`checksum ${checksumBySums(n, 1)}`)
    })
  }

  it('a minimal checkpoint holds C and the iterator, nothing of B', async () => {
    const dir = freshDir()
    const n = 30
    await runLocal(matmul, { ranks: 3, argv: ['--n', String(n)], checkpoint: { dir, policy: { every: 1 }, keep: 1, resume: false } })
    const store = new CheckpointStore(dir)
    const [last] = (await store.list()).slice(-1)
    expect(last.complete).toBe(true)
    for (let rank = 0; rank < 3; rank++) {
      const file = await store.loadRankFile(last.seq, rank)
      expect([...file.entries.keys()].sort()).toEqual(['C', 'iterator'])
      // Rank r's rows of C: 10 rows of 30 float64.
      expect(file.entries.get('C')!.bytes.byteLength).toBe(10 * n * 8)
    }
  })

  for (const transport of ['threads', 'processes'] as Transport[]) {
    it(`recovers from failures in every phase to the failure-free C (${transport}, 3 ranks)`, async () => {
      const n = 31
      const rounds = 2
      const events: SupervisorEvent[] = []
      const r = await new Supervisor<MatmulResult>('examples/matmul/matmul.ts', {
        ranks: 3,
        transport,
        argv: ['--n', String(n), '--rounds', String(rounds), '--return-rows'],
        checkpoint: { dir: freshDir(), policy: { every: 1 }, keep: 2, resume: false },
        inject: [
          { rank: 1, skeleton: 0, step: 1, phase: 'calculate' },
          { rank: 2, skeleton: 0, step: 3, phase: 'route' },
          { rank: 0, skeleton: 0, step: 5, phase: 'checkpoint' },
        ],
        onLog: () => {},
        onEvent: (e) => events.push(e),
      }).run()
      expect(r.kind).toBe('done')
      if (r.kind !== 'done') return
      expectBitIdentical(assemble(r.values, n), matmulSerial(n, rounds))
      expect(r.failures.map((f) => [f.rank, f.step, f.phase])).toEqual([
        [1, 1, 'calculate'],
        [2, 3, 'route'],
        [0, 5, 'checkpoint'],
      ])
      // Lines: the checkpoint before each failure (step 5's was torn by the failure, so step 4's).
      // Failures two steps apart: in a ring a rank can run at most one step ahead of a dead neighbour.
      expect(events.filter((e) => e.event === 'recovery-line').map((e) => (e as { step: number }).step)).toEqual([0, 2, 4])
    })
  }
})
