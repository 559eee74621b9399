// Incremental disk checkpoints with partner and shared copies, in one process
// (threads; 4 ranks on 2 "nodes" of 2, one checkpoint directory): the copies
// of a delta keep its chain, pruning keeps the base and the deltas a kept
// delta needs on every level, and a resume from the copies alone (a node's
// files, or every directory of the run, gone) reassembles the chain,
// bit-identical to a run without failures, also on another rank count. test/fixtures/sparse-update.ts
// changes ~5 % of its state per checkpoint interval: its disk checkpoints
// are deltas of few blocks.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { runLocal, type FaultToleranceConfig } from '../../../src/index.js'
import { decodeRankFileHeader, type RankFileHeader } from '../../../src/checkpoint/format/rank-file.js'
import { RAM_ROOT } from '../../../src/checkpoint/store/memory-level.js'
import sparse from '../../fixtures/sparse-update.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
function freshDir(prefix: string, under = tmpdir()): string {
  const d = mkdtempSync(join(under, prefix))
  dirs.push(d)
  return d
}

const ranks = 4
const argv = ['--steps', '40', '--kib', '2048']
const checkpoints = (dir: string) => readdirSync(dir).filter((d) => d.startsWith('ckpt-')).sort()
const committed = (dir: string) => checkpoints(dir).filter((c) => existsSync(join(dir, c, 'COMMIT')))
const ckpt = (seq: number) => `ckpt-${String(seq).padStart(8, '0')}`
const headerOf = (path: string): RankFileHeader => decodeRankFileHeader(new Uint8Array(readFileSync(path)), path).header

/** Disk checkpoints every 5 steps flushed from the memory level as deltas (a full one every 8), keep 2. */
function config(extra: Partial<FaultToleranceConfig> = {}): FaultToleranceConfig {
  return {
    dir: freshDir('molotof-delta-copies-'),
    policy: { every: 5 },
    keep: 2,
    resume: false,
    memory: { policy: { kind: 'off' }, dir: freshDir('molotof-delta-copies-mem-', RAM_ROOT) },
    incremental: { every: 8 },
    partner: { ranksPerNode: 2 },
    ...extra,
  }
}

/** Run until step 37 (disk checkpoints of steps 4 … 34, every one flushed and copied), then stop. */
async function stopped(cfg: FaultToleranceConfig): Promise<void> {
  await expect(runLocal(sparse, { ranks, argv, checkpoint: { ...cfg, interrupt: { skeleton: 0, step: 37 } } })).rejects.toThrow(/interrupted/)
  // The memory level is gone with the nodes.
  rmSync(cfg.memory!.dir!, { recursive: true, force: true })
}

async function resumed(cfg: FaultToleranceConfig): Promise<{ results: number[]; log: string }> {
  const logs: string[] = []
  const results = await runLocal(sparse, { ranks, argv, checkpoint: { ...cfg, resume: true }, onLog: (_r, t) => logs.push(t) })
  return { results, log: logs.join('\n') }
}

/** The newest committed checkpoint in `dir` holds a delta for `rank`, and every file of its chain is there, committed. */
function expectChainIn(dir: string, rank: number): RankFileHeader {
  const newest = committed(dir).at(-1)!
  const header = headerOf(join(dir, newest, `rank-${rank}.mlf`))
  expect(header.delta, `${newest} of rank ${rank} in ${dir} is a delta`).toBeDefined()
  for (const need of header.delta!.needs) {
    expect(existsSync(join(dir, ckpt(need), `rank-${rank}.mlf`)), `checkpoint ${need} of rank ${rank}'s chain in ${dir}`).toBe(true)
    expect(existsSync(join(dir, ckpt(need), 'COMMIT')), `checkpoint ${need} committed in ${dir}`).toBe(true)
  }
  return header
}

describe.skipIf(!existsSync(RAM_ROOT))('incremental checkpoints with copies', () => {
  it.each([{ compress: false }, { compress: true }])(
    'partner copies (compress: $compress): a lost node gets its delta chain back from its partners, bit-identical',
    async ({ compress }) => {
      const reference = await runLocal(sparse, { ranks, argv })
      const cfg = config({ compress })
      await stopped(cfg)
      const partner = join(cfg.dir, 'partner')
      // The copies kept the chain: more than `keep` copies, since the kept deltas need their base and the deltas between.
      for (const r of [0, 1]) expectChainIn(partner, r)
      expect(committed(partner).length).toBeGreaterThan(2)
      // Node 0 (ranks 0 and 1) lost: its ranks' own files, and the copies it held for ranks 2 and 3.
      for (const c of checkpoints(cfg.dir)) for (const r of [0, 1]) rmSync(join(cfg.dir, c, `rank-${r}.mlf`), { force: true })
      for (const c of checkpoints(partner)) for (const r of [2, 3]) rmSync(join(partner, c, `rank-${r}.mlf`), { force: true })
      const r = await resumed(cfg)
      expect(r.log).toMatch(/resuming from checkpoint \d+ \(skeleton 0, step 34\) from the disk\+partner level/)
      expect(r.results).toEqual(reference)
    },
    120_000,
  )

  it("a damaged delta among a lost rank's partner copies: named with the delta that needs it, and the newest checkpoint before it used, bit-identical", async () => {
    const reference = await runLocal(sparse, { ranks, argv })
    const cfg = config()
    await stopped(cfg)
    const partner = join(cfg.dir, 'partner')
    for (const c of checkpoints(cfg.dir)) for (const r of [0, 1]) rmSync(join(cfg.dir, c, `rank-${r}.mlf`), { force: true })
    for (const c of checkpoints(partner)) for (const r of [2, 3]) rmSync(join(partner, c, `rank-${r}.mlf`), { force: true })
    // Rank 0's copy of delta 3 (held by rank 2): a flipped byte in its first held block.
    const path = join(partner, ckpt(3), 'rank-0.mlf')
    const bytes = new Uint8Array(readFileSync(path))
    const { header, dataStart } = decodeRankFileHeader(bytes, path)
    const state = header.entries.find((e) => e.name === 'state')!
    expect(state.blocks!.held.length).toBeGreaterThan(0)
    bytes[dataStart + state.offset + 8] ^= 0x04
    writeFileSync(path, bytes)
    const r = await resumed(cfg)
    expect(r.log).toMatch(new RegExp(`checkpoint 6 skipped: .*rank-0\\.mlf of rank 0: the delta checkpoint 3 it needs is not usable \\(rank 2's partner copy .*ckpt-00000003/rank-0\\.mlf of rank 0: checksum mismatch in block ${state.blocks!.held[0]} of delta entry "state"`))
    expect(r.log).toMatch(/resuming from checkpoint 2 \(skeleton 0, step 14\) from the disk\+partner level/)
    expect(r.results).toEqual(reference)
  }, 120_000)

  it.each([{ compress: false }, { compress: true }])(
    'the shared level every 3rd (compress: $compress): its deltas carry their chains along, and a resume from it alone is bit-identical',
    async ({ compress }) => {
      const reference = await runLocal(sparse, { ranks, argv })
      const shared = freshDir('molotof-delta-shared-')
      const cfg = config({ compress, partner: undefined, shared: { dir: shared, every: 3 } })
      await stopped(cfg)
      // every:3 of disk checkpoints 0 … 6 copies 0, 3 and 6; 6 is a delta whose chain (1, 2, 4, 5) came along.
      const header = expectChainIn(shared, 0)
      expect(header.delta!.needs).toEqual([0, 1, 2, 3, 4, 5])
      expect(committed(shared)).toEqual([0, 1, 2, 3, 4, 5, 6].map(ckpt))
      // Every directory of the run gone: the shared level alone.
      rmSync(cfg.dir, { recursive: true, force: true })
      const r = await resumed(cfg)
      expect(r.log).toMatch(/resuming from checkpoint 6 \(skeleton 0, step 34\) from the shared level/)
      expect(r.results).toEqual(reference)
    },
    120_000,
  )

  it('the shared level alone, resumed on another rank count (4 → 3): the compressed deltas and their chains are re-sliced, bit-identical', async () => {
    const shared = freshDir('molotof-delta-shared-')
    const cfg = config({ compress: true, partner: undefined, shared: { dir: shared, every: 3 } })
    await stopped(cfg)
    expectChainIn(shared, 3)
    rmSync(cfg.dir, { recursive: true, force: true })
    const logs: string[] = []
    const results = await runLocal(sparse, { ranks: 3, argv, checkpoint: { ...cfg, resume: true }, onLog: (_r, t) => logs.push(t) })
    expect(logs.join('\n')).toMatch(/resuming a checkpoint of 4 ranks on 3 \(checkpoint 6\)/)
    expect(results).toEqual(await runLocal(sparse, { ranks: 3, argv }))
  }, 120_000)
})
