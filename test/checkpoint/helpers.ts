// Builds real checkpoints in a store, the way the skeleton will.
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { bytesOf } from '../../src/domains/dtype.js'
import { encodeRankFile } from '../../src/checkpoint/format/rank-file.js'
import { encodeLight } from '../../src/checkpoint/light/codec.js'
import type { CheckpointStore } from '../../src/checkpoint/store/checkpoint-store.js'

export const FINGERPRINT = 'jacobi@1'
export const SETTINGS = { n: 64, tol: 1e-6, grid: { rows: 8, cols: 8 } }

export function tempDir(prefix: string): Promise<string> {
  return mkdtemp(join(tmpdir(), `molotof-${prefix}-`))
}

/** The payload rank `rank` saves at `step`: distinct per rank and step, so mixing files up is visible. */
export function payloadOf(rank: number, step: number): Float64Array {
  return Float64Array.from({ length: 100 }, (_, i) => rank * 1000 + step + i / 100)
}

/** Writes every rank's file of checkpoint `seq`, then (unless `commit` is false) the commit marker. */
export async function writeCheckpoint(store: CheckpointStore, seq: number, opts: { size?: number; step?: number; commit?: boolean; fingerprint?: string } = {}): Promise<void> {
  const size = opts.size ?? 3
  const step = opts.step ?? seq * 10
  const fingerprint = opts.fingerprint ?? FINGERPRINT
  const written = []
  for (let rank = 0; rank < size; rank++) {
    const parts = encodeRankFile({ fingerprint, skeleton: 0, step, rank, size, settings: SETTINGS }, [
      { name: 'write', kind: 'heavy', dtype: 'float64', box: { lower: [rank * 100], upper: [rank * 100 + 100] }, bytes: bytesOf(payloadOf(rank, step)) },
      { name: 'iterator', kind: 'light', bytes: encodeLight({ step, t: step * 0.1 }) },
    ])
    written.push(await store.writeRankFile(seq, rank, parts))
  }
  if (opts.commit === false) return
  await store.commit(seq, { seq, skeleton: 0, step, size, fingerprint, settings: SETTINGS, ranks: written, createdAt: new Date().toISOString() })
}
