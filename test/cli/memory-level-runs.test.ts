// The memory level belongs to its run as the checkpoint directory does: an
// unfinished run's memory checkpoints refuse a start without --resume (exit
// 2, whether or not --memory-checkpoint is given again), --fresh discards
// them, a finished resume frees the level it resumed from, and a resume reads
// a level named with --memory-dir alone. Mostly in this process (threads
// transport); the killed supervisor is a child process (processes transport).
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import { checksumOf, eventsOf, run, sandbox, straight } from './jacobi-cli.js'
import { memoryDirFor, RAM_ROOT } from '../../src/checkpoint/store/memory-level.js'

const { root, ramDirs } = sandbox('molotof-memory-runs-')
const checkpointFolders = (dir: string) => (existsSync(dir) ? readdirSync(dir).filter((n) => n.startsWith('ckpt-')) : [])

/** A run with memory checkpoints only that fails for good at step 33; returns the step of its last memory checkpoint. */
async function failWithMemoryCheckpoints(dir: string, memoryDir?: string): Promise<number> {
  const events = join(root, `${dir.split('/').pop()}-first.jsonl`)
  const memory = memoryDir === undefined ? [] : ['--memory-dir', memoryDir]
  const first = await run('--checkpoint-dir', dir, '--memory-checkpoint', 'every:5', ...memory, '--inject', 'rank=1,step=33', '--restarts', '0', '--quiet', '--events', events)
  expect(first.code).toBe(1)
  expect(checkpointFolders(dir)).toEqual([])
  const steps = eventsOf(events).filter((e) => e.event === 'checkpoint' && e.level === 'memory').map((e) => e.step!)
  expect(steps.length).toBeGreaterThan(0)
  return steps[steps.length - 1]
}

/** The refusal of a start over an unfinished run's memory checkpoints: exit 2, the level named, the ways on given. */
function expectRefusedOverMemory(r: { code: number; out: string; err: string }, level: string): void {
  expect(r.code, r.err).toBe(2)
  expect(checksumOf(r.out)).toBeNaN() // nothing computed
  expect(r.err).toContain(`the memory level ${level} `)
  expect(r.err).toMatch(/holds checkpoints of an earlier run that did not finish/)
  expect(r.err).toMatch(/add --resume.*add --fresh.*another --checkpoint-dir/)
}

describe.skipIf(!existsSync(RAM_ROOT))('a start without --resume over an unfinished run kept on the memory level', () => {
  it('is refused (exit 2) with or without --memory-checkpoint, keeps the checkpoints, and --resume continues from them', async () => {
    const dir = join(root, 'refused')
    const level = memoryDirFor(dir)
    ramDirs.push(level)
    const step = await failWithMemoryCheckpoints(dir)
    expectRefusedOverMemory(await run('--checkpoint-dir', dir, '--memory-checkpoint', 'every:5'), level)
    expectRefusedOverMemory(await run('--checkpoint-dir', dir), level)
    expect(checkpointFolders(level).length).toBeGreaterThan(0)

    const events = join(root, 'refused-resume.jsonl')
    const resumed = await run('--checkpoint-dir', dir, '--resume', '--events', events)
    expect(resumed.code, resumed.err).toBe(0)
    expect(eventsOf(events).find((e) => e.event === 'resume')).toMatchObject({ level: 'memory', step })
    expect(checksumOf(resumed.out)).toBe(straight)
  })

  it('a --memory-dir holding files of the user\'s: refused naming the level\'s own sub-directory; --fresh discards only molotof\'s files', async () => {
    const dir = join(root, 'given')
    const memoryDir = join(RAM_ROOT, `molotof-test-unfinished-${process.pid}`)
    ramDirs.push(memoryDir)
    mkdirSync(memoryDir, { recursive: true })
    writeFileSync(join(memoryDir, 'user.txt'), 'mine')
    await failWithMemoryCheckpoints(dir, memoryDir)
    const level = join(memoryDir, 'molotof-memory')
    expect(checkpointFolders(level).length).toBeGreaterThan(0)
    // Named by the checkpoint directory's record: found without --memory-dir too.
    expectRefusedOverMemory(await run('--checkpoint-dir', dir), level)
    expectRefusedOverMemory(await run('--checkpoint-dir', dir, '--memory-checkpoint', 'every:5', '--memory-dir', memoryDir), level)

    const fresh = await run('--checkpoint-dir', dir, '--fresh')
    expect(fresh.code, fresh.err).toBe(0)
    expect(fresh.out).toContain(`--fresh: discarded`)
    expect(fresh.out).toContain(`in the memory level ${level}`)
    expect(checksumOf(fresh.out)).toBe(straight)
    expect(checkpointFolders(level)).toEqual([])
    expect(readdirSync(memoryDir)).toEqual(['user.txt'])
    // Nothing left to resume: the fresh run finished, the memory checkpoints are gone.
    const resume = await run('--checkpoint-dir', dir, '--resume')
    expect(resume.code).toBe(2)
    expect(resume.err).toMatch(/found no checkpoint/)
  })

  it('after the supervisor was killed (SIGKILL, processes transport), a plain rerun is refused', async () => {
    const dir = join(root, 'killed')
    const level = memoryDirFor(dir)
    ramDirs.push(level)
    const events = join(root, 'killed.jsonl')
    const bin = resolve('bin/molotof.mjs')
    const args = ['run', 'examples/jacobi/jacobi.ts', '--ranks', '2', '--transport', 'processes', '--n', '64', '--checkpoint-dir', dir, '--memory-checkpoint', 'every:50']
    const child = spawn(process.execPath, [bin, ...args, '--iterations', '20000', '--events', events], { stdio: ['ignore', 'ignore', 'pipe'] })
    const done = new Promise<void>((res) => child.on('close', () => res()))
    const memoryCheckpoints = () => (existsSync(events) ? eventsOf(events).filter((e) => e.event === 'checkpoint' && e.level === 'memory').length : 0)
    for (const t0 = Date.now(); memoryCheckpoints() < 2; ) {
      if (Date.now() - t0 > 60_000) throw new Error('no memory checkpoint in 60 s')
      await new Promise((r) => setTimeout(r, 20))
    }
    child.kill('SIGKILL')
    await done
    // The ranks notice their supervisor is gone and end; the memory level stays, with the run's checkpoints.
    expect(checkpointFolders(level).length).toBeGreaterThan(0)
    expect(checkpointFolders(dir)).toEqual([])

    const again = spawnSync(process.execPath, [bin, ...args, '--iterations', '20'], { encoding: 'utf8', timeout: 90_000 })
    expectRefusedOverMemory({ code: again.status ?? -1, out: again.stdout, err: again.stderr }, level)
    expect(checkpointFolders(level).length).toBeGreaterThan(0)
  }, 120_000)
})

describe.skipIf(!existsSync(RAM_ROOT))('a resume from a memory level this run does not keep', () => {
  it('frees that level once the run finished', async () => {
    const dir = join(root, 'freed')
    const level = memoryDirFor(dir)
    ramDirs.push(level)
    await failWithMemoryCheckpoints(dir)
    expect(existsSync(level)).toBe(true)
    const resumed = await run('--checkpoint-dir', dir, '--resume')
    expect(resumed.code, resumed.err).toBe(0)
    expect(checksumOf(resumed.out)).toBe(straight)
    expect(existsSync(level)).toBe(false)
  })

  it('a refused --resume leaves no memory directory it created only to look into', async () => {
    const dir = join(root, 'looked')
    const level = memoryDirFor(dir)
    ramDirs.push(level)
    const r = await run('--checkpoint-dir', dir, '--memory-checkpoint', 'every:5', '--resume')
    expect(r.code).toBe(2)
    expect(r.err).toMatch(/found no checkpoint/)
    expect(existsSync(level)).toBe(false)
  })

  it('--resume --memory-dir without --memory-checkpoint reads the level there', async () => {
    const dir = join(root, 'named')
    const memoryDir = join(RAM_ROOT, `molotof-test-named-${process.pid}`)
    ramDirs.push(memoryDir)
    const step = await failWithMemoryCheckpoints(dir, memoryDir)
    // Without the checkpoint directory's record of it, only --memory-dir says where the level is.
    rmSync(join(dir, 'RUN'))
    const events = join(root, 'named-resume.jsonl')
    const resumed = await run('--checkpoint-dir', dir, '--resume', '--memory-dir', memoryDir, '--events', events)
    expect(resumed.code, resumed.err).toBe(0)
    expect(eventsOf(events).find((e) => e.event === 'resume')).toMatchObject({ level: 'memory', step })
    expect(checksumOf(resumed.out)).toBe(straight)
    expect(existsSync(memoryDir)).toBe(false)
  })
})

describe('--resume-or-start with --log events', () => {
  it('tells the batch log it started afresh', async () => {
    const dir = join(root, 'or-start-events')
    const r = await run('--checkpoint-dir', dir, '--checkpoint', 'every:10', '--resume-or-start', '--log', 'events')
    expect(r.code, r.err).toBe(0)
    expect(`${r.out}\n${r.err}`).toMatch(/--resume-or-start: no checkpoint of this run in .*or-start-events.*: starting afresh/)
    expect(checksumOf(r.out)).toBe(straight)
  })
})
