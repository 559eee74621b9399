import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { runLocal, type FaultToleranceConfig } from '../../../src/index.js'
import { PartnerRing } from '../../../src/checkpoint/store/partner.js'
import { Supervisor, type SupervisorEvent } from '../../../src/runtime/launch/supervisor.js'
import jacobi, { type JacobiResult } from '../../../examples/jacobi/jacobi.js'
import { interiorSum, jacobiSerial } from '../../../examples/jacobi/serial.js'

// Partner and shared copies in one process (threads): the ranks share one
// checkpoint directory here, so "losing a node" deletes its ranks' own files
// and the partner copies it held. test/cli/cluster.test.ts loses whole node
// directories under a launcher.
const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
function freshDir(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(d)
  return d
}

// 4 ranks on 2 "nodes" of 2: rank r's copy is held by rank (r + 2) mod 4. Disk checkpoints at steps 3 and 7.
const ranks = 4
const argv = ['--n', '12', '--iterations', '12', '--return-rows']
const bits = (xs: ArrayLike<number>) => Array.from(new BigUint64Array(Float64Array.from(xs).buffer))
const grid = (rs: JacobiResult[]) => rs.flatMap((r) => bits(r.rows!.values))

function config(extra: Partial<FaultToleranceConfig> = {}): FaultToleranceConfig {
  return { dir: freshDir('molotof-copies-'), policy: { every: 4 }, keep: 2, resume: false, partner: { ranksPerNode: 2 }, ...extra }
}
async function stoppedAt(step: number, cfg: FaultToleranceConfig): Promise<void> {
  await expect(runLocal(jacobi, { ranks, argv, checkpoint: { ...cfg, interrupt: { skeleton: 0, step } } })).rejects.toThrow(/interrupted/)
}
async function resumed(cfg: FaultToleranceConfig): Promise<{ grid: bigint[]; log: string }> {
  const logs: string[] = []
  const r = await runLocal(jacobi, { ranks, argv, checkpoint: { ...cfg, resume: true }, onLog: (_r, t) => logs.push(t) })
  return { grid: grid(r), log: logs.join('\n') }
}
const checkpoints = (dir: string) => readdirSync(dir).filter((d) => d.startsWith('ckpt-')).sort()
/** Node 0 (ranks 0 and 1) lost: its ranks' own files, and the copies it held for node 1 (ranks 2 and 3). */
function loseNode0(dir: string): void {
  for (const c of checkpoints(dir)) for (const r of [0, 1]) rmSync(join(dir, c, `rank-${r}.mlf`), { force: true })
  for (const c of checkpoints(join(dir, 'partner'))) for (const r of [2, 3]) rmSync(join(dir, 'partner', c, `rank-${r}.mlf`), { force: true })
}

describe('partner copies', () => {
  it('pairs each rank with the same local rank on the next node, and refuses one node', () => {
    const ring = new PartnerRing(6, 2)
    expect([0, 1, 2, 3, 4, 5].map((r) => ring.holderOf(r))).toEqual([2, 3, 4, 5, 0, 1])
    expect([0, 1, 2, 3, 4, 5].map((r) => ring.sourceOf(r))).toEqual([4, 5, 0, 1, 2, 3])
    expect(() => new PartnerRing(2, 2)).toThrow(/at least two nodes .* this run has one/)
    expect(() => new PartnerRing(5, 2)).toThrow(/5 ranks is not a multiple of 2/)
  })

  it('are committed beside the disk checkpoint: the same bytes, on the partner rank', async () => {
    const cfg = config()
    await stoppedAt(7, cfg)
    const partner = join(cfg.dir, 'partner')
    expect(checkpoints(partner)).toEqual(checkpoints(cfg.dir))
    for (const c of checkpoints(cfg.dir)) {
      expect(existsSync(join(partner, c, 'COMMIT'))).toBe(true)
      for (let r = 0; r < ranks; r++) expect(readFileSync(join(partner, c, `rank-${r}.mlf`))).toEqual(readFileSync(join(cfg.dir, c, `rank-${r}.mlf`)))
    }
  })

  it('are discarded by a fresh start, also one that keeps no copies (a later resume reads partner/: old copies must not mix in)', async () => {
    const cfg = config()
    await stoppedAt(7, cfg)
    expect(checkpoints(join(cfg.dir, 'partner'))).not.toEqual([])
    await stoppedAt(3, { ...cfg, partner: undefined })
    expect(checkpoints(join(cfg.dir, 'partner'))).toEqual([])
  })

  it('a lost node: its ranks get their files back from their partners, bit-identical', async () => {
    const reference = grid(await runLocal(jacobi, { ranks, argv }))
    const cfg = config()
    await stoppedAt(9, cfg)
    loseNode0(cfg.dir)
    const r = await resumed(cfg)
    expect(r.log).toMatch(/resuming from checkpoint 1 \(skeleton 0, step 7\) from the disk\+partner level/)
    expect(r.grid).toEqual(reference)
  })

  it('a damaged partner copy: the line moves back to the previous checkpoint, bit-identical', async () => {
    const reference = grid(await runLocal(jacobi, { ranks, argv }))
    const cfg = config()
    await stoppedAt(9, cfg)
    loseNode0(cfg.dir)
    const newest = join(cfg.dir, 'partner', checkpoints(join(cfg.dir, 'partner')).pop()!, 'rank-1.mlf')
    const bytes = readFileSync(newest)
    bytes[bytes.length - 9] ^= 0xff
    writeFileSync(newest, bytes)
    const r = await resumed(cfg)
    expect(r.log).toMatch(/checkpoint 1 skipped: rank 3's partner copy .*rank-1\.mlf of rank 1: checksum mismatch/)
    expect(r.log).toMatch(/resuming from checkpoint 0 \(skeleton 0, step 3\) from the disk\+partner level/)
    expect(r.grid).toEqual(reference)
  })
})

describe('partner copies of memory checkpoints', () => {
  it('are kept in the partner’s memory level (the newest only); a lost node resumes from them, newer than any disk checkpoint, bit-identical', async () => {
    const reference = grid(await runLocal(jacobi, { ranks, argv }))
    // Memory every 2 (steps 1, 3, 5, 7, 9), disk every 4 (steps 3 and 7, flushed from memory).
    const ram = join(mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'molotof-copies-ram-')), 'm')
    dirs.push(dirname(ram))
    const cfg = config({ memory: { policy: { every: 2 }, dir: ram } })
    await stoppedAt(9, cfg)
    expect(checkpoints(join(ram, 'partner'))).toHaveLength(1)
    loseNode0(cfg.dir)
    loseNode0(ram)
    const r = await resumed(cfg)
    expect(r.log).toMatch(/resuming from checkpoint \d+ \(skeleton 0, step 9\) from the memory\+partner level/)
    expect(r.grid).toEqual(reference)
  })
})

describe('failures while copies are in flight', () => {
  it('a rank killed right after a checkpoint (its copies in flight): the failure-free result', async () => {
    const n = 24
    const iterations = 40
    const events: SupervisorEvent[] = []
    const s = new Supervisor<JacobiResult>('examples/jacobi/jacobi.ts', {
      ranks,
      argv: ['--n', String(n), '--iterations', String(iterations)],
      checkpoint: config({ policy: { every: 6 }, shared: { dir: freshDir('molotof-shared-'), every: 2 } }),
      // Step 6 follows the checkpoint of step 5: its copies are being sent and written, or just committed.
      inject: [{ rank: 2, skeleton: 0, step: 6, phase: 'calculate' }],
      onLog: () => {},
      onEvent: (e) => events.push(e),
    })
    const r = await s.run()
    expect(r.kind).toBe('done')
    if (r.kind !== 'done') return
    expect(Object.is(r.value.checksum, interiorSum(jacobiSerial(n, iterations), n))).toBe(true)
    expect(events.filter((e) => e.event === 'failure').length).toBe(1)
    const levelsSeen = new Set(events.filter((e) => e.event === 'checkpoint').map((e) => (e as { level: string }).level))
    expect(levelsSeen).toEqual(new Set(['disk', 'partner', 'shared']))
  })

  it('random kills with the memory level and its partner copies (in flight at every memory checkpoint): the failure-free result', async () => {
    const n = 24
    const iterations = 40
    const ram = join(mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'molotof-copies-ram-')), 'm')
    dirs.push(dirname(ram))
    const events: SupervisorEvent[] = []
    const s = new Supervisor<JacobiResult>('examples/jacobi/jacobi.ts', {
      ranks,
      argv: ['--n', String(n), '--iterations', String(iterations)],
      checkpoint: config({ policy: { every: 8 }, memory: { policy: { every: 2 }, dir: ram } }),
      injectRandom: { seed: 7, count: 2 },
      onLog: () => {},
      onEvent: (e) => events.push(e),
    })
    const r = await s.run()
    expect(r.kind).toBe('done')
    if (r.kind === 'done') expect(Object.is(r.value.checksum, interiorSum(jacobiSerial(n, iterations), n))).toBe(true)
    expect(events.filter((e) => e.event === 'failure').length).toBe(2)
  })
})

describe('a resume whose supervisor found no lineage (node 0 lost with its directory)', () => {
  it('adopts the lineage of the newest checkpoint the ranks hold, where a new run id alone would start afresh', async () => {
    const reference = grid(await runLocal(jacobi, { ranks, argv }))
    const cfg = config({ runId: 'lost-run' })
    await stoppedAt(9, cfg)
    loseNode0(cfg.dir)
    // The supervisor drew a new id: those checkpoints are another run's, and nothing is resumed.
    const plain = await resumed({ ...cfg, runId: 'new-run' })
    expect(plain.log).not.toMatch(/resuming from checkpoint/)
    const cfg2 = config({ runId: 'lost-run' })
    await stoppedAt(9, cfg2)
    loseNode0(cfg2.dir)
    const adopted = await resumed({ ...cfg2, runId: 'new-run', adoptLineage: true })
    expect(adopted.log).toMatch(/resuming from checkpoint 1 \(skeleton 0, step 7\) from the disk\+partner level/)
    expect(adopted.grid).toEqual(reference)
  })
})

describe('the shared level', () => {
  it('holds every k-th disk checkpoint; with a node and its partner lost, recovery reads it, bit-identical', async () => {
    const reference = grid(await runLocal(jacobi, { ranks, argv }))
    const shared = freshDir('molotof-shared-')
    const cfg = config({ shared: { dir: shared, every: 2 } })
    await stoppedAt(9, cfg)
    // every:2 of the disk checkpoints 0 (step 3) and 1 (step 7): the first only.
    expect(checkpoints(shared)).toEqual(['ckpt-00000000'])
    // Both nodes' directories gone (node 0 and the node holding its copies).
    rmSync(cfg.dir, { recursive: true, force: true })
    const r = await resumed(cfg)
    expect(r.log).toMatch(/resuming from checkpoint 0 \(skeleton 0, step 3\) from the shared level/)
    expect(r.grid).toEqual(reference)
  })

  it('resumed on another rank count (4 → 3, every directory of the run gone): the old files are re-sliced from the shared level', async () => {
    const shared = freshDir('molotof-shared-')
    const cfg = config({ shared: { dir: shared, every: 1 } })
    await stoppedAt(9, cfg)
    rmSync(cfg.dir, { recursive: true, force: true })
    const logs: string[] = []
    const r = await runLocal(jacobi, { ranks: 3, argv, checkpoint: { ...cfg, partner: undefined, resume: true }, onLog: (_r, t) => logs.push(t) })
    expect(logs.join('\n')).toMatch(/resuming a checkpoint of 4 ranks on 3 \(checkpoint 1\)/)
    expect(logs.join('\n')).toMatch(/from the shared level/)
    expect(grid(r)).toEqual(grid(await runLocal(jacobi, { ranks: 3, argv })))
  })

  it('a time policy copies the first disk checkpoint, then none before that much time', async () => {
    const shared = freshDir('molotof-shared-')
    await stoppedAt(9, config({ shared: { dir: shared, seconds: 3600 } }))
    expect(checkpoints(shared)).toEqual(['ckpt-00000000'])
    expect(existsSync(join(shared, 'ckpt-00000000', 'COMMIT'))).toBe(true)
  })
})
