// Pruning a level whose files are no delta files themselves (XOR parity slices, or a node directory holding
// only some ranks' files) keeps every checkpoint a kept checkpoint's chain needs, as its commit marker records
// each rank's chain: a lost rank's base and deltas stay rebuildable from the others.
import { readdir, rm } from 'node:fs/promises'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { encodeRankFile } from '../../../src/checkpoint/format/rank-file.js'
import { CheckpointStore } from '../../../src/checkpoint/store/checkpoint-store.js'
import { FINGERPRINT, tempDir } from '../helpers.js'

const SETTINGS = { kernel: 'test' }

/** Checkpoints from..n−1 of `size` ranks, each rank's file a plain one (as a parity slice is), the marker recording each rank's chain. */
async function writeChains(store: CheckpointStore, chains: number[][][], from = 0): Promise<void> {
  const size = chains.length
  for (let seq = from; seq < chains[0].length; seq++) {
    const written = []
    for (let rank = 0; rank < size; rank++) {
      const parts = encodeRankFile({ fingerprint: FINGERPRINT, skeleton: 0, step: seq, rank, size, settings: SETTINGS }, [{ name: 'parity', kind: 'heavy', dtype: 'uint8', bytes: new Uint8Array(16).fill(seq) }])
      const w = await store.writeRankFile(seq, rank, parts)
      const needs = chains[rank][seq]
      written.push({ rank, file: w.file, bytes: w.bytes, headerChecksum: w.headerChecksum, ...(needs.length > 0 ? { needs } : {}) })
    }
    await store.commit(seq, { seq, skeleton: 0, step: seq, size, fingerprint: FINGERPRINT, settings: SETTINGS, ranks: written, createdAt: new Date().toISOString() })
  }
}

/** One rank's chains from its full/delta choices: a delta needs the chain of the file before it and that file. */
function chainsOf(full: boolean[]): number[][] {
  const out: number[][] = []
  for (let seq = 0; seq < full.length; seq++) out.push(seq === 0 || full[seq] ? [] : [...out[seq - 1], seq - 1])
  return out
}

const present = async (dir: string) => (await readdir(dir)).filter((n) => n.startsWith('ckpt-')).map((n) => Number(n.slice(5))).sort((a, b) => a - b)

describe('pruning keeps every checkpoint a kept chain needs, on any rank, whatever the files hold', () => {
  it('a base and the deltas before the newest stay while a kept delta of any rank needs them; the others go', async () => {
    const dir = await tempDir('prune-chains')
    try {
      const store = new CheckpointStore(dir)
      // Rank 0: full at 0, deltas 1..3; rank 1: full at 0 and 2, delta at 1 and 3. Keep 1 (checkpoint 3).
      const ranks = [chainsOf([true, false, false, false, true]), chainsOf([true, false, true, false, true])]
      await writeChains(store, ranks.map((c) => c.slice(0, 4)))
      expect((await store.prune(1)).removed).toEqual([])
      expect(await present(dir)).toEqual([0, 1, 2, 3])
      // Checkpoint 4 full on both ranks: nothing before it is needed any more.
      await writeChains(store, ranks, 4)
      expect((await store.prune(1)).removed).toEqual([0, 1, 2, 3])
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('property: after prune(keep), the newest keep checkpoints and every one their ranks\' chains need are left, nothing else', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 2, max: 7 }), fc.integer({ min: 1, max: 3 }), fc.array(fc.array(fc.boolean(), { minLength: 7, maxLength: 7 }), { minLength: 1, maxLength: 3 }), async (n, keep, choices) => {
        const dir = await tempDir('prune-chains-prop')
        try {
          const chains = choices.map((c) => chainsOf(c.slice(0, n)))
          await writeChains(new CheckpointStore(dir), chains)
          await new CheckpointStore(dir).prune(keep)
          const newest = Array.from({ length: Math.min(keep, n) }, (_, i) => n - 1 - i)
          const needed = new Set(newest)
          for (const s of newest) for (const rank of chains) for (const need of rank[s]) needed.add(need)
          expect(await present(dir)).toEqual([...needed].sort((a, b) => a - b))
        } finally {
          await rm(dir, { recursive: true, force: true })
        }
      }),
      { numRuns: 25 },
    )
  })
})
