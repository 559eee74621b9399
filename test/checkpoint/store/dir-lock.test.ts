// One run per checkpoint directory: a second run is refused at start naming
// the holder; a lock left by a run killed with SIGKILL is taken over.
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { acquireDirectoryLock, LOCK_FILE } from '../../../src/checkpoint/store/dir-lock.js'
import { DirectoryLockedError } from '../../../src/errors.js'
import { Supervisor } from '../../../src/runtime/launch/supervisor.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
function freshDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'molotof-lock-'))
  dirs.push(d)
  return d
}

/** A process that takes the lock of `dir` through molotof, says so, and waits to be killed. */
function lockHolderProcess(dir: string): Promise<{ pid: number; exited: Promise<void> }> {
  const code = `import('./src/checkpoint/store/dir-lock.ts').then((m) => m.acquireDirectoryLock(${JSON.stringify(dir)})).then(() => { console.log('locked'); setInterval(() => {}, 1000) })`
  const child = spawn(process.execPath, ['--import', 'tsx', '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] })
  const exited = new Promise<void>((res) => child.on('exit', () => res()))
  return new Promise((res, rej) => {
    child.stdout.on('data', (b: Buffer) => {
      if (b.toString().includes('locked')) res({ pid: child.pid!, exited })
    })
    child.on('exit', (c) => rej(new Error(`the lock holder exited with ${c}`)))
  })
}

describe('checkpoint directory lock', () => {
  it('a second run is refused at start, naming the holder (pid, host, start time); release lets the next one in', async () => {
    const dir = freshDir()
    const first = await acquireDirectoryLock(dir)
    const e = await acquireDirectoryLock(dir).catch((x: unknown) => x)
    expect(e).toBeInstanceOf(DirectoryLockedError)
    expect((e as DirectoryLockedError).holder).toMatchObject({ pid: process.pid, host: hostname(), startedAt: first.holder.startedAt })
    expect((e as Error).message).toMatch(new RegExp(`in use by another run: pid ${process.pid} on ${hostname()}, started ${first.holder.startedAt}\\. Wait for it`))
    await first.release()
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false)
    const second = await acquireDirectoryLock(dir)
    expect(second.tookOver).toBeUndefined()
    await second.release()
  })

  it('two supervised runs on one directory: the second fails at once with the lock error, the first finishes', async () => {
    const dir = freshDir()
    const sup = (ranks: number) =>
      new Supervisor('examples/jacobi/jacobi.ts', {
        ranks,
        argv: ['--n', '30', '--iterations', '300'],
        checkpoint: { dir, policy: { every: 50 }, keep: 2, resume: false },
        onLog: () => {},
      })
    const running = sup(2).run()
    while (!existsSync(join(dir, LOCK_FILE))) await new Promise((r) => setTimeout(r, 5))
    const second = await sup(1).run().catch((x: unknown) => x)
    expect(second).toBeInstanceOf(DirectoryLockedError)
    expect((second as Error).message).toMatch(/is in use by another run: pid \d+ on /)
    expect((await running).kind).toBe('done')
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false)
  })

  it('a lock left by a process killed with SIGKILL is taken over', async () => {
    const dir = freshDir()
    const holder = await lockHolderProcess(dir)
    const refused = await acquireDirectoryLock(dir).catch((x: unknown) => x)
    expect(refused).toBeInstanceOf(DirectoryLockedError)
    expect((refused as DirectoryLockedError).holder.pid).toBe(holder.pid)
    process.kill(holder.pid, 'SIGKILL')
    await holder.exited
    expect(JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8')).pid).toBe(holder.pid) // left behind
    const lock = await acquireDirectoryLock(dir)
    expect(lock.tookOver?.pid).toBe(holder.pid)
    expect(JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8')).pid).toBe(process.pid)
    await lock.release()
  }, 30_000)

  it('a lock left by a killed run not reaped yet (a zombie: its parent is busy) is taken over at once', async () => {
    const dir = freshDir()
    // The holder's parent becomes `sleep`, which never reaps it: once killed, it stays a zombie.
    const code = `import('./src/checkpoint/store/dir-lock.ts').then((m) => m.acquireDirectoryLock(process.env.LOCK_DIR)).then(() => { console.log('locked'); setInterval(() => {}, 1000) })`
    const parent = spawn('sh', ['-c', `"${process.execPath}" --import tsx -e "$LOCK_CODE" & echo "pid $!"; exec sleep 60`], {
      env: { ...process.env, LOCK_CODE: code, LOCK_DIR: dir },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    try {
      let out = ''
      await new Promise<void>((res, rej) => {
        parent.stdout.on('data', (b: Buffer) => {
          out += b.toString()
          if (out.includes('locked')) res()
        })
        parent.on('exit', (c) => rej(new Error(`the lock holder's parent exited with ${c}`)))
      })
      const pid = Number(/pid (\d+)/.exec(out)![1])
      process.kill(pid, 'SIGKILL')
      const state = () => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1][0]
      while (state() !== 'Z') await new Promise((r) => setTimeout(r, 5))
      const lock = await acquireDirectoryLock(dir)
      expect(lock.tookOver?.pid).toBe(pid)
      await lock.release()
    } finally {
      parent.kill('SIGKILL')
    }
  }, 30_000)

  it('a lock whose pid now belongs to another process (reused pid) is stale; one from another host is not', async () => {
    const dir = freshDir()
    const lockFile = join(dir, LOCK_FILE)
    writeFileSync(lockFile, JSON.stringify({ pid: process.pid, host: hostname(), startedAt: '2020-01-01T00:00:00.000Z', pidStart: '1' }))
    const lock = await acquireDirectoryLock(dir)
    expect(lock.tookOver?.startedAt).toBe('2020-01-01T00:00:00.000Z')
    await lock.release()
    writeFileSync(lockFile, JSON.stringify({ pid: 12345, host: 'elsewhere', startedAt: '2020-01-01T00:00:00.000Z' }))
    const e = await acquireDirectoryLock(dir).catch((x: unknown) => x)
    expect(e).toBeInstanceOf(DirectoryLockedError)
    expect((e as Error).message).toMatch(/pid 12345 on elsewhere.*cannot tell .* whether it still runs.*delete .*LOCK/)
  })
})
