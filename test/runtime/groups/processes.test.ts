import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { JacobiResult } from '../../../examples/jacobi/jacobi.js'
import { ProgramLoadError, RankFailedError } from '../../../src/errors.js'
import { runAttempt, START_TIMEOUT_MS, type AttemptOutcome } from '../../../src/runtime/launch/attempt.js'
import type { RankGroup } from '../../../src/runtime/group.js'
import { groupSpec, launch, type LaunchOptions } from '../../../src/runtime/launch/launcher.js'
import { startProcessGroup } from '../../../src/runtime/groups/process-group.js'
import { Supervisor } from '../../../src/runtime/launch/supervisor.js'

const quiet = { onLog: () => {} }
const JACOBI = 'examples/jacobi/jacobi.ts'

/** The interior rows of every rank, in order, as one array. */
function rowsOf(values: JacobiResult[]): Float64Array {
  const parts = values.map((v) => v.rows!).sort((a, b) => a.first - b.first)
  const out = new Float64Array(parts.reduce((n, p) => n + p.values.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p.values, at)
    at += p.values.length
  }
  return out
}

/** Run one attempt on the processes transport; `act` gets the group once rank `watch` passed `step`. */
function attempt(
  file: string,
  opts: LaunchOptions & { hangTimeoutMs: number },
  watch: { rank: number; step: number; act: (group: RankGroup) => void },
): Promise<AttemptOutcome> {
  const spec = groupSpec(file, { ...opts, transport: 'processes' })
  return runAttempt(startProcessGroup, spec, {
    ...quiet,
    hangTimeoutMs: opts.hangTimeoutMs,
    onStarted: (group) => {
      const poll = setInterval(() => {
        if (group.where(watch.rank).step < watch.step) return
        clearInterval(poll)
        watch.act(group)
      }, 5)
    },
  })
}

describe('processes transport', () => {
  it.each([1, 2, 3, 4])('Jacobi on %i rank process(es) is bit-identical to the threads transport', async (ranks) => {
    const argv = ['--n', '61', '--iterations', '50', '--return-rows']
    const [threads, processes] = await Promise.all([
      launch<JacobiResult>(JACOBI, { ranks, argv, ...quiet }),
      launch<JacobiResult>(JACOBI, { ranks, argv, transport: 'processes', ...quiet }),
    ])
    const a = rowsOf(threads.values)
    const b = rowsOf(processes.values)
    expect(b.length).toBe(61 * 61)
    expect(Buffer.from(b.buffer).equals(Buffer.from(a.buffer))).toBe(true)
    const withoutTiming = (text: string | undefined) => text?.replace(/compute .*/, '')
    expect(withoutTiming(processes.text)).toBe(withoutTiming(threads.text))
  })

  it('a rank killed from outside ends the attempt at once, naming the rank', async () => {
    let killedAt = 0
    const outcome = await attempt(
      JACOBI,
      { ranks: 3, argv: ['--n', '61', '--iterations', '1000000'], heartbeatMs: 50, hangTimeoutMs: 5000 },
      {
        rank: 1,
        step: 3,
        act: (group) => {
          killedAt = performance.now()
          group.kill(1)
        },
      },
    )
    expect(outcome.kind).toBe('failed')
    if (outcome.kind !== 'failed') return
    const ms = outcome.detectedAt - killedAt
    console.log(`processes: SIGKILL of rank 1 detected in ${ms.toFixed(1)} ms`)
    expect(outcome.reason).toBe('signal')
    expect(outcome.error).toBeInstanceOf(RankFailedError)
    expect(outcome.error).toMatchObject({ rank: 1, skeleton: 0 })
    expect(outcome.error.step).toBeGreaterThanOrEqual(3)
    expect(outcome.error.message).toMatch(/rank process killed by SIGKILL/)
    expect(ms).toBeLessThan(1000)
  })

  it('a stopped rank (SIGSTOP) is declared hung within the hang timeout plus one heartbeat period', async () => {
    const heartbeatMs = 50
    const hangTimeoutMs = 500
    let stoppedAt = 0
    const outcome = await attempt(
      JACOBI,
      { ranks: 3, argv: ['--n', '61', '--iterations', '1000000'], heartbeatMs, hangTimeoutMs },
      {
        rank: 1,
        step: 3,
        act: (group) => {
          stoppedAt = performance.now()
          group.kill(1, 'SIGSTOP')
        },
      },
    )
    expect(outcome.kind).toBe('failed')
    if (outcome.kind !== 'failed') return
    const ms = outcome.detectedAt - stoppedAt
    console.log(`processes: SIGSTOP of rank 1 declared hung after ${ms.toFixed(1)} ms (timeout ${hangTimeoutMs} ms, heartbeat ${heartbeatMs} ms)`)
    expect(outcome.reason).toBe('hang')
    expect(outcome.error).toMatchObject({ rank: 1, skeleton: 0 })
    expect(outcome.error.message).toMatch(/no heartbeat .* the rank is hung/)
    // The watchdog itself ticks every heartbeat period: allow one more tick and some scheduling slack.
    expect(ms).toBeGreaterThan(hangTimeoutMs - 2 * heartbeatMs)
    expect(ms).toBeLessThan(hangTimeoutMs + 2 * heartbeatMs + 100)
    // Measured from the last heartbeat received, the watchdog (which ticks every heartbeat period) needs one period at most.
    expect(outcome.detectedAt - outcome.failedAt).toBeLessThan(hangTimeoutMs + heartbeatMs + 50)
  })

  it('a rank process silent while it starts (a loaded node) is given START_TIMEOUT_MS, not the hang timeout', async () => {
    // Stopped from its spawn for 1.5 s, three times the hang timeout: it has sent no heartbeat, it is still starting.
    const spec = groupSpec(JACOBI, { ranks: 2, argv: ['--n', '16', '--iterations', '20'], heartbeatMs: 50, transport: 'processes' })
    const outcome = await runAttempt(startProcessGroup, spec, {
      ...quiet,
      hangTimeoutMs: 500,
      onStarted: (group) => {
        group.kill(1, 'SIGSTOP')
        setTimeout(() => group.kill(1, 'SIGCONT'), 1500)
      },
    })
    expect(outcome.kind, outcome.kind === 'failed' ? outcome.error.message : '').toBe('done')
    expect(START_TIMEOUT_MS).toBeGreaterThan(1500)
  })

  it('a rank computing for a long time without communicating is not hung', async () => {
    const t0 = performance.now()
    const run = await launch<number>('test/fixtures/busy.ts', {
      ranks: 2,
      argv: ['--busy-ms', '2000'],
      transport: 'processes',
      heartbeatMs: 50,
      hangTimeoutMs: 500,
      ...quiet,
    })
    expect(performance.now() - t0).toBeGreaterThan(2000)
    expect(run.value).toBe(24 * 4)
  })

  it('an injected failure kills the rank with SIGKILL and names rank, skeleton and step', async () => {
    const err = await launch(JACOBI, {
      ranks: 3,
      argv: ['--n', '61', '--iterations', '50'],
      transport: 'processes',
      inject: [{ rank: 1, step: 5, skeleton: 0, phase: 'calculate' }],
      ...quiet,
    }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(RankFailedError)
    expect(err).toMatchObject({ rank: 1, skeleton: 0, step: 5, phase: 'calculate' })
    expect((err as Error).message).toMatch(/killed by SIGKILL/)
  })

  it('reports load errors, thrown and uncaught errors, and abrupt exits like the threads transport', async () => {
    const opts = { transport: 'processes', ...quiet } as const
    await expect(launch('test/fixtures/no-program.ts', { ranks: 2, ...opts })).rejects.toThrowError(ProgramLoadError)
    const thrown = await launch('test/fixtures/faulty.ts', { ranks: 3, argv: ['--fail-rank', '2', '--fail-step', '4'], ...opts }).catch((e: unknown) => e)
    expect(thrown).toMatchObject({ rank: 2, skeleton: 0, step: 4, phase: 'calculate' })
    expect((thrown as Error).message).toMatch(/deliberate failure/)
    const exited = await launch('test/fixtures/faulty.ts', { ranks: 2, argv: ['--exit-rank', '1'], ...opts }).catch((e: unknown) => e)
    expect(exited).toBeInstanceOf(RankFailedError)
    expect(exited).toMatchObject({ rank: 1 })
    expect((exited as Error).message).toMatch(/rank process exited with code 3/)
    for (const transport of ['threads', 'processes'] as const) {
      const argv = ['--busy-ms', '0', '--throw-rank', '1', '--throw-step', '2', '--steps', '50']
      const uncaught = await launch('test/fixtures/busy.ts', { ranks: 2, argv, transport, ...quiet }).catch((e: unknown) => e)
      expect(uncaught).toBeInstanceOf(RankFailedError)
      expect(uncaught).toMatchObject({ rank: 1, skeleton: 0 })
      expect((uncaught as Error).message).toMatch(/uncaught async failure at step 2/)
    }
  })

  it('a supervised run recovers from failures in every phase, blaming the killed rank each time', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'molotof-proc-'))
    try {
      const argv = ['--n', '40', '--iterations', '60']
      const reference = await launch<JacobiResult>(JACOBI, { ranks: 3, argv, ...quiet })
      const r = await new Supervisor<JacobiResult>(JACOBI, {
        ranks: 3,
        argv,
        transport: 'processes',
        checkpoint: { dir, policy: { every: 10 }, keep: 2, resume: false },
        inject: [
          { rank: 1, skeleton: 0, step: 15, phase: 'calculate' },
          { rank: 2, skeleton: 0, step: 29, phase: 'checkpoint' },
          { rank: 0, skeleton: 0, step: 44, phase: 'route' },
        ],
        ...quiet,
      }).run()
      expect(r.kind).toBe('done')
      if (r.kind !== 'done') return
      expect(Object.is(r.value.checksum, reference.value.checksum)).toBe(true)
      expect(r.failures.map((f) => [f.rank, f.step, f.phase, f.reason])).toEqual([
        [1, 15, 'calculate', 'signal'],
        [2, 29, 'checkpoint', 'signal'],
        [0, 44, 'route', 'signal'],
      ])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
