// Signals as a terminal and a batch scheduler send them: to the whole process
// group. The `molotof` command runs in a group of its own here, as in a shell.
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { interiorSum, jacobiSerial } from '../../examples/jacobi/serial.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-signals-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

interface Cli {
  pid: number
  stdout: () => string
  stderr: () => string
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/** `molotof run …` as the leader of its own process group. */
function molotof(args: string[]): Cli {
  const child = spawn(process.execPath, ['bin/molotof.mjs', 'run', ...args], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (b: Buffer) => (out += b.toString()))
  child.stderr.on('data', (b: Buffer) => (err += b.toString()))
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) => child.on('close', (code, signal) => res({ code, signal })))
  return { pid: child.pid!, stdout: () => out, stderr: () => err, done }
}

async function until(what: () => boolean, timeoutMs = 60_000, everyMs = 20): Promise<void> {
  for (const t0 = Date.now(); !what(); ) {
    if (Date.now() - t0 > timeoutMs) throw new Error('timed out waiting')
    await new Promise((r) => setTimeout(r, everyMs))
  }
}

/** The highest step rank 0 reported in an events file so far. */
function progressIn(events: string): number {
  if (!existsSync(events)) return -1
  let step = -1
  for (const line of readFileSync(events, 'utf8').split('\n')) {
    if (line.includes('"event":"progress"')) step = Math.max(step, JSON.parse(line).step as number)
  }
  return step
}

/**
 * True once Node runs in process `pid`: its SIGUSR1 handler (the inspector's, set up as Node starts running
 * JavaScript) shows in /proc. Before that no program can handle a signal.
 */
function nodeStarted(pid: number): boolean {
  try {
    const caught = /SigCgt:\s*([0-9a-f]+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? '0'
    return ((BigInt(`0x${caught}`) >> 9n) & 1n) === 1n // bit 9: signal 10, SIGUSR1
  } catch {
    return false
  }
}

/** True once the events file holds an event of this kind. */
function seen(events: string, kind: string): boolean {
  return existsSync(events) && readFileSync(events, 'utf8').includes(`"event":"${kind}"`)
}

describe('signals to the process group', () => {
  // While the CLI loads (about a second through tsx) and while the rank processes start (a rank killed by the signal
  // before its handler is in place): each moment gives 75 with a checkpoint to resume from, never 1 or a signal exit.
  // The first offsets count from Node's own start (no program can handle a signal before it: a few hundred ms on a
  // loaded machine); those from the 'start' event fall while the rank processes start.
  const moments: [string, number, 'node' | 'start'][] = [
    ['150 ms after Node started (the CLI loading)', 150, 'node'],
    ['400 ms after Node started (the CLI loading)', 400, 'node'],
    ['as the ranks are spawned', 0, 'start'],
    ['40 ms after the ranks are spawned', 40, 'start'],
    ['100 ms after the ranks are spawned', 100, 'start'],
  ]
  it.each(moments)('SIGTERM to the group %s: exit 75 with a checkpoint, never 1', async (_label, offsetMs, after) => {
    const name = `start-${after}-${offsetMs}`
    const events = join(root, `${name}.jsonl`)
    // Long enough never to finish first.
    const cli = molotof(['examples/jacobi/jacobi.ts', '--ranks', '2', '--transport', 'processes', '--n', '64', '--iterations', '5000000', '--checkpoint-dir', join(root, name), '--events', events])
    if (after === 'node') await until(() => nodeStarted(cli.pid), 30_000, 2)
    else await until(() => seen(events, after), 60_000, 2)
    await new Promise((r) => setTimeout(r, offsetMs))
    process.kill(-cli.pid, 'SIGTERM')
    expect(await cli.done, cli.stderr()).toEqual({ code: 75, signal: null })
    expect(cli.stderr()).toMatch(/preempted: checkpoint \d+ \(skeleton 0, step \d+\)/)
  }, 120_000)

  // With warm spares the ranks and the spare are started together, each possibly killed by the signal before its
  // handler; the start again to checkpoint must not take a spare that is dying of the same signal.
  it('SIGTERM to the group while ranks and a spare start (--spares 1), several moments: exit 75 with a checkpoint every time', async () => {
    for (const offsetMs of [0, 60, 120, 180, 250, 320]) {
      const name = `start-spares-${offsetMs}`
      const events = join(root, `${name}.jsonl`)
      const cli = molotof(['examples/jacobi/jacobi.ts', '--ranks', '3', '--transport', 'processes', '--spares', '1', '--n', '64', '--iterations', '5000000', '--checkpoint-dir', join(root, name), '--events', events])
      await until(() => seen(events, 'start'), 60_000, 2)
      await new Promise((r) => setTimeout(r, offsetMs))
      process.kill(-cli.pid, 'SIGTERM')
      expect(await cli.done, `${offsetMs} ms: ${cli.stderr()}`).toEqual({ code: 75, signal: null })
      expect(cli.stderr()).toMatch(/preempted: checkpoint \d+ \(skeleton 0, step \d+\)/)
      expect(readdirSync(join(root, name)).filter((f) => f.startsWith('ckpt-')).length).toBeGreaterThan(0)
    }
  }, 120_000)

  // Ranks on warm spare processes (--spares) get the signal too, and forward it as rank processes do.
  it.each([[[]], [['--spares', '1']]])('Ctrl-C to the whole group with --transport processes %j: checkpoint, exit 75, and the resumed run gives the same result', async (extra: string[]) => {
    const n = 64
    // Long enough that the run is still computing when the ranks next vote (at most ~250 ms of supersteps on).
    const iterations = 20_000
    const name = extra.length > 0 ? 'sigint-spares' : 'sigint'
    const dir = join(root, name)
    const events = join(root, `${name}.jsonl`)
    const args = ['examples/jacobi/jacobi.ts', '--ranks', '2', '--transport', 'processes', '--n', String(n), '--iterations', String(iterations), '--checkpoint-dir', dir]
    const first = molotof([...args, ...extra, '--events', events])
    await until(() => progressIn(events) >= 200)
    process.kill(-first.pid, 'SIGINT') // what a terminal does on Ctrl-C: every process of the foreground group
    const stopped = await first.done
    expect(stopped, first.stderr()).toEqual({ code: 75, signal: null })
    expect(first.stderr()).toMatch(/preempted: checkpoint \d+ \(skeleton 0, step \d+\)/)
    expect(first.stderr()).toMatch(/Resume with: molotof run .* --resume/)

    const resumed = molotof([...args, '--resume'])
    const end = await resumed.done
    expect(end, resumed.stderr()).toEqual({ code: 0, signal: null })
    expect(resumed.stdout()).toMatch(/resuming from checkpoint \d+/)
    expect(Number(/checksum (\S+)/.exec(resumed.stdout())?.[1])).toBe(interiorSum(jacobiSerial(n, iterations), n))
  }, 120_000)

  it('a second signal to the group stops at once (exit 1), even while the ranks compute and forward late', async () => {
    // The ranks spin for 20 s in one calculate: no checkpoint point comes between the two signals.
    const events = join(root, 'twice.jsonl')
    const cli = molotof(['test/fixtures/busy.ts', '--ranks', '2', '--transport', 'processes', '--steps', '3', '--busy-step', '1', '--busy-ms', '20000', '--checkpoint-dir', join(root, 'twice'), '--events', events])
    await until(() => existsSync(events) && readFileSync(events, 'utf8').includes('"event":"progress"'))
    process.kill(-cli.pid, 'SIGTERM')
    await new Promise((r) => setTimeout(r, 1000)) // a copy within half a second would be the same request
    process.kill(-cli.pid, 'SIGTERM')
    const t0 = Date.now()
    expect(await cli.done, cli.stderr()).toEqual({ code: 1, signal: null })
    expect(Date.now() - t0).toBeLessThan(10_000)
    expect(cli.stderr()).toMatch(/stopped \(SIGTERM.*\) before the ranks could checkpoint/)
  }, 60_000)

  it('SIGTERM arriving once the result is printed does not turn success into a signal exit', async () => {
    const cli = molotof(['examples/jacobi/jacobi.ts', '--ranks', '2', '--n', '40', '--iterations', '20', '--checkpoint-dir', join(root, 'late')])
    await until(() => cli.stdout().includes('checksum'))
    try {
      process.kill(-cli.pid, 'SIGTERM')
    } catch {
      // already gone: nothing to check then
    }
    expect(await cli.done).toEqual({ code: 0, signal: null })
  }, 60_000)
})

/** Every process below `pid` (Linux /proc). */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>()
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      children.set(ppid, [...(children.get(ppid) ?? []), Number(name)])
    } catch {
      // ended while the list was read
    }
  }
  const out: number[] = []
  for (let todo = [pid]; todo.length > 0; ) {
    const next = children.get(todo.pop()!) ?? []
    out.push(...next)
    todo.push(...next)
  }
  return out
}

/** A process's command line, words joined by spaces ('' once it is gone). */
function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ')
  } catch {
    return ''
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe('signals to a wrapper', () => {
  // While the run computes, and while the CLI still loads (npm dies before the run has a supervisor to stop).
  it.each([
    ['while the run computes', 'computing'],
    ['while the CLI loads', 'loading'],
  ] as const)("SIGTERM to an npm-like wrapper's pid alone %s (npx forwards it to its shell only): the run checkpoints and stops, nothing is left running", async (_label, when) => {
    const events = join(root, `wrapped-${when}.jsonl`)
    const command = `${process.execPath} bin/molotof.mjs run examples/jacobi/jacobi.ts --ranks 2 --transport processes --n 64 --iterations 5000000 --checkpoint-dir ${join(root, `wrapped-${when}`)} --events ${events}`
    const wrapper = spawn(process.execPath, ['test/fixtures/npm-like-wrapper.mjs', command], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
    let err = ''
    wrapper.stderr.on('data', (b: Buffer) => (err += b.toString()))
    wrapper.stdout.resume()
    // 'exit', not 'close': a process left running would hold the pipes open.
    const wrapperDone = new Promise<NodeJS.Signals | null>((res) => wrapper.on('exit', (_code, signal) => res(signal)))
    const cli = () => descendants(wrapper.pid!).find((p) => commandOf(p).includes('bin/molotof.mjs') && !commandOf(p).startsWith('sh'))
    let below: number[] = []
    let supervisor: number | undefined
    try {
      if (when === 'computing') await until(() => progressIn(events) >= 100)
      else {
        await until(() => (supervisor = cli()) !== undefined && nodeStarted(supervisor), 30_000, 2)
        await new Promise((r) => setTimeout(r, 200))
        expect(existsSync(events), 'the run had started already').toBe(false)
      }
      supervisor = cli()
      below = descendants(wrapper.pid!) // the shell, the supervisor (its rank processes and esbuild's service once started)
      expect(supervisor, err).toBeDefined()
      process.kill(wrapper.pid!, 'SIGTERM')
      expect(await wrapperDone).toBe('SIGTERM')
      // The supervisor notices that npm is gone, checkpoints and stops: every process it started ends with it.
      await until(() => !alive(supervisor!) && below.every((p) => !alive(p)), 30_000)
      const seen = readFileSync(events, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { event: string; seq?: number; why?: string })
      expect(seen.find((e) => e.event === 'preempt-requested')?.why).toMatch(/npm process that started molotof .* is gone/)
      expect(seen.find((e) => e.event === 'preempted')?.seq).toBeGreaterThanOrEqual(0)
    } finally {
      const left = supervisor !== undefined && alive(supervisor) ? [supervisor, ...descendants(supervisor)] : []
      for (const p of [...below, ...left]) if (alive(p)) process.kill(p, 'SIGKILL')
    }
  }, 120_000)
})

describe('a wrapper gone before molotof starts', () => {
  // npm killed at the moment it started molotof: it forwards the signal to its shell, which dies before molotof's
  // first line, so molotof starts re-parented and cannot tell its wrapper's death by a change of parent. Here the
  // shell leaves at once after starting molotof in the background, as npm's shell killed then would.
  it('started by npm whose shell is already gone at its first line: the run checkpoints and stops, not orphaned to the end', async () => {
    const dir = join(root, 'orphaned-at-start')
    const events = join(root, 'orphaned-at-start.jsonl')
    const command = `${process.execPath} bin/molotof.mjs run examples/jacobi/jacobi.ts --ranks 2 --transport processes --n 64 --iterations 5000000 --checkpoint-dir ${dir} --events ${events} >/dev/null 2>&1 &`
    const shell = spawn('sh', ['-c', command], { detached: true, stdio: 'ignore', env: { ...process.env, npm_lifecycle_event: 'npx', npm_command: 'exec' } })
    await new Promise((res) => shell.on('exit', res))
    const runOf = () => readdirSync('/proc').filter((p) => /^\d+$/.test(p) && commandOf(Number(p)).includes(`--checkpoint-dir ${dir} `)).map(Number)
    try {
      await until(() => seen(events, 'preempted'), 60_000)
      const stop = readFileSync(events, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { event: string; seq?: number; why?: string })
      expect(stop.find((e) => e.event === 'preempt-requested')?.why).toMatch(/npm process that started molotof .* is gone/)
      expect(stop.find((e) => e.event === 'preempted')?.seq).toBeGreaterThanOrEqual(0)
      await until(() => runOf().length === 0, 30_000)
    } finally {
      for (const p of runOf()) if (alive(p)) process.kill(p, 'SIGKILL')
    }
  }, 120_000)
})
