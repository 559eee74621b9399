// A rank's log line reaches `onLog` with what it tells (a warning, a notice,
// or nothing more than information), and `molotof run --log events` decides on
// that kind, not on the line's first word.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { printsLine } from '../../../src/cli/run.js'
import { Supervisor } from '../../../src/runtime/launch/supervisor.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
const freshDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'molotof-kinds-'))
  dirs.push(d)
  return d
}

type Line = { text: string; kind: string | undefined }

async function linesOf(checkpoint: ConstructorParameters<typeof Supervisor>[1]['checkpoint'], inject = [{ rank: 1, skeleton: 0, step: 20, phase: 'calculate' as const }]): Promise<Line[]> {
  const lines: Line[] = []
  const r = await new Supervisor('examples/jacobi/jacobi.ts', {
    ranks: 2,
    argv: ['--n', '32', '--iterations', '40'],
    checkpoint,
    inject,
    onLog: (_rank, text, kind) => lines.push({ text, kind }),
  }).run()
  expect(r.kind).toBe('done')
  return lines
}

describe('log line kinds', () => {
  it('a warning is a warning, a recovery figure has no kind', async () => {
    const dir = freshDir()
    // A memory checkpoint at every tiny step costs far more than the step: the cost warning.
    const lines = await linesOf({ dir, policy: { every: 1000 }, memory: { policy: { every: 1 }, dir: join(dir, 'memory') }, keep: 2, resume: false })
    expect(lines.find((l) => l.text.startsWith('warning: a memory checkpoint costs'))?.kind).toBe('warning')
    const replayed = lines.find((l) => l.text.startsWith('replayed '))
    expect(replayed, JSON.stringify(lines)).toBeDefined()
    expect(replayed!.kind).toBeUndefined()
  }, 60_000)

  it('a --resume-or-start that finds nothing and starts afresh is a notice', async () => {
    const lines = await linesOf({ dir: freshDir(), policy: { every: 10 }, keep: 2, resume: true, resumeRequest: 'or-start' }, [])
    expect(lines.find((l) => l.text.startsWith('--resume-or-start: no checkpoint'))?.kind).toBe('notice')
  }, 60_000)

  it('--log events prints warnings and notices whatever their words, and no informational line', () => {
    expect(printsLine('events', 'warning')).toBe(true)
    expect(printsLine('events', 'notice')).toBe(true)
    expect(printsLine('events', undefined)).toBe(false)
    expect(printsLine('all', undefined)).toBe(true)
    expect(printsLine('quiet', 'warning')).toBe(false)
  })
})
