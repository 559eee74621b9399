// A rank process killed from outside is reported where it really was, not at
// its last periodic heartbeat (which may be a whole heartbeat period behind).
import { describe, expect, it } from 'vitest'
import { runAttempt } from '../../../src/runtime/launch/attempt.js'
import type { RankGroup } from '../../../src/runtime/group.js'
import { groupSpec } from '../../../src/runtime/launch/launcher.js'
import { startProcessGroup } from '../../../src/runtime/groups/process-group.js'

describe('failure reports (processes transport)', () => {
  it('name the step a rank killed with SIGKILL was at, with a heartbeat period far longer than a step', async () => {
    // 40 fast steps, then rank 1 spins in calculate at step 37; the heartbeat period is 2 s.
    const spec = groupSpec('test/fixtures/busy.ts', {
      ranks: 2,
      transport: 'processes',
      argv: ['--steps', '40', '--busy-step', '37', '--busy-ms', '20000', '--announce'],
      heartbeatMs: 2000,
    })
    let group: RankGroup | undefined
    const outcome = await runAttempt(startProcessGroup, spec, {
      hangTimeoutMs: 30_000,
      onStarted: (g) => (group = g),
      onLog: (_rank, text) => {
        // Rank 1 says it spins: kill it 50 ms later, from outside, as an operator or the OOM killer would.
        if (text === '[rank 1] spinning at step 37') setTimeout(() => group?.kill(1, 'SIGKILL'), 50)
      },
    })
    expect(outcome.kind).toBe('failed')
    if (outcome.kind !== 'failed') return
    expect(outcome.reason).toBe('signal')
    expect(outcome.error).toMatchObject({ rank: 1, skeleton: 0, step: 37, phase: 'calculate' })
    expect(outcome.error.message).toMatch(/rank 1 failed in skeleton 0, step 37, phase calculate: the rank process killed by SIGKILL/)
  }, 60_000)
})
