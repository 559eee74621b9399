// A checkpoint belongs to one run lineage and one version of the program's
// code: the code identity, and the lineage filter of a resume.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { codeChanges, codeIdentityOf } from '../../../src/checkpoint/identity/code.js'
import { checkResumeCode } from '../../../src/checkpoint/identity/run.js'
import { CheckpointStore } from '../../../src/checkpoint/store/checkpoint-store.js'
import { CodeChangedError, runLocal } from '../../../src/index.js'
import jacobi from '../../../examples/jacobi/jacobi.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
function freshDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'molotof-identity-'))
  dirs.push(d)
  return d
}

const url = (p: string) => pathToFileURL(resolve(p)).href

describe('code identity', () => {
  it('covers the program and its local modules, not the framework nor node_modules', () => {
    const loaded = [
      'examples/jacobi/jacobi.ts',
      'src/index.ts',
      'examples/jacobi/plate.ts',
      'src/checkpoint/coordination/coordinator.ts',
      'examples/jacobi/relaxation.ts',
      'node_modules/superjson/dist/index.js',
    ].map(url)
    // tsx reports modules with a namespace query; built-ins are not files.
    const code = codeIdentityOf('examples/jacobi/jacobi.ts', [...loaded, `${url('examples/jacobi/plate.ts')}?tsx-namespace=r0`, 'node:fs'])
    expect(Object.keys(code.files)).toEqual(['jacobi.ts', 'plate.ts', 'relaxation.ts'])
    expect(code.hash).toMatch(/^[0-9a-f]{16}$/)
  })

  it('tells which file changed, was added or removed, and refuses a resume unless allowed', () => {
    const dir = freshDir()
    const write = (name: string, text: string) => writeFileSync(join(dir, name), text)
    const urls = (...names: string[]) => names.map((n) => pathToFileURL(join(dir, n)).href)
    write('main.ts', 'export default 1')
    write('a.ts', 'export const a = 0.25')
    write('b.ts', 'export const b = 2')
    const before = codeIdentityOf(join(dir, 'main.ts'), urls('a.ts', 'b.ts'))
    expect(codeChanges(before, codeIdentityOf(join(dir, 'main.ts'), urls('b.ts', 'a.ts')))).toEqual([])
    write('a.ts', 'export const a = 0.2499')
    write('c.ts', 'export const c = 3')
    const after = codeIdentityOf(join(dir, 'main.ts'), urls('a.ts', 'c.ts'))
    expect(after.hash).not.toBe(before.hash)
    expect(codeChanges(before, after)).toEqual([
      { file: 'a.ts', change: 'changed' },
      { file: 'b.ts', change: 'removed' },
      { file: 'c.ts', change: 'added' },
    ])
    const o = { seq: 4, allow: false, programFile: join(dir, 'main.ts') }
    expect(() => checkResumeCode(before, after, o)).toThrow(CodeChangedError)
    expect(() => checkResumeCode(before, after, o)).toThrow(/code changed since checkpoint 4 was written: .*a\.ts changed, .*b\.ts removed, .*c\.ts added.*--allow-code-change/)
    expect(checkResumeCode(before, after, { ...o, allow: true })).toMatch(/resuming from checkpoint 4 with changed code \(--allow-code-change\): .*a\.ts changed/)
    // Unknown code on either side (a program run in-process) is not compared.
    expect(checkResumeCode(undefined, after, o)).toBeUndefined()
  })
})

describe('run lineage', () => {
  const argv = ['--n', '12', '--iterations', '9']
  const ft = (dir: string, extra: object) => ({ dir, policy: { every: 2 }, keep: 2, resume: false, ...extra })

  it('a resume uses only the checkpoints of its own run', async () => {
    const dir = freshDir()
    await expect(runLocal(jacobi, { ranks: 2, argv, checkpoint: { ...ft(dir, { runId: 'run-a' }), interrupt: { skeleton: 0, step: 5 } } })).rejects.toThrow(
      /interrupted/,
    )
    const logs: string[] = []
    await runLocal(jacobi, { ranks: 2, argv, checkpoint: ft(dir, { runId: 'run-b', resume: true }), onLog: (_r, t) => logs.push(t) })
    expect(logs.join('\n')).toMatch(/no valid checkpoint .* starting from the beginning/)
    expect(logs.join('\n')).not.toMatch(/resuming from checkpoint/)
    // Run b's own checkpoints are newer now, but run a still resumes from its own.
    logs.length = 0
    await runLocal(jacobi, { ranks: 2, argv, checkpoint: ft(dir, { runId: 'run-a', resume: true }), onLog: (_r, t) => logs.push(t) })
    expect(logs.join('\n')).toMatch(/resuming from checkpoint \d+ \(skeleton 0, step 5\)/)
    const store = new CheckpointStore(dir)
    const listed = await store.list()
    expect(new Set(listed.map((c) => c.marker?.runId))).toEqual(new Set(['run-a', 'run-b']))
    // Every rank file carries the run id of its marker.
    for (const c of listed) expect((await store.loadRankFile(c.seq, 1)).header.runId).toBe(c.marker?.runId)
  })
})
