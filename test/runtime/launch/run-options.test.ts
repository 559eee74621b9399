import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { RUN_OPTIONS } from '../../../src/cli/run.js'
import { ConfigError } from '../../../src/errors.js'
import { launch } from '../../../src/runtime/launch/launcher.js'
import { resolveRunOptions } from '../../../src/runtime/launch/run-options.js'
import { Supervisor } from '../../../src/runtime/launch/supervisor.js'

const JACOBI = 'examples/jacobi/jacobi.ts'

describe('resolveRunOptions: the run settings, each default applied once', () => {
  it('gives the documented defaults (README options table, molotof run --help) in one frozen object', () => {
    const s = resolveRunOptions({ ranks: 2 })
    // README: threads (default); --restarts 3; --heartbeat 200, --hang-timeout 2000 (max(2000, 10 × heartbeat));
    // --spares 0; survivors kept unless --no-keep-survivors; no time limit.
    expect(s).toEqual({ ranks: 2, transport: 'threads', heartbeatMs: 200, hangTimeoutMs: 2000, restarts: 3, timeLimitMs: undefined, spares: 0, keepSurvivors: true })
    expect(Object.isFrozen(s)).toBe(true)
  })

  it('derives the hang timeout from the heartbeat (10 periods, at least 2 s) unless given', () => {
    expect(resolveRunOptions({ ranks: 1, heartbeatMs: 500 }).hangTimeoutMs).toBe(5000)
    expect(resolveRunOptions({ ranks: 1, heartbeatMs: 50 }).hangTimeoutMs).toBe(2000)
    expect(resolveRunOptions({ ranks: 1, heartbeatMs: 50, hangTimeoutMs: 150 }).hangTimeoutMs).toBe(150)
  })

  it('keeps what the user gave', () => {
    const s = resolveRunOptions({ ranks: 3, transport: 'processes', heartbeatMs: 100, restarts: 0, spares: 2, keepSurvivors: false, timeLimitMs: 60_000 })
    expect(s).toEqual({ ranks: 3, transport: 'processes', heartbeatMs: 100, hangTimeoutMs: 2000, restarts: 0, timeLimitMs: 60_000, spares: 2, keepSurvivors: false })
  })

  it("is where molotof run's option table takes its defaults from", () => {
    const s = resolveRunOptions({ ranks: 2 })
    expect(RUN_OPTIONS.transport.default).toBe(s.transport)
    expect(RUN_OPTIONS.heartbeat.default).toBe(s.heartbeatMs)
    expect(RUN_OPTIONS.restarts.default).toBe(s.restarts)
    expect(RUN_OPTIONS.spares.default).toBe(s.spares)
    expect(RUN_OPTIONS.keepSurvivors.default).toBe(s.keepSurvivors)
    expect(RUN_OPTIONS.hangTimeout.help).toContain('max(2000, 10 × heartbeat)')
  })

  it('refuses a hang timeout shorter than two heartbeats, and exactly those', () => {
    fc.assert(
      fc.property(fc.integer({ min: 10, max: 5000 }), fc.integer({ min: 1, max: 20_000 }), (heartbeatMs, hangTimeoutMs) => {
        const run = () => resolveRunOptions({ ranks: 1, heartbeatMs, hangTimeoutMs })
        if (hangTimeoutMs < 2 * heartbeatMs) expect(run).toThrow(ConfigError)
        else expect(run().hangTimeoutMs).toBe(hangTimeoutMs)
      }),
    )
  })

  it('refuses bad values before anything starts', () => {
    expect(() => resolveRunOptions({ ranks: 0 })).toThrow(/rank count must be a positive integer/)
    expect(() => resolveRunOptions({ ranks: 2, heartbeatMs: 5 })).toThrow(/heartbeat period must be at least 10 ms/)
    expect(() => resolveRunOptions({ ranks: 2, restarts: -1 })).toThrow(/restart budget must be a non-negative integer/)
    expect(() => resolveRunOptions({ ranks: 2, restarts: 1.5 })).toThrow(/restart budget/)
    expect(() => resolveRunOptions({ ranks: 2, timeLimitMs: 0 })).toThrow(/time limit must be positive/)
    expect(() => resolveRunOptions({ ranks: 2, spares: 3 })).toThrow(/--spares 3 is more than the 2 rank/)
    expect(() => resolveRunOptions({ ranks: 2, transport: 'carrier-pigeon' as never })).toThrow(/unknown transport "carrier-pigeon"/)
  })

  it('is the one refusal launch and Supervisor give for a bad combination', async () => {
    const bad = { ranks: 2, heartbeatMs: 200, hangTimeoutMs: 300 }
    let message = ''
    try {
      resolveRunOptions(bad)
    } catch (e) {
      message = (e as Error).message
    }
    expect(message).toMatch(/--hang-timeout 300 ms is shorter than two heartbeat periods \(--heartbeat 200 ms\)/)
    await expect(launch(JACOBI, bad)).rejects.toThrow(message)
    expect(() => new Supervisor(JACOBI, { ...bad, checkpoint: { dir: '/nonexistent/molotof-run-options', policy: { every: 10 }, keep: 2, resume: false } })).toThrow(message)
  })
})
