// A checkpoint directory of another program: a --resume says "another
// program", not that the code changed with a list of the other program's
// files "removed" from this one's directory (files that never were there).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { main } from '../../../src/cli/main.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-another-program-'))
const dir = join(root, 'ckpt')
afterAll(() => rmSync(root, { recursive: true, force: true }))

async function run(...args: string[]): Promise<{ code: number; text: string }> {
  const lines: string[] = []
  const code = await main(['run', ...args, '--checkpoint', 'every:5', '--checkpoint-dir', dir], (s) => lines.push(s), (s) => lines.push(s))
  return { code, text: lines.join('\n') }
}

describe('checkpoints of another program', () => {
  beforeAll(async () => {
    // A Jacobi run that fails after two checkpoints: they stay for a --resume.
    const r = await run('examples/jacobi/jacobi.ts', '--n', '32', '--iterations', '30', '--inject', 'rank=1,step=12', '--restarts', '0')
    expect(r.code).toBe(1)
  }, 60_000)

  it.each(['threads', 'processes'])('--resume of another program is refused as another program (%s)', async (transport) => {
    const r = await run('examples/swing/swing.ts', '--preset', 'small-g', '--resume', '--transport', transport)
    expect(r.code).toBe(2)
    expect(r.text).toMatch(/holds checkpoints of another program .*"molotof-program:jacobi".*"molotof-program:swing"/)
    expect(r.text).not.toMatch(/code changed|removed/)
  }, 60_000)

  it('a start without --resume describes the earlier run as written by another program file', async () => {
    const r = await run('examples/swing/swing.ts', '--preset', 'small-g')
    expect(r.code).toBe(2)
    expect(r.text).toMatch(/program jacobi, .*written by another program file \(its code: jacobi\.ts, plate\.ts, relaxation\.ts\)/)
    expect(r.text).not.toMatch(/removed|differs from the current files/)
  }, 60_000)

  it('the same program resumes', async () => {
    const r = await run('examples/jacobi/jacobi.ts', '--n', '32', '--iterations', '30', '--resume')
    expect(r.code).toBe(0)
    expect(r.text).toMatch(/checksum/)
  }, 60_000)
})
