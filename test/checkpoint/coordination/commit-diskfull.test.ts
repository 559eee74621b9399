// A disk that fills up while a checkpoint is written on one rank (in the
// foreground, or flushed from the memory level in the background):
// the run fails with the disk-full error, and the partial checkpoint (the
// other ranks' files, without a commit marker) is removed, not left behind.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { CheckpointStore } from '../../../src/checkpoint/store/checkpoint-store.js'
import { memoryDirFor } from '../../../src/checkpoint/store/memory-level.js'
import { runLocal } from '../../../src/runtime/launch/local.js'
import jacobi from '../../../examples/jacobi/jacobi.js'

const disk = vi.hoisted(() => ({ fullFor: '' }))

vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs/promises')>()
  const open: typeof actual.open = async (...args) => {
    const fh = await actual.open(...args)
    if (disk.fullFor !== '' && String(args[0]).includes(`${disk.fullFor}.tmp-`)) {
      const realWritev = fh.writev.bind(fh)
      const failing = async (buffers: NodeJS.ArrayBufferView[], position?: number) => {
        const first = buffers[0]
        await realWritev([new Uint8Array(first.buffer, first.byteOffset, Math.min(64, first.byteLength))], position)
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28, syscall: 'write' })
      }
      Object.assign(fh, { writev: failing })
    }
    return fh
  }
  // Background disk checkpoints are flushed from the memory level by a kernel copy: it fails the same way.
  const copyFile: typeof actual.copyFile = async (source, dest, mode) => {
    if (disk.fullFor !== '' && String(dest).includes(`${disk.fullFor}.tmp-`)) {
      await actual.writeFile(dest, new Uint8Array(64))
      throw Object.assign(new Error('ENOSPC: no space left on device, copyfile'), { code: 'ENOSPC', errno: -28, syscall: 'copyfile' })
    }
    return actual.copyFile(source, dest, mode)
  }
  return { ...actual, open, copyFile, default: { ...actual, open, copyFile } }
})

const dirs: string[] = []
afterEach(() => {
  disk.fullFor = ''
  // A failed run leaves its memory level (async: disk checkpoints go through RAM) for --resume: not wanted here.
  for (const d of dirs.splice(0)) for (const x of [d, memoryDirFor(d)]) rmSync(x, { recursive: true, force: true })
})

describe('disk full during a background checkpoint', () => {
  it.each([true, false])('async %s: fails with "disk full" and leaves only complete checkpoints', async (async) => {
    const dir = mkdtempSync(join(tmpdir(), 'molotof-svc-full-'))
    dirs.push(dir)
    const run = runLocal(jacobi, {
      ranks: 3,
      argv: ['--n', '30', '--iterations', '40'],
      checkpoint: { dir, policy: { every: 5 }, keep: 2, resume: false, async },
      onLog: () => {},
    })
    // Rank 1's writes fail from the start: ranks 0 and 2 write theirs, which make a partial checkpoint.
    disk.fullFor = 'rank-1.mlf'
    const e = await run.catch((x: unknown) => x)
    expect((e as Error).message).toMatch(/could not be written .*\n\s+rank 1: cannot (write|flush) checkpoint file .*rank-1\.mlf: no space left on the device \(disk full\) \(ENOSPC\)/)
    // The disk was full from the first checkpoint on: there is no previous one to speak of.
    expect((e as Error).message).toMatch(/checkpoint 0 could not be written \(no earlier checkpoint of this run was committed\)/)
    expect((e as Error).message).not.toMatch(/intact/)
    const listed = await new CheckpointStore(dir).list()
    expect(listed.filter((c) => !c.complete)).toEqual([])
    expect(readdirSync(dir).filter((f) => f.startsWith('ckpt-'))).toEqual([])
  })

  it.each([true, false])('async %s: a disk full after a first commit names the checkpoint left intact', async (async) => {
    const dir = mkdtempSync(join(tmpdir(), 'molotof-svc-full-'))
    dirs.push(dir)
    // Checkpoints 0 (step 4) and 1 (step 9) commit; rank 1's file of checkpoint 2 finds the disk full.
    disk.fullFor = join('ckpt-00000002', 'rank-1.mlf')
    const e = await runLocal(jacobi, {
      ranks: 3,
      argv: ['--n', '30', '--iterations', '40'],
      checkpoint: { dir, policy: { every: 5 }, keep: 2, resume: false, async },
      onLog: () => {},
    }).catch((x: unknown) => x)
    expect((e as Error).message).toMatch(/checkpoint 2 could not be written \(the previous checkpoint, 1, is intact\)/)
    const listed = await new CheckpointStore(dir).list()
    expect(listed.map((c) => [c.seq, c.complete, c.marker?.step])).toEqual([
      [0, true, 4],
      [1, true, 9],
    ])
  })
})
