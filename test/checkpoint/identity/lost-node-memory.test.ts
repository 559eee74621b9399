// A finished cluster run frees the memory levels its lost nodes left on this
// host (same /dev/shm): only a directory molotof created, whose creator is
// gone, holding this run's checkpoints only, and in it only molotof's files.
// A later start with the same options is then not refused by them.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { openRunDirectory } from '../../../src/checkpoint/identity/run-directory.js'
import { CheckpointStore } from '../../../src/checkpoint/store/checkpoint-store.js'
import { OWNED_MARKER } from '../../../src/checkpoint/store/owned-dir.js'
import { matchingDirectories } from '../../../src/runtime/cluster-env.js'
import { FINGERPRINT, SETTINGS, tempDir, writeCheckpoint } from '../helpers.js'

let root: string
beforeEach(async () => {
  root = await tempDir('lost-node-memory')
})
afterEach(async () => {
  await rm(root, { recursive: true, force: true })
})

/** A memory level as a node's rank process leaves it when killed: created and marked by that (now gone) process, with a committed checkpoint of `runId`. */
async function leftByLostNode(dir: string, runId: string, creator: number): Promise<void> {
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, OWNED_MARKER), JSON.stringify({ purpose: 'memory level', pid: creator, host: hostname(), createdAt: new Date().toISOString(), created: true }) + '\n')
  const store = new CheckpointStore(dir, { volatile: true })
  await writeCheckpoint(store, 3, { size: 2, commit: false })
  const ranks = [0, 1].map((rank) => ({ rank, file: `rank-${rank}.mlf`, bytes: 0, headerChecksum: 0 }))
  await store.commit(3, { seq: 3, skeleton: 0, step: 30, size: 2, fingerprint: FINGERPRINT, settings: SETTINGS, ranks, createdAt: new Date().toISOString(), runId })
}

describe('memory levels of lost nodes', () => {
  it("freed when the run finishes (this run's only, the user's file kept); a later start is not refused", async () => {
    const options = { dir: join(root, 'ckpt-0'), resume: false, memoryDir: join(root, 'mem-{node}'), matchingDirectories }
    const gone = spawnSync('true').pid!
    const run = await openRunDirectory(options, 'examples/jacobi/jacobi.ts')
    // During the run: node 1 is lost with its memory level (a file of the user's beside it), node 2's holds another run's.
    await leftByLostNode(join(root, 'mem-1'), run.runId, gone)
    writeFileSync(join(root, 'mem-1', 'mine.txt'), 'mine')
    await leftByLostNode(join(root, 'mem-2'), 'another-run', gone)
    await run.finish()
    await run.release()
    // Its checkpoints gone; the user's file (and so the directory, still marked as the level's) stays.
    expect(readdirSync(join(root, 'mem-1')).filter((n) => n !== OWNED_MARKER)).toEqual(['mine.txt'])
    expect(readFileSync(join(root, 'mem-1', 'mine.txt'), 'utf8')).toBe('mine')
    expect(existsSync(join(root, 'mem-2', 'ckpt-00000003', 'COMMIT'))).toBe(true)

    // The user deletes the checkpoint directories and starts again: only another run's leftovers can refuse it.
    await rm(join(root, 'mem-2'), { recursive: true })
    await rm(join(root, 'ckpt-0'), { recursive: true })
    const again = await openRunDirectory(options, 'examples/jacobi/jacobi.ts')
    await again.release()
  })

  it('a lost node whose creator still runs, or a level with a checkpoint of another run, is left as it is', async () => {
    const options = { dir: join(root, 'ckpt-0'), resume: false, memoryDir: join(root, 'mem-{node}'), matchingDirectories }
    const run = await openRunDirectory(options, 'examples/jacobi/jacobi.ts')
    await leftByLostNode(join(root, 'mem-1'), run.runId, process.ppid)
    await leftByLostNode(join(root, 'mem-2'), run.runId, spawnSync('true').pid!)
    await writeCheckpoint(new CheckpointStore(join(root, 'mem-2'), { volatile: true }), 4, { size: 2 })
    await run.finish()
    await run.release()
    expect(existsSync(join(root, 'mem-1', 'ckpt-00000003', 'COMMIT'))).toBe(true)
    expect(existsSync(join(root, 'mem-2', 'ckpt-00000004', 'COMMIT'))).toBe(true)
  })
})
