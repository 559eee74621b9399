import { appendFile, readdir, readFile, rm, stat, truncate, unlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { CheckpointCorruptError, CheckpointError, CheckpointMismatchError } from '../../../src/errors.js'
import { decodeLight } from '../../../src/checkpoint/light/codec.js'
import { entryArray } from '../../../src/checkpoint/format/payload.js'
import { chooseRecoveryLine, localView, type RecoveryLine } from '../../../src/checkpoint/recovery/line.js'
import { CheckpointStore } from '../../../src/checkpoint/store/checkpoint-store.js'
import { FINGERPRINT, payloadOf, tempDir, writeCheckpoint } from '../helpers.js'

const SIZE = 3
let dir: string
let store: CheckpointStore

beforeEach(async () => {
  dir = await tempDir('store')
  store = new CheckpointStore(dir)
})
afterEach(async () => {
  await rm(dir, { recursive: true, force: true })
})

async function recoveryLine(s = store, size = SIZE): Promise<RecoveryLine> {
  const views = []
  for (let rank = 0; rank < size; rank++) views.push(await localView(s, rank, size))
  return chooseRecoveryLine(views)
}

/** Two complete checkpoints, 0 (step 0) and 1 (step 10). */
async function twoCheckpoints(): Promise<void> {
  await writeCheckpoint(store, 0)
  await writeCheckpoint(store, 1)
}

describe('CheckpointStore: writing, listing, loading', () => {
  it('lays out ckpt-<seq>/rank-<r>.mlf + COMMIT and lists them complete', async () => {
    await twoCheckpoints()
    expect(await readdir(dir)).toEqual(['ckpt-00000000', 'ckpt-00000001'])
    expect((await readdir(join(dir, 'ckpt-00000001'))).sort()).toEqual(['COMMIT', 'rank-0.mlf', 'rank-1.mlf', 'rank-2.mlf'])
    const list = await store.list()
    expect(list.map((s) => [s.seq, s.complete, s.files.length])).toEqual([[0, true, 3], [1, true, 3]])
    expect(list[1].marker).toMatchObject({ seq: 1, step: 10, size: 3, fingerprint: FINGERPRINT })
    expect(list[1].files.map((f) => f.bytes)).toEqual(list[1].marker!.ranks.map((r) => r.bytes))
    expect(await store.nextSeq()).toBe(2)
  })

  it('the COMMIT marker is JSON with the documented fields', async () => {
    await twoCheckpoints()
    const marker = JSON.parse(await readFile(store.markerOf(1), 'utf8'))
    expect(Object.keys(marker)).toEqual(['seq', 'skeleton', 'step', 'size', 'fingerprint', 'settings', 'ranks', 'createdAt', 'checksum'])
    expect(marker.ranks[2]).toEqual({ rank: 2, file: 'rank-2.mlf', bytes: expect.any(Number), headerChecksum: expect.any(Number) })
  })

  it('loads a rank file back: heavy arrays and light values', async () => {
    await twoCheckpoints()
    const f = await store.loadRankFile(1, 2)
    expect(f.header).toMatchObject({ rank: 2, size: 3, step: 10 })
    expect(Array.from(entryArray(f.entries.get('write')!, 'float64'))).toEqual(Array.from(payloadOf(2, 10)))
    expect(decodeLight(f.entries.get('iterator')!.bytes)).toEqual({ step: 10, t: 1 })
    await expect(store.loadRankFile(5, 0)).rejects.toThrow(/rank-0\.mlf is not usable: the file is missing/)
  })

  it('an empty or absent directory lists nothing and has no recovery line', async () => {
    expect(await new CheckpointStore(join(dir, 'nope')).list()).toEqual([])
    expect((await recoveryLine()).seq).toBeUndefined()
  })

  it('refuses to overwrite a committed checkpoint', async () => {
    await twoCheckpoints()
    await expect(writeCheckpoint(store, 1)).rejects.toThrow(/checkpoint 1 .* is already committed/)
  })
})

describe('recovery line over a damaged newest checkpoint', () => {
  it('both valid: the newest is the line', async () => {
    await twoCheckpoints()
    expect(await recoveryLine()).toEqual({ seq: 1, skipped: [] })
  })

  const damages: [string, () => Promise<void>, string, RegExp][] = [
    ['a rank file is deleted', () => unlink(store.fileOf(1, 2)), 'rank-2.mlf', /the file is missing/],
    ['a rank file is truncated', async () => truncate(store.fileOf(1, 1), 200), 'rank-1.mlf', /the file is 200 bytes, the commit marker records \d+ \(truncated/],
    ['a payload byte is flipped', () => flip(store.fileOf(1, 0), -20), 'rank-0.mlf', /checksum mismatch in entry "iterator"|checksum mismatch in entry "write"/],
    ['a header byte is flipped', () => flip(store.fileOf(1, 2), 40), 'rank-2.mlf', /header checksum mismatch/],
    ['the COMMIT marker is damaged', () => flip(store.markerOf(1), 30), 'COMMIT', /invalid commit marker|not valid JSON/],
  ]
  for (const [what, damage, file, reason] of damages) {
    it(`${what}: the previous checkpoint is used, and the skip names the file and why`, async () => {
      await twoCheckpoints()
      await damage()
      const line = await recoveryLine()
      expect(line.seq).toBe(0)
      expect(line.skipped).toHaveLength(1)
      expect(line.skipped[0].seq).toBe(1)
      const problems = line.skipped[0].problems
      expect(problems.length).toBeGreaterThanOrEqual(1)
      expect(problems.some((p) => p.file === join(store.pathOf(1), file) && reason.test(p.reason))).toBe(true)
    })
  }

  it('a shared problem (a damaged COMMIT) is reported once, not once per rank', async () => {
    await twoCheckpoints()
    await flip(store.markerOf(1), 30)
    expect((await recoveryLine()).skipped[0].problems).toHaveLength(1)
  })

  it('the newest checkpoint without a COMMIT marker was never committed: the previous one is used, nothing skipped', async () => {
    await twoCheckpoints()
    await unlink(store.markerOf(1))
    expect((await store.list())[1]).toMatchObject({ seq: 1, complete: false, uncommitted: true })
    expect(await recoveryLine()).toEqual({ seq: 0, skipped: [] })
  })

  it('a COMMIT marker missing under a newer commit is damage: reported, and the newest is used', async () => {
    await twoCheckpoints()
    await unlink(store.markerOf(0))
    const listed = await store.list()
    expect(listed[0]).toMatchObject({ seq: 0, complete: false, problem: 'no commit marker: the checkpoint was not completed' })
    expect(listed[0].uncommitted).toBeUndefined()
    expect((await recoveryLine()).seq).toBe(1)
  })

  it('validate reports every bad file of a checkpoint, and a different rank count', async () => {
    await twoCheckpoints()
    await unlink(store.fileOf(1, 0))
    await truncate(store.fileOf(1, 2), 10)
    const report = await store.validate(1, SIZE, { checksums: true })
    expect(report.ok).toBe(false)
    expect(report.problems.map((p) => p.file)).toEqual([store.fileOf(1, 0), store.fileOf(1, 2)])
    expect(await store.validate(0, SIZE, { checksums: true })).toEqual({ ok: true, problems: [] })
    expect((await store.validate(0, 4)).problems[0].reason).toBe('the checkpoint was taken with 3 ranks, this run has 4')
  })

  it('a rank file swapped with another rank\'s is caught by the header checks', async () => {
    await twoCheckpoints()
    await writeFile(store.fileOf(1, 1), await readFile(store.fileOf(0, 1)))
    const report = await store.validate(1, SIZE)
    expect(report.problems).toHaveLength(1)
    expect(report.problems[0].file).toBe(store.fileOf(1, 1))
  })
})

describe('prune and temporary files', () => {
  it('keeps the newest K complete checkpoints, drops older incomplete ones, never touches newer ones', async () => {
    for (let seq = 0; seq < 5; seq++) await writeCheckpoint(store, seq)
    await unlink(store.markerOf(2)) // an interrupted checkpoint, older than the newest complete
    await writeCheckpoint(store, 5, { commit: false }) // being written right now
    const result = await store.prune(2)
    expect(result.removed).toEqual([0, 1, 2])
    const left = await store.list()
    expect(left.map((s) => [s.seq, s.complete])).toEqual([[3, true], [4, true], [5, false]])
    expect((await recoveryLine()).seq).toBe(4)
  })

  it('prune(1) keeps exactly the newest complete checkpoint; nothing to do without a complete one', async () => {
    await writeCheckpoint(store, 0, { commit: false })
    expect(await store.prune(1)).toEqual({ removed: [], temporaryFiles: 0 })
    await writeCheckpoint(store, 1)
    await writeCheckpoint(store, 2)
    expect((await store.prune(1)).removed).toEqual([0, 1])
    await expect(store.prune(0)).rejects.toThrow(/keep at least 1/)
  })

  it('a temporary file left by a crash is ignored, then cleaned by prune (only in finished checkpoints)', async () => {
    await twoCheckpoints()
    const leftover = join(store.pathOf(1), 'rank-1.mlf.tmp-4242-deadbeef')
    await writeFile(leftover, 'half a file')
    await writeCheckpoint(store, 2, { commit: false })
    const inProgress = join(store.pathOf(2), 'rank-0.mlf.tmp-4243-cafe0000')
    await writeFile(inProgress, 'being written')

    expect((await store.list())[1].files.map((f) => f.file)).toEqual(['rank-0.mlf', 'rank-1.mlf', 'rank-2.mlf'])
    expect((await store.validate(1, SIZE, { checksums: true })).ok).toBe(true)
    expect((await recoveryLine()).seq).toBe(1)

    const result = await store.prune(5)
    expect(result).toEqual({ removed: [], temporaryFiles: 1 })
    expect(await readdir(store.pathOf(1))).not.toContain('rank-1.mlf.tmp-4242-deadbeef')
    expect(await readdir(store.pathOf(2))).toContain('rank-0.mlf.tmp-4243-cafe0000')
    expect(await store.removeTemporaryFiles()).toBe(1)
  })
})

describe('a prune while other ranks commit older checkpoints (the shared level, delta chains carried along)', () => {
  it('temporaryFiles: false leaves a marker being written in an older, kept checkpoint alone; the default deletes it', async () => {
    await twoCheckpoints()
    // Another rank's marker for checkpoint 0, half written, while checkpoint 1 is committed and pruned.
    const inFlight = join(store.pathOf(0), 'COMMIT.tmp-4244-0badf00d')
    await writeFile(inFlight, '{"half": ')
    expect(await store.prune(5, { temporaryFiles: false })).toEqual({ removed: [], temporaryFiles: 0 })
    expect(await readdir(store.pathOf(0))).toContain('COMMIT.tmp-4244-0badf00d')
    expect(await store.prune(5)).toEqual({ removed: [], temporaryFiles: 1 })
    expect(await readdir(store.pathOf(0))).not.toContain('COMMIT.tmp-4244-0badf00d')
  })
})

describe('spare files: pruned rank files are overwritten by the next writes', () => {
  it('prune leaves one spare per rank; the next write of that rank takes it over (same inode) and stores exactly its own bytes', async () => {
    await twoCheckpoints()
    const pruned = await Promise.all([0, 1, 2].map((r) => stat(store.fileOf(0, r))))
    await writeCheckpoint(store, 2)
    expect((await store.prune(2)).removed).toEqual([0])
    expect((await readdir(join(dir, 'spare'))).sort()).toEqual(['rank-0.mlf', 'rank-1.mlf', 'rank-2.mlf'])
    expect((await stat(store.spareOf(1))).ino).toBe(pruned[1].ino)

    // A longer spare: the new file must be cut to its own length.
    await appendFile(store.spareOf(1), new Uint8Array(5000).fill(7))
    await writeCheckpoint(store, 3)
    const reused = await stat(store.fileOf(3, 1))
    expect(reused.ino).toBe(pruned[1].ino)
    expect(await readdir(join(dir, 'spare'))).toEqual([])
    expect((await store.validate(3, SIZE, { checksums: true })).ok).toBe(true)
    const file = await store.loadRankFile(3, 1)
    expect(Array.from(entryArray(file.entries.get('write')!, 'float64'))).toEqual(Array.from(payloadOf(1, 30)))
    // The listing and the recovery line never see the spare directory.
    expect((await store.list()).map((c) => c.seq)).toEqual([1, 2, 3])
    expect((await recoveryLine()).seq).toBe(3)
  })

  it('without a spare a new file is written; the spare directory never holds more than one file per rank', async () => {
    for (let seq = 0; seq < 6; seq++) {
      await writeCheckpoint(store, seq)
      await store.prune(1)
      expect((await readdir(join(dir, 'spare')).catch(() => [])).length).toBeLessThanOrEqual(SIZE)
    }
    expect((await store.list()).map((c) => c.seq)).toEqual([5])
    expect((await store.validate(5, SIZE, { checksums: true })).ok).toBe(true)
  })
})

describe('write failures keep the previous checkpoint intact', () => {
  // Tests run as root, and chmod does not stop root, so a read-only directory
  // cannot be simulated with permissions. Two deterministic stand-ins:
  // a path that runs through a regular file (ENOTDIR for mkdir/open, whoever
  // the user is), and a regular file squatting on the next checkpoint's
  // directory name. Disk-full (ENOSPC) is simulated in store-diskfull.test.ts.
  it('a directory under a regular file: CheckpointError naming the path and the reason', async () => {
    await writeFile(join(dir, 'plain-file'), 'x')
    const bad = new CheckpointStore(join(dir, 'plain-file', 'ckpt'))
    const err = await writeCheckpoint(bad, 0).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(CheckpointError)
    expect((err as Error).message).toContain(join(dir, 'plain-file', 'ckpt', 'ckpt-00000000'))
    expect((err as Error).message).toMatch(/a component of the path is not a directory \(ENOTDIR\)/)
  })

  it('the next checkpoint cannot be written: error names the path; the previous one stays valid', async () => {
    await twoCheckpoints()
    await writeFile(store.pathOf(2), 'not a directory')
    const err = await writeCheckpoint(store, 2).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(CheckpointError)
    expect((err as Error).message).toContain(store.pathOf(2))
    expect(await store.validate(1, SIZE, { checksums: true })).toEqual({ ok: true, problems: [] })
    expect((await recoveryLine()).seq).toBe(1)
    expect(await store.nextSeq()).toBe(3) // the squatter's number is not reused
  })
})

describe('listing: only a missing directory is empty', () => {
  it('no spare directory lists no spares; a spare path that is not a directory is reported', async () => {
    expect(await store.spares()).toEqual([])
    await writeFile(join(dir, 'spare'), 'not a directory')
    const err = await store.spares().catch((e: unknown) => e)
    expect(err).toBeInstanceOf(CheckpointError)
    expect((err as Error).message).toBe(`cannot list directory ${join(dir, 'spare')}: a component of the path is not a directory (ENOTDIR)`)
  })

  it('a regular file named like a checkpoint is not one: pruning passes it by', async () => {
    await writeFile(store.pathOf(0), 'not a checkpoint')
    await writeCheckpoint(store, 1)
    await writeCheckpoint(store, 2)
    expect(await store.prune(1)).toEqual({ removed: [1], temporaryFiles: 0 })
    expect(await readFile(store.pathOf(0), 'utf8')).toBe('not a checkpoint')
  })
})

describe('assertFingerprint', () => {
  it('accepts its own checkpoints and an empty directory', async () => {
    await store.assertFingerprint(FINGERPRINT)
    await twoCheckpoints()
    await store.assertFingerprint(FINGERPRINT)
  })

  it('refuses a directory holding another program\'s checkpoints, saying why', async () => {
    await writeCheckpoint(store, 0, { fingerprint: 'swing@2' })
    await expect(store.assertFingerprint(FINGERPRINT)).rejects.toThrow(CheckpointMismatchError)
    await expect(store.assertFingerprint(FINGERPRINT)).rejects.toThrow(/holds checkpoints of another program \(checkpoint 0 has fingerprint "swing@2", this program's is "jacobi@1"\)/)
  })

  it('also checks rank file headers when no checkpoint was committed yet', async () => {
    await writeCheckpoint(store, 0, { fingerprint: 'swing@2', commit: false })
    await expect(store.assertFingerprint(FINGERPRINT)).rejects.toThrow(/another program/)
  })
})

describe('loadRankFile on damaged data', () => {
  it('throws CheckpointCorruptError with the path and reason', async () => {
    await twoCheckpoints()
    await flip(store.fileOf(1, 0), -20)
    const err = await store.loadRankFile(1, 0).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(CheckpointCorruptError)
    expect((err as CheckpointCorruptError).file).toBe(store.fileOf(1, 0))
  })
})

/** XORs one byte (negative index: from the end) of a file. */
async function flip(path: string, index: number): Promise<void> {
  const bytes = await readFile(path)
  const i = index < 0 ? bytes.length + index : index
  bytes[i] ^= 0x5a
  await writeFile(path, bytes)
}
