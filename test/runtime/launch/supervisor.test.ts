import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { main } from '../../../src/cli/main.js'
import { RestartBudgetExhaustedError } from '../../../src/errors.js'
import { Supervisor, type SupervisorEvent } from '../../../src/runtime/launch/supervisor.js'
import type { JacobiResult } from '../../../examples/jacobi/jacobi.js'
import { interiorSum, jacobiSerial } from '../../../examples/jacobi/serial.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
const freshDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'molotof-sup-'))
  dirs.push(d)
  return d
}
const n = 40
const iterations = 60
const argv = ['--n', String(n), '--iterations', String(iterations)]
const expected = interiorSum(jacobiSerial(n, iterations), n)

function supervisor(extra: Partial<ConstructorParameters<typeof Supervisor>[1]> = {}, events: SupervisorEvent[] = []) {
  return new Supervisor<JacobiResult>('examples/jacobi/jacobi.ts', {
    ranks: 3,
    argv,
    checkpoint: { dir: freshDir(), policy: { every: 10 }, keep: 2, resume: false },
    onLog: () => {},
    onEvent: (e) => events.push(e),
    ...extra,
  })
}

describe('Supervisor (threads transport)', () => {
  it('recovers from injected failures in every phase and gives the failure-free result', async () => {
    const events: SupervisorEvent[] = []
    const r = await supervisor(
      {
        inject: [
          { rank: 1, skeleton: 0, step: 15, phase: 'calculate' },
          { rank: 2, skeleton: 0, step: 29, phase: 'checkpoint' },
          { rank: 0, skeleton: 0, step: 44, phase: 'route' },
        ],
      },
      events,
    ).run()
    expect(r.kind).toBe('done')
    if (r.kind !== 'done') return
    expect(Object.is(r.value.checksum, expected)).toBe(true)
    expect(r.restarts).toBe(3)
    expect(r.failures.map((f) => [f.rank, f.step, f.phase])).toEqual([
      [1, 15, 'calculate'],
      [2, 29, 'checkpoint'],
      [0, 44, 'route'],
    ])
    const resumes = events.filter((e) => e.event === 'resume')
    expect(resumes).toHaveLength(3)
    const lines = events.filter((e) => e.event === 'recovery-line').map((e) => (e as { step: number }).step)
    // Step 29's checkpoint was torn by the failure: recovery uses step 19's.
    expect(lines).toEqual([9, 19, 39])
  })

  it('with background checkpoints, recovers to the failure-free result', async () => {
    const events: SupervisorEvent[] = []
    const r = await supervisor(
      {
        checkpoint: { dir: freshDir(), policy: { every: 5 }, keep: 2, resume: false, async: true },
        inject: [
          { rank: 2, skeleton: 0, step: 27, phase: 'calculate' },
          { rank: 0, skeleton: 0, step: 44, phase: 'checkpoint' },
        ],
      },
      events,
    ).run()
    expect(r.kind === 'done' && Object.is(r.value.checksum, expected)).toBe(true)
    expect(events.filter((e) => e.event === 'checkpoint').length).toBeGreaterThan(3)
    expect(events.filter((e) => e.event === 'resume')).toHaveLength(2)
  })

  it('restarts from the beginning after a failure before the first checkpoint', async () => {
    const events: SupervisorEvent[] = []
    const r = await supervisor({ inject: [{ rank: 0, skeleton: 0, step: 3, phase: 'calculate' }] }, events).run()
    expect(r.kind === 'done' && Object.is(r.value.checksum, expected)).toBe(true)
    expect(events.some((e) => e.event === 'resume')).toBe(false)
    expect(events.filter((e) => e.event === 'start')).toHaveLength(2)
  })

  it('says the memory level costs too much once per run, not once per restart', async () => {
    // A memory checkpoint at every one of these tiny steps costs far more than the step: every attempt measures it.
    const logs: string[] = []
    const dir = freshDir()
    const r = await supervisor({
      checkpoint: { dir, policy: { every: 1000 }, memory: { policy: { every: 1 }, dir: join(dir, 'memory') }, keep: 2, resume: false },
      inject: [
        { rank: 1, skeleton: 0, step: 20, phase: 'calculate' },
        { rank: 2, skeleton: 0, step: 40, phase: 'calculate' },
      ],
      onLog: (_rank, text) => logs.push(text),
    }).run()
    expect(r.kind === 'done' && r.restarts).toBe(2)
    expect(logs.filter((l) => l.startsWith('warning: a memory checkpoint costs'))).toHaveLength(1)
    expect(logs.find((l) => l.startsWith('warning: a memory checkpoint costs'))).toMatch(/a larger --memory-checkpoint every:<steps>/)
  })

  it('with --async-checkpoints (no memory policy of its own) the same warning points at the disk policy', async () => {
    const logs: string[] = []
    const dir = freshDir()
    const r = await supervisor({
      checkpoint: { dir, policy: { every: 1 }, memory: { policy: { kind: 'off' }, dir: join(dir, 'memory') }, keep: 2, resume: false },
      onLog: (_rank, text) => logs.push(text),
    }).run()
    expect(r.kind).toBe('done')
    const warning = logs.find((l) => l.startsWith('warning: a memory checkpoint costs'))
    expect(warning).toMatch(/with --async-checkpoints: a larger --checkpoint every:<steps>/)
    expect(warning).not.toMatch(/--memory-checkpoint/)
  })

  it('gives up after the restart budget, listing every failure, and says a repeated place looks deterministic', async () => {
    // A program that fails at the same place every time: the faulty fixture.
    const faulty = new Supervisor('test/fixtures/faulty.ts', {
      ranks: 2,
      argv: ['--fail-rank', '1', '--fail-step', '4'],
      restarts: 2,
      checkpoint: { dir: freshDir(), policy: { kind: 'off' }, keep: 2, resume: false },
      onLog: () => {},
    })
    const e = await faulty.run().catch((x) => x)
    expect(e).toBeInstanceOf(RestartBudgetExhaustedError)
    expect(e.failures).toHaveLength(3)
    expect(e.message).toMatch(/gave up after 3 failure\(s\) \(restart budget 2\)/)
    expect(e.message).toMatch(/attempt 0: rank 1 failed in skeleton 0, step 4, phase calculate: /)
    // Each failure's place is said once.
    expect(e.message.match(/skeleton 0, step 4, phase calculate/g)).toHaveLength(3)
    expect(e.message).toMatch(/looks deterministic/)
  })

  it('preempts on request: checkpoint, stop, and a resumed run finishes with the same result', async () => {
    const dir = freshDir()
    const events: SupervisorEvent[] = []
    const sup = new Supervisor<JacobiResult>('examples/jacobi/jacobi.ts', {
      ranks: 2,
      argv: ['--n', '300', '--iterations', '3000'],
      checkpoint: { dir, policy: { kind: 'off' }, keep: 2, resume: false },
      onLog: () => {},
      onEvent: (e) => {
        events.push(e)
        // Once: a second request stops at once, without a checkpoint (a second Ctrl-C).
        if (e.event === 'progress' && e.step > 20 && !events.some((p) => p.event === 'preempt-requested')) sup.preempt('test')
      },
    })
    const r = await sup.run()
    expect(r.kind).toBe('preempted')
    if (r.kind !== 'preempted') return
    expect(r.seq).toBeDefined()
    expect(readdirSync(dir).some((f) => f.startsWith('ckpt-'))).toBe(true)
    const resumed = await new Supervisor<JacobiResult>('examples/jacobi/jacobi.ts', {
      ranks: 2,
      argv: ['--n', '300', '--iterations', '3000'],
      checkpoint: { dir, policy: { kind: 'off' }, keep: 2, resume: true },
      onLog: () => {},
    }).run()
    expect(resumed.kind === 'done' && Object.is(resumed.value.checksum, interiorSum(jacobiSerial(300, 3000), 300))).toBe(true)
  })

  it('stops before a time limit, leaving a checkpoint', async () => {
    const r = await new Supervisor('examples/jacobi/jacobi.ts', {
      ranks: 2,
      argv: ['--n', '300', '--iterations', '100000'],
      checkpoint: { dir: freshDir(), policy: { kind: 'off' }, keep: 2, resume: false },
      timeLimitMs: 2500,
      onLog: () => {},
    }).run()
    expect(r.kind).toBe('preempted')
    expect(r.kind === 'preempted' && r.seq !== undefined).toBe(true)
  })
})

describe('molotof run: bad input', () => {
  const run = async (...args: string[]) => {
    const out: string[] = []
    const code = await main(['run', 'examples/jacobi/jacobi.ts', ...args], (s) => out.push(s), (s) => out.push(s))
    return { code, text: out.join('\n') }
  }
  it.each([
    [['--inject', 'rank=1'], /needs rank=R and step=S/],
    [['--inject', 'rank=1,step=x'], /step must be a non-negative integer/],
    [['--inject', 'rank=1,step=2,phase=lunch'], /phase must be one of calculate, route, checkpoint/],
    [['--inject', 'rank=9,step=2', '--ranks', '2'], /only 2 ranks/],
    [['--inject', 'random:abc'], /integer seed/],
    [['--time-limit', 'soon'], /--time-limit needs a positive duration/],
    [['--checkpoint', 'sometimes'], /accepted: off, request, every/],
    [['--transport', 'pigeons'], /--transport must be one of threads, processes, tcp; got "pigeons"/],
    [['--ranks', '0'], /--ranks must be an integer ≥ 1, got 0/],
    [['--restarts', '-1'], /--restarts must be an integer ≥ 0, got -1/],
  ])('%j is refused with a clear message (exit 2)', async (args, message) => {
    const r = await run(...args)
    expect(r.code).toBe(2)
    expect(r.text).toMatch(message)
  })
})
