import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import type { JacobiResult } from '../../../examples/jacobi/jacobi.js'
import { interiorSum, jacobiSerial } from '../../../examples/jacobi/serial.js'
import { NothingToResumeError } from '../../../src/errors.js'
import { launch, type LaunchOptions, type ResumeListenerOption } from '../../../src/runtime/launch/launcher.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-rankdirs-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
const JACOBI = 'examples/jacobi/jacobi.ts'
const argv = ['--n', '30', '--iterations', '40']

describe('checkpoint directories of their own ({rank})', () => {
  it('each rank commits and prunes its own directory, and a resume from them gives the same bits', async () => {
    const dir = join(root, 'r{rank}')
    const checkpoint = { dir, policy: { every: 10 } as const, keep: 2, resume: false }
    const straight = await launch<JacobiResult>(JACOBI, { ranks: 3, argv, onLog: () => {} })
    // Stop after the checkpoint of step 19, then resume from the three directories.
    await expect(launch(JACOBI, { ranks: 3, argv, onLog: () => {}, checkpoint: { ...checkpoint, interrupt: { skeleton: 0, step: 19 } } })).rejects.toThrow(/interrupted/)
    for (let r = 0; r < 3; r++) {
      const d = join(root, `r${r}`)
      const ckpts = readdirSync(d).filter((n) => n.startsWith('ckpt-')).sort()
      expect(ckpts).toEqual(['ckpt-00000000', 'ckpt-00000001'])
      for (const c of ckpts) expect(readdirSync(join(d, c)).sort()).toEqual(['COMMIT', `rank-${r}.mlf`])
    }
    let resumedAt: number | undefined
    const resumed = await launch<JacobiResult>(JACOBI, { ranks: 3, argv, onLog: () => {}, checkpoint: { ...checkpoint, resume: true }, onResumed: (f) => (resumedAt = f.step) } as LaunchOptions & ResumeListenerOption)
    expect(resumedAt).toBe(19)
    expect(resumed.value.checksum).toBe(straight.value.checksum)
    expect(resumed.value.residual).toBe(straight.value.residual)
    // The resumed run wrote checkpoints 2 and 3 (steps 29, 39); pruning ran in every directory (`keep: 2`).
    for (let r = 0; r < 3; r++) expect(readdirSync(join(root, `r${r}`)).filter((n) => n.startsWith('ckpt-')).sort()).toEqual(['ckpt-00000002', 'ckpt-00000003'])
  })

  it('a rank whose directory is gone makes --resume refuse, naming the missing file, not start afresh', async () => {
    const dir = join(root, 'gone{rank}')
    const checkpoint = { dir, policy: { every: 10 } as const, keep: 2, resume: false }
    await expect(launch(JACOBI, { ranks: 2, argv, onLog: () => {}, checkpoint: { ...checkpoint, interrupt: { skeleton: 0, step: 19 } } })).rejects.toThrow(/interrupted/)
    rmSync(join(root, 'gone1'), { recursive: true })
    const resumed = launch(JACOBI, { ranks: 2, argv, onLog: () => {}, checkpoint: { ...checkpoint, resume: true } })
    await expect(resumed).rejects.toThrow(NothingToResumeError)
    await expect(resumed).rejects.toThrow('rank 0 holds checkpoint 1, but rank 1 finds no checkpoint at all')
    await expect(resumed).rejects.toThrow(join(root, 'gone1', 'ckpt-00000001', 'rank-1.mlf'))
  })
})

describe('a lost node resumed on the ranks left (elastic, from partner copies)', () => {
  // 4 ranks, each with its own directory and each a "node": rank r's copy is kept by rank (r + 1) mod 4.
  // Jacobi gives the same bits on any rank count: the serial loop's sum is the reference.
  const serialChecksum = interiorSum(jacobiSerial(30, 40), 30)
  const partnerRun = (name: string) => ({ dir: join(root, `${name}{rank}`), policy: { every: 10 } as const, keep: 2, resume: false, partner: { ranksPerNode: 1 } })
  async function stopAndLoseRank3(name: string): Promise<void> {
    const checkpoint = partnerRun(name)
    await expect(launch(JACOBI, { ranks: 4, argv, onLog: () => {}, checkpoint: { ...checkpoint, interrupt: { skeleton: 0, step: 19 } } })).rejects.toThrow(/interrupted/)
    rmSync(join(root, `${name}3`), { recursive: true })
  }

  it('2 → 3 ranks: the new rank, its directory empty, reads its boxes from the others, bit-identical', async () => {
    const checkpoint = { dir: join(root, 'grow{rank}'), policy: { every: 10 } as const, keep: 2, resume: false }
    await expect(launch(JACOBI, { ranks: 2, argv, onLog: () => {}, checkpoint: { ...checkpoint, interrupt: { skeleton: 0, step: 19 } } })).rejects.toThrow(/interrupted/)
    const logs: string[] = []
    const resumed = await launch<JacobiResult>(JACOBI, { ranks: 3, argv, checkpoint: { ...checkpoint, resume: true }, onLog: (_r, t) => logs.push(t) })
    expect(logs.join('\n')).toMatch(/resuming a checkpoint of 2 ranks on 3 \(checkpoint 1\)/)
    expect(Object.is(resumed.value.checksum, serialChecksum)).toBe(true)
  })

  it('4 → 3 ranks: old rank 3 is read from the copy rank 0 keeps (its newest damaged: the checksums, computed where the ranges land, pass it over), bit-identical', async () => {
    await stopAndLoseRank3('lost')
    // The newest copy of rank 3 damaged: new rank 2 reads part of it over the network, and the collective checksums catch it.
    const copy = join(root, 'lost0', 'partner', 'ckpt-00000001', 'rank-3.mlf')
    const bytes = readFileSync(copy)
    bytes[bytes.length - 40] ^= 0x10
    writeFileSync(copy, bytes)
    const logs: string[] = []
    let level: string | undefined
    const checkpoint = { ...partnerRun('lost'), resume: true }
    const resumed = await launch<JacobiResult>(JACOBI, { ranks: 3, argv, checkpoint, onLog: (_r, t) => logs.push(t), onResumed: (f) => (level = f.level) } as LaunchOptions & ResumeListenerOption)
    const log = logs.join('\n')
    expect(log).toMatch(/checkpoint 1 skipped: .*lost0\/partner\/ckpt-00000001\/rank-3\.mlf: checksum mismatch/)
    expect(log).toMatch(/resuming a checkpoint of 4 ranks on 3 \(checkpoint 0\)/)
    expect(level).toBe('disk+partner')
    expect(Object.is(resumed.value.checksum, serialChecksum)).toBe(true)
  })

  it('4 → 2 ranks: old rank 2 is read from its own directory, found on this host by the {rank} search, bit-identical', async () => {
    // On 2 ranks, directories 0 and 1 hold old ranks 0, 1 and the copies of 3 and 0; old rank 2's own directory,
    // on this host too, is read by the search of the other directories {rank} matches: bit-identical.
    await stopAndLoseRank3('far')
    const farLogs: string[] = []
    const fromThree = await launch<JacobiResult>(JACOBI, { ranks: 2, argv, onLog: (_r, t) => farLogs.push(t), checkpoint: { ...partnerRun('far'), partner: undefined, resume: true } })
    expect(farLogs.join('\n')).toMatch(/resuming a checkpoint of 4 ranks on 2 \(checkpoint 1\)/)
    expect(Object.is(fromThree.value.checksum, serialChecksum)).toBe(true)
  })

  it('4 → 2 ranks without old rank 2\'s directory (on a host the run does not reach): refused, naming the file', async () => {
    // Without that directory (on a host the run does not reach), old rank 2's file is out of reach: refused.
    await stopAndLoseRank3('away')
    rmSync(join(root, 'away2'), { recursive: true })
    const two = launch(JACOBI, { ranks: 2, argv, onLog: () => {}, checkpoint: { ...partnerRun('away'), partner: undefined, resume: true } })
    await expect(two).rejects.toThrow(NothingToResumeError)
    await expect(two).rejects.toThrow(/cannot resume checkpoint 1, taken on 4 ranks, on 2: the file of old rank 2 is in no directory of this run's ranks/)
  })
})
