// An unreadable newest checkpoint (EACCES: its directory, its marker or a rank
// file) is an unusable one, as a damaged one is: the resume falls back to the
// previous checkpoint, and the run goes on past it (pruning leaves what it
// cannot delete). Mode bits do not stop root: as root, the resume runs as
// `nobody` through setpriv, on a copy owned by that user.
import { spawnSync } from 'node:child_process'
import { chmodSync, chownSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { runLocal } from '../../../src/runtime/launch/local.js'
import jacobi from '../../../examples/jacobi/jacobi.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-unreadable-'))
afterAll(() => {
  chmodR(root)
  rmSync(root, { recursive: true, force: true })
})

const NOBODY = 65534
const asRoot = process.getuid?.() === 0
const setpriv = spawnSync('setpriv', ['--version']).status === 0
// The resuming user runs this checkout's tsx: a checkout under a directory of mode 0700 (mktemp -d) is closed to it.
const readableByNobody = () =>
  spawnSync('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', 'test', '-r', join(process.cwd(), 'node_modules', '.bin', 'tsx')]).status === 0
const why =
  asRoot && !setpriv
    ? 'running as root without setpriv (util-linux): cannot drop to another user for EACCES'
    : asRoot && !readableByNobody()
      ? `user nobody cannot read this checkout (${process.cwd()}: a parent directory closed to other users)`
      : undefined
if (why) console.log(`unreadable checkpoint tests skipped: ${why}`)

const argv = ['--n', '12', '--iterations', '10', '--return-rows']

function chmodR(dir: string): void {
  spawnSync('chmod', ['-R', 'u+rwX', dir])
}

/** Checkpoints 0, 1, 2 (steps 1, 3, 5) of a run interrupted after step 6, in a directory the resuming user owns. */
async function interrupted(name: string): Promise<string> {
  const dir = join(root, name)
  await expect(runLocal(jacobi, { ranks: 3, argv, checkpoint: { dir, policy: { every: 2 }, keep: 3, resume: false, interrupt: { skeleton: 0, step: 6 } } })).rejects.toThrow(/interrupted/)
  expect(readdirSync(dir).filter((n) => n.startsWith('ckpt-')).sort()).toEqual(['ckpt-00000000', 'ckpt-00000001', 'ckpt-00000002'])
  // As root: the resuming user owns the directory, and may enter the test's temporary folder (mode 0700).
  if (asRoot) {
    spawnSync('chown', ['-R', `${NOBODY}:${NOBODY}`, dir])
    chownSync(root, NOBODY, NOBODY)
  }
  return dir
}

function resumeAsUser(dir: string): { ok: boolean; logs: string[]; grids?: number[][]; error?: string } {
  const cmd = [join('node_modules', '.bin', 'tsx'), join('test', 'fixtures', 'resume-jacobi.ts'), dir, ...argv]
  const r = asRoot
    ? spawnSync('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', ...cmd], { encoding: 'utf8', env: { ...process.env, HOME: root } })
    : spawnSync(cmd[0], cmd.slice(1), { encoding: 'utf8' })
  const line = r.stdout.trim().split('\n').pop() ?? ''
  expect(line, r.stderr).toMatch(/^\{/)
  return JSON.parse(line) as { ok: boolean; logs: string[]; grids?: number[][]; error?: string }
}

describe.skipIf(why !== undefined)('an unreadable newest checkpoint (EACCES)', () => {
  it.each([
    ['its directory', (c: string) => chmodSync(c, 0o000), /checkpoint 2 skipped: .*ckpt-00000002: the directory cannot be read: permission denied \(EACCES\)/],
    ['its commit marker', (c: string) => chmodSync(join(c, 'COMMIT'), 0o000), /checkpoint 2 skipped: .*COMMIT: .*permission denied \(EACCES\)/],
    ['a rank file', (c: string) => chmodSync(join(c, 'rank-1.mlf'), 0o000), /checkpoint 2 skipped: .*rank-1\.mlf: permission denied \(EACCES\)/],
  ])('%s: the previous checkpoint is used, and the run goes on to the same result', async (what, deny, warning) => {
    const reference = (await runLocal(jacobi, { ranks: 3, argv })).map((r) => Array.from(r.rows!.values))
    const dir = await interrupted(what.replaceAll(' ', '-'))
    deny(join(dir, 'ckpt-00000002'))
    const r = resumeAsUser(dir)
    expect(r.error).toBeUndefined()
    expect(r.ok).toBe(true)
    const text = r.logs.join('\n')
    expect(text).toMatch(warning)
    expect(text).toMatch(/resuming from checkpoint 1 \(skeleton 0, step 3\)/)
    expect(r.grids).toEqual(reference)
  }, 60_000)
})
