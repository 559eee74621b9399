import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { ProgressView } from '../../../src/cli/progress.js'
import { runLocal, Supervisor, type SupervisorEvent } from '../../../src/index.js'
import jacobi from '../../../examples/jacobi/jacobi.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
const freshDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'molotof-resume-report-'))
  dirs.push(d)
  return d
}

const argv = ['--n', '24', '--iterations', '30']

/** What the CLI prints for the events of a supervised run. */
function printed(events: (SupervisorEvent & { t: number })[]): string {
  let text = ''
  const view = new ProgressView((s) => (text += s), false)
  for (const e of events) view.event(e)
  return text
}

describe('a resume asked for is reported as a resume, a recovery as a recovery', () => {
  it('--resume with nothing failing: a "resume" event with requested, printed as "resumed from checkpoint"', async () => {
    const dir = freshDir()
    const checkpoint = { dir, policy: { every: 10 }, keep: 2, resume: false }
    await expect(runLocal(jacobi, { ranks: 2, argv, checkpoint: { ...checkpoint, interrupt: { skeleton: 0, step: 14 } } })).rejects.toThrow(/interrupted/)
    const events: (SupervisorEvent & { t: number })[] = []
    const r = await new Supervisor('examples/jacobi/jacobi.ts', { ranks: 2, argv, checkpoint: { ...checkpoint, resume: true }, onLog: () => {}, onEvent: (e) => events.push(e) }).run()
    expect(r.kind).toBe('done')
    const resume = events.find((e) => e.event === 'resume')
    expect(resume).toMatchObject({ event: 'resume', attempt: 0, requested: true, step: 9 })
    const text = printed(events)
    expect(text).toMatch(/^resumed from checkpoint \d+ \(skeleton 0, step 9\) in \d+ ms/m)
    expect(text).not.toMatch(/recovered/)
    // Progress before this run's first checkpoint names the one it resumed from, not "no checkpoint yet".
    expect(text).toMatch(/^progress: .*resumed from checkpoint \d+, none written since/m)
    expect(text).not.toMatch(/no checkpoint yet/)
  })

  it('after a failure: requested is false, printed as "recovered"', async () => {
    const events: (SupervisorEvent & { t: number })[] = []
    const r = await new Supervisor('examples/jacobi/jacobi.ts', {
      ranks: 2,
      argv,
      checkpoint: { dir: freshDir(), policy: { every: 10 }, keep: 2, resume: false },
      inject: [{ rank: 1, skeleton: 0, step: 15, phase: 'calculate' }],
      onLog: () => {},
      onEvent: (e) => events.push(e),
    }).run()
    expect(r.kind).toBe('done')
    expect(events.find((e) => e.event === 'resume')).toMatchObject({ attempt: 1, requested: false, step: 9 })
    const text = printed(events)
    expect(text).toMatch(/^recovered in \d+ ms/m)
    expect(text).not.toMatch(/resumed from/)
  })
})
