// The exit status of `molotof run` per way a run ends, as `molotof run --help`
// lists them: 0 done, 1 the run failed, 2 bad input, 75 preempted.
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { main } from '../../src/cli/main.js'
import { acquireDirectoryLock } from '../../src/checkpoint/store/dir-lock.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-exit-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
let dirs = 0
const freshDir = () => join(root, `d${dirs++}`)

/** `molotof run …` in this process (bin.ts sets the exit status to what main returns). */
async function run(...args: string[]): Promise<{ code: number; text: string }> {
  const out: string[] = []
  const code = await main(['run', ...args, '--quiet'], (s) => out.push(s), (s) => out.push(s))
  return { code, text: out.join('\n') }
}

/**
 * `molotof run …` as a real process, sent `signals` (one after the other,
 * `gapMs` apart) once its events file shows `ready`.
 */
async function runAndSignal(args: string[], ready: (e: { event: string }) => boolean, signals: NodeJS.Signals[], gapMs = 0) {
  const events = join(root, `events-${dirs++}.jsonl`)
  const child = spawn(process.execPath, ['bin/molotof.mjs', 'run', ...args, '--events', events], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()))
  child.stdout.resume()
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  const seen = () => existsSync(events) && readFileSync(events, 'utf8').split('\n').filter(Boolean).some((l) => ready(JSON.parse(l)))
  for (const until = Date.now() + 30_000; !seen() && child.exitCode === null && Date.now() < until; ) await new Promise((r) => setTimeout(r, 50))
  for (const [i, s] of signals.entries()) {
    if (i > 0) await new Promise((r) => setTimeout(r, gapMs))
    child.kill(s)
  }
  return { code: await exited, stderr }
}

describe('molotof run: exit status per way a run ends', () => {
  it('0 when the run finishes', async () => {
    const r = await run('examples/jacobi/jacobi.ts', '--ranks', '2', '--n', '8', '--iterations', '4', '--checkpoint-dir', freshDir())
    expect(r.code).toBe(0)
    expect(r.text).toMatch(/checksum/)
  })

  it('2 for a bad framework option and for a bad program option (found by the ranks)', async () => {
    expect((await run('examples/jacobi/jacobi.ts', '--ranks', '0')).code).toBe(2)
    const r = await run('examples/jacobi/jacobi.ts', '--ranks', '2', '--iterashuns', '4', '--checkpoint-dir', freshDir())
    expect(r.code).toBe(2)
    expect(r.text).toMatch(/unknown option --iterashuns/)
  })

  it('2 when resuming with settings other than the checkpoint\'s', async () => {
    const dir = freshDir()
    const common = ['examples/jacobi/jacobi.ts', '--ranks', '2', '--iterations', '6', '--checkpoint', 'every:2', '--checkpoint-dir', dir]
    expect((await run(...common, '--n', '8')).code).toBe(0)
    const r = await run(...common, '--n', '10', '--resume')
    expect(r.code).toBe(2)
    expect(r.text).toMatch(/cannot resume: the checkpoint was taken with other settings\n {2}n: 8 → 10/)
  })

  it('2 when another run holds the checkpoint directory: refused at start, naming the holder', async () => {
    const dir = freshDir()
    mkdirSync(dir)
    const lock = await acquireDirectoryLock(dir)
    try {
      const r = await run('examples/jacobi/jacobi.ts', '--ranks', '2', '--n', '8', '--iterations', '4', '--checkpoint-dir', dir)
      expect(r.code).toBe(2)
      expect(r.text).toMatch(new RegExp(`is in use by another run: pid ${process.pid} on \\S+, started ${lock.holder.startedAt}`))
      expect(r.text).not.toMatch(/checksum/)
    } finally {
      await lock.release()
    }
  })

  it('1 when the program throws on every attempt until the restart budget runs out', async () => {
    const r = await run('test/fixtures/faulty.ts', '--ranks', '2', '--fail-rank', '1', '--fail-step', '3', '--restarts', '1', '--checkpoint-dir', freshDir())
    expect(r.code).toBe(1)
    expect(r.text).toMatch(/gave up after 2 failure\(s\) \(restart budget 1\)[\s\S]*deliberate failure/)
  })

  it('1 when the disk is full at a checkpoint', async () => {
    const r = await run('test/fixtures/faulty.ts', '--ranks', '2', '--disk-full', '--checkpoint', 'every:2', '--checkpoint-dir', freshDir())
    expect(r.code).toBe(1)
    expect(r.text).toMatch(/checkpoint 0 could not be written[\s\S]*no space left on the device \(disk full\) \(ENOSPC\)/)
  })

  it('75 when preempted by SIGTERM: the ranks checkpoint and stop, and the message says how to resume', async () => {
    const dir = freshDir()
    const r = await runAndSignal(
      ['examples/jacobi/jacobi.ts', '--ranks', '2', '--n', '32', '--iterations', '10000000', '--checkpoint-dir', dir],
      (e) => e.event === 'progress',
      ['SIGTERM'],
    )
    expect(r.code).toBe(75)
    expect(r.stderr).toMatch(/preempted: checkpoint \d+ \(skeleton 0, step \d+\)[\s\S]*--resume/)
  })

  it('--status-file holds the outcome: running from the start, then 75 resumable with the resume command, or 0 done', async () => {
    const status = join(root, 'status.json')
    const dir = freshDir()
    const args = ['examples/jacobi/jacobi.ts', '--ranks', '2', '--n', '32', '--iterations', '10000000', '--checkpoint-dir', dir, '--status-file', status]
    const r = await runAndSignal(args, (e) => e.event === 'progress' && existsSync(status) && JSON.parse(readFileSync(status, 'utf8')).state === 'running', ['SIGTERM'])
    expect(r.code, r.stderr).toBe(75)
    const stopped = JSON.parse(readFileSync(status, 'utf8')) as { resume: string }
    expect(stopped).toMatchObject({ state: 'ended', exitCode: 75, outcome: 'preempted', resumable: true, message: null })
    expect(stopped.resume.startsWith(`molotof run ${args.join(' ')} --events `) && stopped.resume.endsWith(' --resume')).toBe(true)
    expect(r.stderr).toContain(`Resume with: ${stopped.resume}`)

    const done = await run('examples/jacobi/jacobi.ts', '--ranks', '2', '--n', '8', '--iterations', '4', '--checkpoint-dir', freshDir(), '--status-file', status)
    expect(done.code).toBe(0)
    expect(JSON.parse(readFileSync(status, 'utf8'))).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done', resumable: false, resume: null })
    const refused = await run('examples/jacobi/jacobi.ts', '--ranks', '2', '--n', '8', '--iterashuns', '4', '--checkpoint-dir', freshDir(), '--status-file', status)
    expect(refused.code).toBe(2)
    expect(JSON.parse(readFileSync(status, 'utf8'))).toMatchObject({ exitCode: 2, outcome: 'bad-input', resumable: false, message: expect.stringMatching(/--iterashuns/) })
  })

  it('1 after the restart budget: the message and --status-file give the command that resumes once the cause is fixed, and it resumes', async () => {
    const status = join(root, 'status-gave-up.json')
    const dir = freshDir()
    const r = await run('examples/jacobi/jacobi.ts', '--ranks', '2', '--n', '16', '--iterations', '40', '--checkpoint', 'every:10', '--checkpoint-dir', dir, '--inject', 'rank=1,step=25', '--restarts', '0', '--status-file', status)
    expect(r.code, r.text).toBe(1)
    const ended = JSON.parse(readFileSync(status, 'utf8')) as { resume: string | null; resumable: boolean; exitCode: number }
    expect(ended).toMatchObject({ exitCode: 1, outcome: 'failed', resumable: false })
    expect(ended.resume).toMatch(/ --resume$/)
    expect(r.text).toContain(`resume from the last complete checkpoint with: ${ended.resume}`)
    // The cause here is the injection: the same command without it resumes from step 19's checkpoint.
    const events = join(root, 'gave-up-events.jsonl')
    const again = await run('examples/jacobi/jacobi.ts', '--ranks', '2', '--n', '16', '--iterations', '40', '--checkpoint', 'every:10', '--checkpoint-dir', dir, '--resume', '--events', events)
    expect(again.code, again.text).toBe(0)
    const resumed = readFileSync(events, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { event: string; step?: number }).find((e) => e.event === 'resume')
    expect(resumed?.step).toBe(19)
  })

  it('75, not 1, when one SIGTERM arrives twice at once (a group signal, and the copy a wrapper such as npx forwards)', async () => {
    const r = await runAndSignal(
      ['examples/jacobi/jacobi.ts', '--ranks', '2', '--n', '32', '--iterations', '10000000', '--checkpoint-dir', freshDir()],
      (e) => e.event === 'progress',
      ['SIGTERM', 'SIGTERM'],
      20,
    )
    expect(r.code, r.stderr).toBe(75)
    expect(r.stderr).toMatch(/preempted: checkpoint \d+ \(skeleton 0, step \d+\)/)
    expect(r.stderr).not.toMatch(/again: stopping at once/)
  })

  it('1 when a second signal stops the run before the ranks could checkpoint', async () => {
    // The ranks spin for 20 s in one calculate: no checkpoint point comes between the two signals.
    const r = await runAndSignal(
      ['test/fixtures/busy.ts', '--ranks', '2', '--steps', '3', '--busy-step', '1', '--busy-ms', '20000', '--checkpoint-dir', freshDir()],
      (e) => e.event === 'progress',
      ['SIGTERM', 'SIGTERM'],
      1000, // a copy within half a second would be the same request
    )
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/stopped \(SIGTERM\) before the ranks could checkpoint/)
  })
})
