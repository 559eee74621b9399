// molotof deletes only what molotof created. A user's file is planted in (or
// beside) every directory a run may clean, and must survive every way a run
// ends: finished, failed (restart budget spent), --fresh, preempted (exit 75)
// then resumed, and a supervisor killed outright then the next run. Every run
// is a child process with its current and home directory in a sandbox: a
// refusal that failed to happen harms nothing of the machine's.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeEach, describe, expect, it } from 'vitest'
import { memoryDirFor } from '../../src/checkpoint/store/memory-level.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-cleaning-'))
const sandbox = join(root, 'sandbox')
const home = join(root, 'home')
/** The sandbox's current and home directory, each with a file of the user's (again: a case that deleted them fails alone). */
function makeSandbox(): void {
  mkdirSync(sandbox, { recursive: true })
  mkdirSync(home, { recursive: true })
  writeFileSync(join(sandbox, 'precious.txt'), 'cwd')
  writeFileSync(join(home, 'precious.txt'), 'home')
}
makeSandbox()
afterAll(() => rmSync(root, { recursive: true, force: true }))

const BIN = resolve('bin/molotof.mjs')
const JACOBI = resolve('examples/jacobi/jacobi.ts')
const env = { ...process.env, HOME: home }

function run(args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, [BIN, 'run', JACOBI, ...args], { cwd: sandbox, env, encoding: 'utf8', timeout: 90_000 })
  return { code: r.status, out: r.stdout, err: r.stderr }
}

interface Cli {
  pid: number
  stderr: () => string
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/** `molotof run …` as the leader of its own process group, as from a shell. */
function start(args: string[]): Cli {
  const child = spawn(process.execPath, [BIN, 'run', JACOBI, ...args], { cwd: sandbox, env, detached: true, stdio: ['ignore', 'ignore', 'pipe'] })
  let err = ''
  child.stderr.on('data', (b: Buffer) => (err += b.toString()))
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) => child.on('close', (code, signal) => res({ code, signal })))
  return { pid: child.pid!, stderr: () => err, done }
}

async function until(what: () => boolean, timeoutMs = 60_000): Promise<void> {
  for (const t0 = Date.now(); !what(); ) {
    if (Date.now() - t0 > timeoutMs) throw new Error('timed out waiting')
    await new Promise((r) => setTimeout(r, 20))
  }
}

function progressIn(events: string): number {
  if (!existsSync(events)) return -1
  let step = -1
  for (const line of readFileSync(events, 'utf8').split('\n')) if (line.includes('"event":"progress"')) step = Math.max(step, JSON.parse(line).step as number)
  return step
}

/** A directory of the user's holding one file; returns the file. */
function userDir(dir: string): string {
  mkdirSync(dir, { recursive: true })
  const file = join(dir, 'user.txt')
  writeFileSync(file, 'mine')
  return file
}

function sandboxIntact(): void {
  expect(readFileSync(join(sandbox, 'precious.txt'), 'utf8')).toBe('cwd')
  expect(readFileSync(join(home, 'precious.txt'), 'utf8')).toBe('home')
}

describe('a finished run', () => {
  it('leaves a --memory-dir holding a file, and the file (the reported loss)', () => {
    const mem = join(root, 'finish-mem')
    const file = userDir(mem)
    const r = run(['--n', '64', '--iterations', '20', '--memory-checkpoint', 'every:5', '--memory-dir', mem, '--checkpoint-dir', join(root, 'finish-ckpt')])
    expect(r.code, r.err).toBe(0)
    expect(readFileSync(file, 'utf8')).toBe('mine')
    // The memory level's own sub-directory is cleaned away.
    expect(readdirSync(mem)).toEqual(['user.txt'])
  })

  it('leaves a file planted in the default memory level directory', () => {
    const ckpt = join(root, 'default-ckpt')
    const mem = memoryDirFor(ckpt)
    const file = userDir(mem)
    try {
      const r = run(['--n', '64', '--iterations', '20', '--memory-checkpoint', 'every:5', '--checkpoint-dir', ckpt])
      expect(r.code, r.err).toBe(0)
      expect(readFileSync(file, 'utf8')).toBe('mine')
      // The folder stays for the user's file, still marked as molotof's.
      expect(readdirSync(mem).sort()).toEqual(['.molotof-owned', 'user.txt'])
    } finally {
      rmSync(mem, { recursive: true, force: true })
    }
  })
})

describe('directories refused before any rank starts (exit 2)', () => {
  const ckpt = join(root, 'refused-ckpt')
  const file = join(root, 'a-file')
  writeFileSync(file, 'not a directory')
  beforeEach(makeSandbox)
  it.each([
    [['--memory-dir', ''], /--memory-dir needs a directory path \(got an empty value\)/],
    [['--memory-dir', '.'], /--memory-dir \. is the current directory/],
    [['--memory-dir', sandbox], /is the current directory/],
    [['--memory-dir', home], /is the home directory/],
    [['--memory-dir', ckpt], /is the checkpoint directory/],
    [['--memory-dir', file], /--memory-dir .*a-file is a file, not a directory/],
    [['--shared-dir', file, '--shared-checkpoint', 'every:1'], /--shared-dir .*a-file is a file, not a directory/],
  ])('%j', (args, message) => {
    const r = run(['--n', '64', '--iterations', '20', '--memory-checkpoint', 'every:5', '--checkpoint-dir', ckpt, ...args])
    expect(r.code, r.err).toBe(2)
    expect(r.err).toMatch(message)
    expect(r.err).not.toMatch(/^\s+at /m)
    sandboxIntact()
    expect(readFileSync(file, 'utf8')).toBe('not a directory')
  })
})

// A file system with no room needs a private mount namespace (unshare, as root): skipped where there is none.
const canMount = spawnSync('unshare', ['-m', '--propagation', 'private', 'true']).status === 0

describe.skipIf(!canMount)('a memory dir on a full file system', () => {
  it('is refused before the run starts, naming --memory-dir', () => {
    const mnt = join(root, 'full')
    mkdirSync(mnt)
    const events = join(root, 'full.jsonl')
    const script =
      `mount -t tmpfs -o size=256k tmpfs ${mnt} && (dd if=/dev/zero of=${mnt}/fill bs=4k 2>/dev/null; true) && ` +
      `exec ${process.execPath} ${BIN} run ${JACOBI} --n 64 --iterations 20 --memory-checkpoint every:5 --memory-dir ${mnt}/mem --checkpoint-dir ${join(root, 'full-ckpt')} --events ${events}`
    const r = spawnSync('unshare', ['-m', '--propagation', 'private', 'sh', '-c', script], { encoding: 'utf8', timeout: 60_000 })
    expect(r.status, r.stderr).toBe(2)
    expect(r.stderr).toMatch(/--memory-dir .*\/mem: its file system has no room left/)
    // Refused by the command itself: no rank was started.
    expect(existsSync(events) ? readFileSync(events, 'utf8') : '').not.toMatch(/"event":"start"/)
  })
})

describe('a failed run, then --fresh', () => {
  it('keeps the files planted in the memory dir, in a checkpoint folder and in the spare folder', () => {
    const mem = join(root, 'failed-mem')
    const ckpt = join(root, 'failed-ckpt')
    const memFile = userDir(mem)
    const args = ['--n', '64', '--iterations', '40', '--checkpoint', 'every:5', '--keep', '1', '--memory-checkpoint', 'every:5', '--memory-dir', mem, '--checkpoint-dir', ckpt]
    const failed = run([...args, '--inject', 'rank=0,step=32', '--restarts', '0'])
    expect(failed.code, failed.err).toBe(1)
    expect(readFileSync(memFile, 'utf8')).toBe('mine')
    const folders = readdirSync(ckpt).filter((n) => n.startsWith('ckpt-'))
    expect(folders.length).toBeGreaterThan(0)
    const planted = [join(ckpt, folders[0], 'user.txt'), join(ckpt, 'spare', 'user.txt'), join(ckpt, 'user.txt')]
    mkdirSync(join(ckpt, 'spare'), { recursive: true })
    for (const f of planted) writeFileSync(f, 'mine')

    const again = run([...args, '--fresh'])
    expect(again.code, again.err).toBe(0)
    for (const f of [memFile, ...planted]) expect(readFileSync(f, 'utf8'), f).toBe('mine')
    expect(readdirSync(mem)).toEqual(['user.txt'])
  })
})

describe('the shared level', () => {
  it('a new run discarding the shared copies of the last one leaves the files planted there', () => {
    const shared = join(root, 'shared')
    const beside = userDir(shared)
    const args = ['--n', '64', '--iterations', '20', '--checkpoint', 'every:5', '--shared-checkpoint', 'every:1', '--shared-dir', shared, '--checkpoint-dir', join(root, 'shared-ckpt')]
    const first = run(args)
    expect(first.code, first.err).toBe(0)
    const level = join(shared, 'jacobi')
    const folders = readdirSync(level).filter((n) => n.startsWith('ckpt-'))
    expect(folders.length).toBeGreaterThan(0)
    const planted = [join(level, 'user.txt'), ...folders.map((f) => join(level, f, 'user.txt'))]
    for (const f of planted) writeFileSync(f, 'mine')

    const second = run(args)
    expect(second.code, second.err).toBe(0)
    for (const f of [beside, ...planted]) expect(readFileSync(f, 'utf8'), f).toBe('mine')
  })
})

describe('a preempted run (exit 75), then resumed', () => {
  it('keeps the files planted in the memory dir and beside the memory level, through both runs', async () => {
    const mem = join(root, 'preempt-mem')
    const memFile = userDir(mem)
    const events = join(root, 'preempt.jsonl')
    const args = ['--ranks', '2', '--n', '64', '--iterations', '20000', '--memory-checkpoint', 'every:50', '--memory-dir', mem, '--checkpoint-dir', join(root, 'preempt-ckpt')]
    const first = start([...args, '--events', events])
    await until(() => progressIn(events) >= 200)
    // A file of the user's put into molotof's own folder while the run writes there: it survives too.
    // (The level writes in a sub-directory of its own, as the given one holds a file of the user's.)
    const level = existsSync(join(mem, 'molotof-memory')) ? join(mem, 'molotof-memory') : mem
    const inside = join(level, 'user-inside.txt')
    writeFileSync(inside, 'mine')
    process.kill(-first.pid, 'SIGTERM')
    expect(await first.done, first.stderr()).toEqual({ code: 75, signal: null })
    expect(readFileSync(memFile, 'utf8')).toBe('mine')
    // `molotof inspect` given the same --memory-dir finds the level where the run wrote it.
    const inspect = spawnSync(process.execPath, [BIN, 'inspect', join(root, 'preempt-ckpt'), '--memory-dir', mem], { cwd: sandbox, env, encoding: 'utf8' })
    expect(inspect.stdout).toContain(`checkpoints in ${join(mem, 'molotof-memory')} (memory level)`)

    const resumed = start([...args, '--resume'])
    expect(await resumed.done, resumed.stderr()).toEqual({ code: 0, signal: null })
    expect(readFileSync(memFile, 'utf8')).toBe('mine')
    expect(readFileSync(inside, 'utf8')).toBe('mine')
    // Only the user's file is left in molotof's folder (still marked as molotof's).
    expect(readdirSync(level).sort()).toEqual(['.molotof-owned', 'user-inside.txt'])
  }, 120_000)
})

describe('a supervisor killed outright (SIGKILL), then the next run', () => {
  it("cleans the killed run's socket folder, and no folder that is not provably molotof's and abandoned", async () => {
    const mem = join(root, 'killed-mem')
    const memFile = userDir(mem)
    // A folder of the user's with molotof's prefix, beside the socket folders: never touched.
    const lookalike = mkdtempSync(join(tmpdir(), 'molotof-'))
    writeFileSync(join(lookalike, '0.sock'), 'mine')
    const events = join(root, 'killed.jsonl')
    const args = ['--ranks', '2', '--transport', 'processes', '--n', '64', '--memory-checkpoint', 'every:50', '--memory-dir', mem, '--checkpoint-dir', join(root, 'killed-ckpt')]
    const before = new Set(readdirSync(tmpdir()))
    const first = start([...args, '--iterations', '20000', '--events', events])
    await until(() => progressIn(events) >= 100)
    const socketDirs = readdirSync(tmpdir())
      .filter((n) => n.startsWith('molotof-') && !before.has(n))
      .map((n) => join(tmpdir(), n))
      .filter((d) => existsSync(join(d, '.molotof-owned')) && readFileSync(join(d, '.molotof-owned'), 'utf8').includes(`"pid":${first.pid}`))
    expect(socketDirs).toHaveLength(1)
    process.kill(first.pid, 'SIGKILL')
    await first.done
    expect(existsSync(socketDirs[0])).toBe(true) // nobody was left to clean it

    try {
      const next = run([...args, '--iterations', '20', '--fresh'])
      expect(next.code, next.err).toBe(0)
      expect(existsSync(socketDirs[0])).toBe(false)
      expect(readFileSync(join(lookalike, '0.sock'), 'utf8')).toBe('mine')
      expect(readFileSync(memFile, 'utf8')).toBe('mine')
    } finally {
      rmSync(lookalike, { recursive: true, force: true })
    }
  }, 120_000)
})

describe('folders of the user named like checkpoints (ckpt-00000001/rank-0.mlf, ckpt-00000007/COMMIT of other content)', () => {
  /** The new user's trial: a directory holding their own folders that only have molotof's names. */
  function namesakes(dir: string): string[] {
    const files = [join(dir, 'ckpt-00000001', 'rank-0.mlf'), join(dir, 'ckpt-00000007', 'rank-0.mlf'), join(dir, 'ckpt-00000007', 'COMMIT')]
    for (const f of files) {
      mkdirSync(join(f, '..'), { recursive: true })
      writeFileSync(f, 'mine')
    }
    return files
  }
  const own = (dir: string) => readdirSync(dir).filter((n) => n.startsWith('ckpt-') && n !== 'ckpt-00000001' && n !== 'ckpt-00000007')

  it('a plain run leaves them, says so in a note, and inspect reports them as not molotof\'s (the reported loss)', () => {
    const dir = join(root, 'namesake-plain')
    const planted = namesakes(dir)
    const r = run(['--n', '64', '--iterations', '30', '--checkpoint', 'every:10', '--checkpoint-dir', dir])
    expect(r.code, r.err).toBe(0)
    for (const f of planted) expect(readFileSync(f, 'utf8'), f).toBe('mine')
    expect(r.out + r.err).toMatch(/note: ckpt-00000001, ckpt-00000007 in .* are not molotof's/)
    const inspected = spawnSync(process.execPath, [BIN, 'inspect', dir], { cwd: sandbox, env, encoding: 'utf8', timeout: 60_000 })
    expect(inspected.status, inspected.stderr).toBe(0)
    expect(inspected.stdout).toMatch(/#7 +not molotof's/)
    sandboxIntact()
  })

  it('--fresh discards the earlier run\'s checkpoints and leaves them', () => {
    const dir = join(root, 'namesake-fresh')
    const planted = namesakes(dir)
    const args = ['--n', '64', '--iterations', '30', '--checkpoint', 'every:10', '--checkpoint-dir', dir]
    const failed = run([...args, '--inject', 'rank=0,step=25', '--restarts', '0'])
    expect(failed.code, failed.err).toBe(1)
    expect(own(dir).length).toBeGreaterThan(0)
    const again = run([...args, '--fresh'])
    expect(again.code, again.err).toBe(0)
    expect(again.out + again.err).toMatch(/note: ckpt-00000001, ckpt-00000007 in .* are not molotof's/)
    for (const f of planted) expect(readFileSync(f, 'utf8'), f).toBe('mine')
  })

  it('--resume with nothing else there finds nothing to resume (exit 2, the note names them), --resume-or-start starts; both leave them', () => {
    const dir = join(root, 'namesake-resume')
    const planted = namesakes(dir)
    const args = ['--n', '64', '--iterations', '30', '--checkpoint', 'every:10', '--checkpoint-dir', dir]
    const r = run([...args, '--resume'])
    expect(r.code, r.err).toBe(2)
    expect(r.out + r.err).toMatch(/note: ckpt-00000001, ckpt-00000007 in .* are not molotof's/)
    expect(r.err).toMatch(/found no checkpoint of this run/)
    expect(r.err).not.toMatch(/--fresh discards/)
    const started = run([...args, '--resume-or-start'])
    expect(started.code, started.err).toBe(0)
    expect(started.out + started.err).toMatch(/starting afresh/)
    for (const f of planted) expect(readFileSync(f, 'utf8'), f).toBe('mine')
  })

  it('--keep 1 prunes the run\'s own checkpoints down to one, and leaves them', () => {
    const dir = join(root, 'namesake-prune')
    const planted = namesakes(dir)
    const r = run(['--n', '64', '--iterations', '40', '--checkpoint', 'every:10', '--keep', '1', '--checkpoint-dir', dir])
    expect(r.code, r.err).toBe(0)
    expect(own(dir)).toHaveLength(1)
    for (const f of planted) expect(readFileSync(f, 'utf8'), f).toBe('mine')
  })
})
