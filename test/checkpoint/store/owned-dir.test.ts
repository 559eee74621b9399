// A directory molotof cleans is one it marked as its own, and cleaning removes
// only the files it wrote there: a user's file beside them always survives.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { CheckpointStore, isStoreEntry } from '../../../src/checkpoint/store/checkpoint-store.js'
import { checkMemoryDirectory, claimMemoryDirectory, MEMORY_SUBDIRECTORY, memoryLevelDirectoryIn } from '../../../src/checkpoint/store/memory-level.js'
import { cleanOwnedDirectory, OWNED_MARKER, sweepAbandonedDirectories } from '../../../src/checkpoint/store/owned-dir.js'
import { ConfigError } from '../../../src/errors.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-owned-test-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
let n = 0
const fresh = (): string => join(root, `case-${n++}`)

/** The first bytes of every rank file molotof writes (docs/REFERENCE.md: magic "MOLOTOF\0"), then anything. */
const RANK_FILE_BYTES = new Uint8Array(Buffer.concat([Buffer.from('MOLOTOF\0', 'latin1'), Buffer.alloc(56)]))

/** A checkpoint folder as the store writes it: a rank file, a commit marker, a temporary file. */
function fillLikeTheStore(dir: string): void {
  mkdirSync(join(dir, 'ckpt-00000003'), { recursive: true })
  writeFileSync(join(dir, 'ckpt-00000003', 'rank-0.mlf'), RANK_FILE_BYTES)
  writeFileSync(join(dir, 'ckpt-00000003', 'COMMIT'), 'x')
  writeFileSync(join(dir, 'ckpt-00000003', 'rank-1.mlf.tmp-99-abcdef01'), 'x')
  mkdirSync(join(dir, 'spare'))
  writeFileSync(join(dir, 'spare', 'rank-0.mlf'), RANK_FILE_BYTES)
  mkdirSync(join(dir, 'partner', 'ckpt-00000002'), { recursive: true })
  writeFileSync(join(dir, 'partner', 'ckpt-00000002', 'rank-1.mlf'), RANK_FILE_BYTES)
}

/** A user's folders that only have molotof's names: a rank file and a commit marker of other content, and a lone rank file. */
function plantNamesakes(dir: string): string[] {
  const files = [join(dir, 'ckpt-00000001', 'rank-0.mlf'), join(dir, 'ckpt-00000007', 'rank-0.mlf'), join(dir, 'ckpt-00000007', 'COMMIT')]
  for (const f of files) {
    mkdirSync(join(f, '..'), { recursive: true })
    writeFileSync(f, 'mine')
  }
  return files
}

/** Checkpoint `seq` committed by the store itself (one rank, a file of molotof's format as far as listing goes). */
async function commitOwn(store: CheckpointStore, seq: number): Promise<void> {
  const w = await store.writeRankFile(seq, 0, [RANK_FILE_BYTES])
  await store.commit(seq, { seq, skeleton: 0, step: seq, size: 1, fingerprint: 'f', settings: {}, ranks: [w], createdAt: 'now', runId: 'r' })
}

describe('claiming the memory level directory', () => {
  it('an absent directory is created marked, and cleaning removes it whole once only molotof files are in it', () => {
    const dir = fresh()
    expect(claimMemoryDirectory(dir)).toBe(dir)
    const owner = JSON.parse(readFileSync(join(dir, OWNED_MARKER), 'utf8'))
    expect(owner).toMatchObject({ purpose: 'memory level', pid: process.pid, host: hostname(), created: true })
    fillLikeTheStore(dir)
    expect(cleanOwnedDirectory(dir, isStoreEntry)).toEqual([])
    expect(existsSync(dir)).toBe(false)
  })

  it('an empty directory of the user is used as it is, and stays (empty) after cleaning', () => {
    const dir = fresh()
    mkdirSync(dir)
    expect(claimMemoryDirectory(dir)).toBe(dir)
    fillLikeTheStore(dir)
    cleanOwnedDirectory(dir, isStoreEntry)
    expect(readdirSync(dir)).toEqual([])
  })

  it('a directory holding a user file: molotof works in a sub-directory of its own, and cleaning leaves the directory and the file', () => {
    const dir = fresh()
    mkdirSync(dir)
    writeFileSync(join(dir, 'notes.txt'), 'mine')
    const used = claimMemoryDirectory(dir)
    expect(used).toBe(join(dir, MEMORY_SUBDIRECTORY))
    expect(claimMemoryDirectory(dir)).toBe(used) // the same on every rank and at a resume
    expect(memoryLevelDirectoryIn(dir)).toBe(used)
    fillLikeTheStore(used)
    cleanOwnedDirectory(used, isStoreEntry)
    expect(readdirSync(dir)).toEqual(['notes.txt'])
    expect(readFileSync(join(dir, 'notes.txt'), 'utf8')).toBe('mine')
  })

  it('files of the user inside molotof folders survive cleaning, with the folders that hold them; symlinks are not followed', () => {
    const dir = fresh()
    claimMemoryDirectory(dir)
    fillLikeTheStore(dir)
    writeFileSync(join(dir, 'ckpt-00000003', 'mine.txt'), 'mine')
    const target = join(root, `target-${n++}`)
    writeFileSync(target, 'precious')
    symlinkSync(target, join(dir, 'spare', 'rank-5.mlf'))
    const left = cleanOwnedDirectory(dir, isStoreEntry)
    expect(left.sort()).toEqual([join(dir, 'ckpt-00000003', 'mine.txt'), join(dir, 'spare', 'rank-5.mlf')])
    expect(readdirSync(join(dir, 'ckpt-00000003'))).toEqual(['mine.txt'])
    expect(readFileSync(target, 'utf8')).toBe('precious')
    expect(existsSync(join(dir, 'partner'))).toBe(false)
  })

  it('a directory without the marker is never cleaned', () => {
    const dir = fresh()
    fillLikeTheStore(dir)
    expect(cleanOwnedDirectory(dir, isStoreEntry)).toEqual([])
    expect(existsSync(join(dir, 'ckpt-00000003', 'rank-0.mlf'))).toBe(true)
  })

  it('a file is refused with the flag named', () => {
    const file = fresh()
    writeFileSync(file, 'x')
    expect(() => claimMemoryDirectory(file)).toThrow(/--memory-dir .* is a file, not a directory/)
  })
})

describe('a --memory-dir refused before the run starts', () => {
  it.each([
    ['', /--memory-dir needs a directory path \(got an empty value\)/],
    ['/', /--memory-dir \/ is the root directory/],
    ['.', /--memory-dir \. is the current directory/],
    [process.cwd(), /is the current directory/],
    [process.env.HOME ?? '/root', /is the home directory/],
  ])('%j', (dir, message) => {
    expect(() => checkMemoryDirectory(dir, join(root, 'ckpt'))).toThrow(ConfigError)
    expect(() => checkMemoryDirectory(dir, join(root, 'ckpt'))).toThrow(message)
  })

  it('a directory whose sub-directory molotof-memory also holds files of the user', () => {
    const dir = fresh()
    mkdirSync(join(dir, MEMORY_SUBDIRECTORY), { recursive: true })
    writeFileSync(join(dir, MEMORY_SUBDIRECTORY, 'mine.txt'), 'mine')
    expect(() => checkMemoryDirectory(dir, join(root, 'ckpt'))).toThrow(/holds files of yours, and so does its sub-directory molotof-memory/)
    expect(() => claimMemoryDirectory(dir)).toThrow(/molotof-memory holds files that are not molotof's/)
    expect(readdirSync(join(dir, MEMORY_SUBDIRECTORY))).toEqual(['mine.txt'])
  })

  it('the checkpoint directory itself', () => {
    expect(() => checkMemoryDirectory(join(root, 'ckpt'), join(root, 'ckpt'))).toThrow(/is the checkpoint directory/)
  })
})

describe('checkpoint folders the store deletes', () => {
  it('remove() and discardSpares() leave a user file planted in a checkpoint folder and in the spare folder', async () => {
    const dir = fresh()
    fillLikeTheStore(dir)
    writeFileSync(join(dir, 'ckpt-00000003', 'mine.txt'), 'mine')
    writeFileSync(join(dir, 'spare', 'mine.txt'), 'mine')
    const store = new CheckpointStore(dir)
    await store.remove(3)
    store.discardSpares()
    expect(readdirSync(join(dir, 'ckpt-00000003'))).toEqual(['mine.txt'])
    expect(readdirSync(join(dir, 'spare'))).toEqual(['mine.txt'])
  })

  it('discardSync() (the memory level) does the same', () => {
    const dir = fresh()
    fillLikeTheStore(dir)
    writeFileSync(join(dir, 'ckpt-00000003', 'mine.txt'), 'mine')
    new CheckpointStore(dir, { volatile: true }).discardSync(3)
    expect(readdirSync(join(dir, 'ckpt-00000003'))).toEqual(['mine.txt'])
  })
})

describe('folders of the user named like checkpoints', () => {
  it('are listed as not molotof\'s, with no files, and no deletion path touches them', async () => {
    const dir = fresh()
    const planted = plantNamesakes(dir)
    writeFileSync(join(dir, 'ckpt-00000007', 'rank-0.mlf.tmp-old'), 'mine')
    planted.push(join(dir, 'ckpt-00000007', 'rank-0.mlf.tmp-old'))
    const store = new CheckpointStore(dir)
    const listed = await store.list()
    expect(listed.map((c) => [c.seq, c.foreign, c.complete, c.files.length])).toEqual([[1, true, false, 0], [7, true, false, 0]])
    expect(await store.remove(1)).toBe(false)
    expect(await store.remove(7, { keepSpares: true })).toBe(false)
    expect(new CheckpointStore(dir, { volatile: true }).discardSync(7)).toBe(false)
    expect(await store.removeTemporaryFiles()).toBe(0)
    for (const f of planted) expect(readFileSync(f, 'utf8'), f).toBe('mine')
  })

  it('prune with keep 1 deletes the store\'s own older checkpoints, not the user\'s folders among them', async () => {
    const dir = fresh()
    const planted = plantNamesakes(dir)
    const store = new CheckpointStore(dir)
    for (const seq of [0, 2, 8, 9]) await commitOwn(store, seq)
    const pruned = await store.prune(1, { runId: 'r' })
    expect(pruned.removed).toEqual([0, 2, 8])
    expect(readdirSync(dir).filter((n) => n.startsWith('ckpt-')).sort()).toEqual(['ckpt-00000001', 'ckpt-00000007', 'ckpt-00000009'])
    for (const f of planted) expect(readFileSync(f, 'utf8'), f).toBe('mine')
  })

  it('a spare folder of the user\'s (no rank file of molotof\'s format) is left by discardSpares', () => {
    const dir = fresh()
    mkdirSync(join(dir, 'spare'), { recursive: true })
    writeFileSync(join(dir, 'spare', 'rank-0.mlf'), 'mine')
    new CheckpointStore(dir).discardSpares()
    expect(readFileSync(join(dir, 'spare', 'rank-0.mlf'), 'utf8')).toBe('mine')
  })

  it('a spare file of the user\'s is not overwritten by the next checkpoint write', async () => {
    const dir = fresh()
    mkdirSync(join(dir, 'spare'), { recursive: true })
    writeFileSync(join(dir, 'spare', 'rank-0.mlf'), 'mine')
    await new CheckpointStore(dir).writeRankFile(0, 0, [RANK_FILE_BYTES])
    expect(readFileSync(join(dir, 'spare', 'rank-0.mlf'), 'utf8')).toBe('mine')
    expect(readFileSync(join(dir, 'ckpt-00000000', 'rank-0.mlf'))).toEqual(Buffer.from(RANK_FILE_BYTES))
  })

  it('cleaning a memory level directory leaves them, partner copies included', () => {
    const dir = fresh()
    claimMemoryDirectory(dir)
    const planted = [...plantNamesakes(dir), ...plantNamesakes(join(dir, 'partner'))]
    const left = cleanOwnedDirectory(dir, isStoreEntry)
    expect(left.length).toBeGreaterThan(0)
    for (const f of planted) expect(readFileSync(f, 'utf8'), f).toBe('mine')
  })
})

describe('sweeping folders a killed process left', () => {
  const own = (name: string, dir: boolean) => !dir && name.endsWith('.sock')
  const marked = (base: string, name: string, pid: number, purpose = 'sockets', host = hostname(), extra: object = {}) => {
    const d = join(base, name)
    mkdirSync(d)
    writeFileSync(join(d, OWNED_MARKER), JSON.stringify({ purpose, pid, host, createdAt: 'then', created: true, ...extra }))
    writeFileSync(join(d, '0.sock'), '')
    return d
  }

  it('only marked folders of this host whose owner is dead, of the same purpose; a user file keeps its folder', () => {
    const base = fresh()
    mkdirSync(base)
    // A pid that surely is dead: a child that has exited.
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString()
    const gone = marked(base, 'p-gone', Number(dead))
    const live = marked(base, 'p-live', process.ppid)
    // The pid runs, but it is another process than the one that made the folder (a reused pid).
    const reused = marked(base, 'p-reused', process.ppid, 'sockets', hostname(), { pidStart: '1' })
    const other = marked(base, 'p-other', Number(dead), 'memory level')
    const remote = marked(base, 'p-remote', Number(dead), 'sockets', 'another-host')
    const withFile = marked(base, 'p-file', Number(dead))
    writeFileSync(join(withFile, 'mine.txt'), 'mine')
    const unmarked = join(base, 'p-unmarked')
    mkdirSync(unmarked)
    writeFileSync(join(unmarked, '0.sock'), '')
    expect(sweepAbandonedDirectories(base, 'p-', 'sockets', own).sort()).toEqual([gone, reused])
    expect(existsSync(gone)).toBe(false)
    expect(existsSync(reused)).toBe(false)
    for (const d of [live, other, remote, unmarked]) expect(existsSync(join(d, '0.sock'))).toBe(true)
    expect(readdirSync(withFile).sort()).toEqual([OWNED_MARKER, 'mine.txt'])
  })
})
