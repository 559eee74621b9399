// A full disk, simulated: tests run as root on a disk that is not full, so the
// file-system module is wrapped to make writes to temporary files fail with
// ENOSPC after writing part of the data — what a filling disk does. Everything
// else (open, fsync, rename, unlink) is the real thing.
import { readdir, rm } from 'node:fs/promises'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { CheckpointError } from '../../../src/errors.js'
import { chooseRecoveryLine, localView } from '../../../src/checkpoint/recovery/line.js'
import { CheckpointStore } from '../../../src/checkpoint/store/checkpoint-store.js'
import { tempDir, writeCheckpoint } from '../helpers.js'

const disk = vi.hoisted(() => ({ full: false }))

vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs/promises')>()
  const open: typeof actual.open = async (...args) => {
    const fh = await actual.open(...args)
    if (disk.full && String(args[0]).includes('.tmp-')) {
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
  return { ...actual, open, default: { ...actual, open } }
})

let dir: string
let store: CheckpointStore
beforeEach(async () => {
  dir = await tempDir('diskfull')
  store = new CheckpointStore(dir)
  disk.full = false
})
afterEach(async () => {
  disk.full = false
  await rm(dir, { recursive: true, force: true })
})

async function line(): Promise<number | undefined> {
  const views = await Promise.all([0, 1, 2].map((r) => localView(store, r, 3)))
  return chooseRecoveryLine(views).seq
}

describe('disk full while checkpointing', () => {
  it('a rank file: CheckpointError naming the file and "disk full"; no temporary file is left; the previous checkpoint stays valid', async () => {
    await writeCheckpoint(store, 0)
    disk.full = true
    const err = await writeCheckpoint(store, 1).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(CheckpointError)
    expect((err as Error).message).toBe(`cannot write checkpoint file ${store.fileOf(1, 0)}: no space left on the device (disk full) (ENOSPC)`)
    expect((err as Error).cause).toMatchObject({ code: 'ENOSPC' })
    expect(await readdir(store.pathOf(1))).toEqual([]) // neither the file nor its temporary
    disk.full = false
    expect(await store.validate(0, 3, { checksums: true })).toEqual({ ok: true, problems: [] })
    expect(await line()).toBe(0)
  })

  it('the commit marker: CheckpointError naming COMMIT; the checkpoint stays incomplete and is not used', async () => {
    await writeCheckpoint(store, 0)
    await writeCheckpoint(store, 1, { commit: false })
    disk.full = true
    const err = await store
      .commit(1, { ...(await store.readMarker(0)), seq: 1 })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(CheckpointError)
    expect((err as Error).message).toContain(store.markerOf(1))
    expect((err as Error).message).toContain('disk full')
    disk.full = false
    expect((await store.list()).map((s) => s.complete)).toEqual([true, false])
    expect(await line()).toBe(0)
  })
})
