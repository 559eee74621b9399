// What `molotof run` does with the checkpoints it finds in its directory: an
// edited program, a fresh run into a used directory, --resume, --fresh and
// --allow-code-change. Runs the CLI in this process (threads transport) on a
// copy of the Jacobi example that the tests edit.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { main } from '../../src/cli/main.js'
import { interiorSum, jacobiSerial } from '../../examples/jacobi/serial.js'

let root: string
let program: string
let relaxation: string
let original: string
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'molotof-runid-'))
  const src = join(root, 'prog')
  mkdirSync(src)
  for (const f of ['jacobi.ts', 'plate.ts', 'relaxation.ts']) copyFileSync(join('examples/jacobi', f), join(src, f))
  writeFileSync(join(src, 'package.json'), JSON.stringify({ type: 'module' }))
  program = join(src, 'jacobi.ts')
  relaxation = join(src, 'relaxation.ts')
  original = readFileSync(relaxation, 'utf8')
})
afterAll(() => rmSync(root, { recursive: true, force: true }))

/** The Jacobi update with another weight: a change a user might make. */
function editWeight(): void {
  const edited = original.replace('v[w + j] = 0.25 *', 'v[w + j] = 0.2499 *')
  expect(edited).not.toBe(original)
  writeFileSync(relaxation, edited)
}

async function run(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = []
  const err: string[] = []
  const code = await main(['run', program, '--ranks', '2', ...args], (s) => out.push(s), (s) => err.push(s))
  return { code, out: out.join('\n'), err: err.join('\n') }
}
const checksumOf = (text: string) => Number(/checksum (\S+)/.exec(text)?.[1])

describe('molotof run: a checkpoint belongs to one program version and one run', () => {
  it('an edited program never resumes the old one silently: refused naming the file, or resumed on purpose', async () => {
    const dir = join(root, 'edited')
    const argv = ['--n', '30', '--iterations', '40', '--checkpoint', 'every:10', '--checkpoint-dir', dir, '--quiet']
    const first = await run(...argv)
    expect(first.code).toBe(0)
    expect(checksumOf(first.out)).toBe(interiorSum(jacobiSerial(30, 40), 30))
    editWeight()
    try {
      const resumed = await run(...argv, '--resume')
      expect(resumed.code).toBe(2)
      expect(resumed.out).toBe('')
      expect(resumed.err).toMatch(/the program's code changed since checkpoint \d+ was written: \S*prog\/relaxation\.ts changed\..*--allow-code-change/)

      const allowed = await run(...argv.filter((a) => a !== '--quiet'), '--resume', '--allow-code-change')
      expect(allowed.code).toBe(0)
      expect(allowed.out).toMatch(/warning: resuming from checkpoint \d+ with changed code \(--allow-code-change\): \S*relaxation\.ts changed/)

      // The earlier run finished: a fresh run discards its checkpoints, and a rank killed before
      // this run's first checkpoint makes it start again from the beginning, not from the old code's state.
      const killed = await run(...argv, '--inject', 'rank=1,step=3')
      expect(killed.code).toBe(0)
      const clean = await run('--n', '30', '--iterations', '40', '--checkpoint-dir', join(root, 'clean'), '--quiet')
      expect(checksumOf(killed.out)).toBe(checksumOf(clean.out))
      expect(checksumOf(killed.out)).not.toBe(checksumOf(first.out))
    } finally {
      writeFileSync(relaxation, original)
    }
  })

  it("a fresh run into a directory of an unfinished run is refused with what to do; --fresh discards that run's checkpoints", async () => {
    const dir = join(root, 'reused')
    // Fails after two checkpoints (steps 9 and 19) with no restart left: an unfinished run.
    const failed = await run('--n', '30', '--iterations', '40', '--checkpoint', 'every:10', '--checkpoint-dir', dir, '--inject', 'rank=1,step=25', '--restarts', '0', '--quiet')
    expect(failed.code).toBe(1)
    // Other settings, failing before its first checkpoint: never "cannot resume", which the user did not ask for.
    const other = ['--n', '24', '--iterations', '40', '--checkpoint', 'every:10', '--checkpoint-dir', dir, '--inject', 'rank=0,step=3', '--quiet']
    const refused = await run(...other)
    expect(refused.code).toBe(2)
    expect(refused.err).not.toMatch(/cannot resume/)
    expect(refused.err).toMatch(/holds checkpoints of an earlier run that did not finish \(program jacobi, run \S+, last checkpoint \d+ at skeleton 0 step 19, .*written by the current code\)/)
    expect(refused.err).toMatch(/add --resume.*add --fresh.*another --checkpoint-dir/)
    editWeight()
    try {
      const edited = await run(...other)
      expect(edited.code).toBe(2)
      expect(edited.err).toMatch(/its code differs from the current files: \S*relaxation\.ts changed\).*--allow-code-change/)
    } finally {
      writeFileSync(relaxation, original)
    }
    const fresh = await run(...other, '--fresh')
    expect(fresh.code).toBe(0)
    expect(checksumOf(fresh.out)).toBe(interiorSum(jacobiSerial(24, 40), 24))
    // That run finished: a run with other settings failing before its first checkpoint starts again from the beginning.
    const after = await run('--n', '30', '--iterations', '40', '--checkpoint', 'every:10', '--checkpoint-dir', dir, '--inject', 'rank=0,step=3', '--quiet')
    expect(after.code).toBe(0)
    expect(checksumOf(after.out)).toBe(interiorSum(jacobiSerial(30, 40), 30))
    expect((await run('--fresh', '--resume', '--checkpoint-dir', dir)).err).toMatch(/--fresh discards the checkpoints that --resume would continue from/)
    expect((await run('--allow-code-change', '--checkpoint-dir', dir)).err).toMatch(/--allow-code-change applies to a resume: add --resume/)
  })
})
