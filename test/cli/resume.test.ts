// `molotof run --resume` never starts from step 0 unasked: it reads every
// level the run may have left checkpoints on (the memory level too, without
// --memory-checkpoint), refuses (exit 2) when it finds nothing or nothing
// usable, and `--resume-or-start` starts afresh only when there is nothing.
// Runs the CLI in this process (threads transport).
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { checksumOf, eventsOf, run, sandbox, straight } from './jacobi-cli.js'
import { memoryDirFor, RAM_ROOT } from '../../src/checkpoint/store/memory-level.js'

const { root, ramDirs } = sandbox('molotof-resume-')

/** A run with memory checkpoints only that fails for good at step 33: its checkpoints are on the memory level alone. */
async function failWithMemoryCheckpoints(dir: string, memoryDir?: string): Promise<number> {
  const events = join(root, `${dir.split('/').pop()}-first.jsonl`)
  const memory = memoryDir === undefined ? [] : ['--memory-dir', memoryDir]
  const first = await run('--checkpoint-dir', dir, '--memory-checkpoint', 'every:5', ...memory, '--inject', 'rank=1,step=33', '--restarts', '0', '--quiet', '--events', events)
  expect(first.code).toBe(1)
  // Nothing on disk: the memory level holds the run's progress.
  expect(readdirSync(dir).filter((n) => n.startsWith('ckpt-'))).toEqual([])
  const memorySteps = eventsOf(events).filter((e) => e.event === 'checkpoint' && e.level === 'memory').map((e) => e.step!)
  expect(memorySteps.length).toBeGreaterThan(0)
  return memorySteps[memorySteps.length - 1]
}

describe.skipIf(!existsSync(RAM_ROOT))('--resume reads the memory level without --memory-checkpoint', () => {
  it('resumes from the memory checkpoint (the default memory directory), bit-identical to a run without failures', async () => {
    const dir = join(root, 'mem')
    ramDirs.push(memoryDirFor(dir))
    const step = await failWithMemoryCheckpoints(dir)
    const events = join(root, 'mem-resume.jsonl')
    const resumed = await run('--checkpoint-dir', dir, '--resume', '--events', events)
    expect(resumed.code, resumed.err).toBe(0)
    const resume = eventsOf(events).find((e) => e.event === 'resume')
    expect(resume).toMatchObject({ level: 'memory', step })
    expect(checksumOf(resumed.out)).toBe(straight)
  })

  it('with a memory level of its own elsewhere this time, it still reads the earlier run\'s', async () => {
    const dir = join(root, 'mem-moved')
    ramDirs.push(memoryDirFor(dir))
    const step = await failWithMemoryCheckpoints(dir)
    const elsewhere = join(RAM_ROOT, `molotof-test-moved-${process.pid}`)
    ramDirs.push(elsewhere)
    const events = join(root, 'mem-moved-resume.jsonl')
    const resumed = await run('--checkpoint-dir', dir, '--memory-checkpoint', 'every:5', '--memory-dir', elsewhere, '--resume', '--events', events)
    expect(resumed.code, resumed.err).toBe(0)
    expect(eventsOf(events).find((e) => e.event === 'resume')).toMatchObject({ level: 'memory', step })
    expect(checksumOf(resumed.out)).toBe(straight)
  })

  it('finds a memory level given with --memory-dir from the checkpoint directory\'s record', async () => {
    const dir = join(root, 'memdir')
    const memoryDir = join(RAM_ROOT, `molotof-test-resume-${process.pid}`)
    ramDirs.push(memoryDir)
    const step = await failWithMemoryCheckpoints(dir, memoryDir)
    const events = join(root, 'memdir-resume.jsonl')
    const resumed = await run('--checkpoint-dir', dir, '--resume', '--events', events)
    expect(resumed.code, resumed.err).toBe(0)
    expect(eventsOf(events).find((e) => e.event === 'resume')).toMatchObject({ level: 'memory', step })
    expect(checksumOf(resumed.out)).toBe(straight)
  })
})

describe('--resume reads the shared level whenever --shared-dir names it', () => {
  it('the checkpoint directory lost, `--resume --shared-dir` without --shared-checkpoint resumes from the shared copies', async () => {
    const dir = join(root, 'sh-ckpt')
    const shared = join(root, 'shared')
    const first = await run('--checkpoint-dir', dir, '--checkpoint', 'every:10', '--shared-dir', shared, '--shared-checkpoint', 'every:1', '--inject', 'rank=1,step=33', '--restarts', '0', '--quiet')
    expect(first.code).toBe(1)
    expect(readdirSync(join(shared, 'jacobi')).filter((n) => n.startsWith('ckpt-')).length).toBeGreaterThan(0)
    rmSync(dir, { recursive: true })
    const events = join(root, 'sh-resume.jsonl')
    const resumed = await run('--checkpoint-dir', dir, '--checkpoint', 'every:10', '--shared-dir', shared, '--resume', '--events', events)
    expect(resumed.code, resumed.err).toBe(0)
    const resume = eventsOf(events).find((e) => e.event === 'resume')
    expect(resume?.level).toBe('shared')
    expect([9, 19, 29]).toContain(resume?.step)
    expect(checksumOf(resumed.out)).toBe(straight)
  })
})

describe('--resume with nothing to resume', () => {
  it('an empty checkpoint directory: refused with exit 2, saying where it looked', async () => {
    const dir = join(root, 'empty')
    const r = await run('--checkpoint-dir', dir, '--checkpoint', 'every:10', '--resume', '--quiet')
    expect(r.code).toBe(2)
    expect(r.out).toBe('')
    expect(r.err).toContain(`--resume found no checkpoint of this run to resume; it looked in`)
    expect(r.err).toContain(dir)
    expect(r.err).toMatch(/--resume-or-start/)
  })

  it('leaves the directory as it found it: none made where there was none, nothing written beside the user\'s files', async () => {
    const none = join(root, 'never-made')
    expect((await run('--checkpoint-dir', none, '--checkpoint', 'every:10', '--resume', '--quiet')).code).toBe(2)
    expect(existsSync(none)).toBe(false)
    const users = join(root, 'users-own')
    mkdirSync(users)
    writeFileSync(join(users, 'notes.txt'), 'mine')
    expect((await run('--checkpoint-dir', users, '--checkpoint', 'every:10', '--resume', '--quiet')).code).toBe(2)
    expect(readdirSync(users)).toEqual(['notes.txt'])
  })

  it('--resume-or-start on an empty directory starts afresh and says so; with checkpoints there it resumes', async () => {
    const dir = join(root, 'or-start')
    const events = join(root, 'or-start.jsonl')
    const fresh = await run('--checkpoint-dir', dir, '--checkpoint', 'every:10', '--resume-or-start', '--events', events)
    expect(fresh.code, fresh.err).toBe(0)
    expect(fresh.out).toMatch(/--resume-or-start: no checkpoint of this run in .*or-start.*: starting afresh/)
    expect(eventsOf(events).some((e) => e.event === 'resume')).toBe(false)
    expect(checksumOf(fresh.out)).toBe(straight)

    // The same command again: the checkpoints of that run are there (the last at step 39), so it resumes.
    const again = await run('--checkpoint-dir', dir, '--checkpoint', 'every:10', '--resume-or-start', '--events', events)
    expect(again.code, again.err).toBe(0)
    expect(again.out).not.toMatch(/starting afresh/)
    expect(eventsOf(events).find((e) => e.event === 'resume')).toMatchObject({ step: 39 })
    expect(checksumOf(again.out)).toBe(straight)
  })

  it('checkpoints there but every one damaged: refused with exit 2, naming each file and why', async () => {
    const dir = join(root, 'damaged')
    const first = await run('--checkpoint-dir', dir, '--checkpoint', 'every:10', '--inject', 'rank=1,step=33', '--restarts', '0', '--quiet')
    expect(first.code).toBe(1)
    const ckpts = readdirSync(dir).filter((n) => n.startsWith('ckpt-')).sort()
    expect(ckpts.length).toBe(2)
    for (const c of ckpts) {
      const file = join(dir, c, 'rank-0.mlf')
      const bytes = readFileSync(file)
      bytes[bytes.length - 8] ^= 0xff
      writeFileSync(file, bytes)
    }
    const r = await run('--checkpoint-dir', dir, '--checkpoint', 'every:10', '--resume', '--quiet')
    expect(r.code).toBe(2)
    expect(r.out).toBe('')
    expect(r.err).toMatch(/--resume found checkpoints of this run but none it can use; it looked in .*damaged/)
    for (const c of ckpts) expect(r.err).toContain(`${join(dir, c, 'rank-0.mlf')}: `)
    expect(r.err).toMatch(/checksum mismatch/)
    // --resume-or-start does not start afresh over them either.
    const orStart = await run('--checkpoint-dir', dir, '--checkpoint', 'every:10', '--resume-or-start', '--quiet')
    expect(orStart.code).toBe(2)
    expect(orStart.err).toMatch(/none it can use/)
  })

  it('--resume-or-start with --fresh is refused', async () => {
    const r = await run('--checkpoint-dir', join(root, 'both'), '--resume-or-start', '--fresh')
    expect(r.code).toBe(2)
    expect(r.err).toMatch(/--fresh discards the checkpoints that --resume-or-start would continue from/)
  })
})
