import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import type { JacobiResult } from '../../examples/jacobi/jacobi.js'
import { CheckpointError } from '../../src/errors.js'
import { launch } from '../../src/runtime/launcher.js'

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
    const resumed = await launch<JacobiResult>(JACOBI, { ranks: 3, argv, onLog: () => {}, checkpoint: { ...checkpoint, resume: true }, onResumed: (f) => (resumedAt = f.step) })
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
    await expect(resumed).rejects.toThrow(CheckpointError)
    await expect(resumed).rejects.toThrow('rank 0 holds checkpoint 1, but rank 1 finds no checkpoint at all')
    await expect(resumed).rejects.toThrow(join(root, 'gone1', 'ckpt-00000001', 'rank-1.mlf'))
  })
})
