// Recycled spare files (see CheckpointStore.spareOf) are overwritten only when
// they are plain files of the directory: a symlink or a hard link put in their
// place is never followed out of the checkpoint directory.
import { linkSync, lstatSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { CheckpointStore } from '../../../src/checkpoint/store/checkpoint-store.js'
import { tempDir, writeCheckpoint } from '../helpers.js'

let dir: string
let outside: string
let store: CheckpointStore
beforeEach(async () => {
  dir = await tempDir('spare')
  outside = await tempDir('outside')
  store = new CheckpointStore(dir)
})
afterEach(async () => {
  await rm(dir, { recursive: true, force: true })
  await rm(outside, { recursive: true, force: true })
})

const PRECIOUS = 'someone else\'s data\n'

async function checkpointAfterPrune(): Promise<void> {
  for (let seq = 0; seq < 3; seq++) await writeCheckpoint(store, seq)
  await store.prune(2) // leaves spare/rank-<r>.mlf
}

describe('spare files', () => {
  it.each([
    ['a symlink to a file outside', (spare: string, target: string) => symlinkSync(target, spare)],
    ['a hard link to a file outside', (spare: string, target: string) => linkSync(target, spare)],
  ])('%s is not written through: the outside file keeps its bytes and the checkpoint is valid', async (_what, plant) => {
    await checkpointAfterPrune()
    const target = join(outside, 'precious.txt')
    writeFileSync(target, PRECIOUS)
    const spare = store.spareOf(0)
    rmSync(spare)
    plant(spare, target)
    await writeCheckpoint(store, 3)
    expect(readFileSync(target, 'utf8')).toBe(PRECIOUS)
    expect(lstatSync(store.fileOf(3, 0)).isFile()).toBe(true)
    expect(lstatSync(store.fileOf(3, 0)).nlink).toBe(1)
    expect(await store.validate(3, 3, { checksums: true })).toEqual({ ok: true, problems: [] })
  })

  it('a spare folder that is a symlink out of the directory is not used', async () => {
    await checkpointAfterPrune()
    rmSync(join(dir, 'spare'), { recursive: true })
    mkdirSync(join(outside, 'elsewhere'))
    writeFileSync(join(outside, 'elsewhere', 'rank-1.mlf'), PRECIOUS)
    symlinkSync(join(outside, 'elsewhere'), join(dir, 'spare'))
    await writeCheckpoint(store, 3)
    expect(readFileSync(join(outside, 'elsewhere', 'rank-1.mlf'), 'utf8')).toBe(PRECIOUS)
    expect(await store.validate(3, 3, { checksums: true })).toEqual({ ok: true, problems: [] })
  })
})
