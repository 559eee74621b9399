// A memory-level run killed while a disk checkpoint was being flushed leaves
// that checkpoint without a commit marker. It never was a recovery line:
// inspect lists it as uncommitted without failing, and the next start does
// not warn about it. A marker missing under a newer commit is still damage.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { memoryDirFor } from '../../src/checkpoint/store/memory-level.js'
import { main } from '../../src/cli/main.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-uncommitted-'))
const dirs: string[] = []
afterAll(() => {
  // A failed memory-level run leaves its memory level in RAM for --resume.
  for (const d of dirs) rmSync(memoryDirFor(d), { recursive: true, force: true })
  rmSync(root, { recursive: true, force: true })
})

async function cli(...args: string[]): Promise<{ code: number; text: string }> {
  const lines: string[] = []
  const code = await main(args, (s) => lines.push(s), (s) => lines.push(s))
  return { code, text: lines.join('\n') }
}

const JACOBI = ['run', 'examples/jacobi/jacobi.ts', '--n', '32', '--iterations', '40']
const ckpt = (seq: number) => `ckpt-${String(seq).padStart(8, '0')}`

describe('an uncommitted checkpoint left by a killed run', () => {
  it('is listed as uncommitted by inspect (exit 0) and not warned about by the next --resume', async () => {
    const dir = join(root, 'memory')
    dirs.push(dir)
    const opts = ['--checkpoint', 'every:10', '--memory-checkpoint', 'every:2', '--checkpoint-dir', dir]
    const failed = await cli(...JACOBI, ...opts, '--inject', 'rank=1,step=25', '--restarts', '0')
    expect(failed.code).toBe(1)
    // What a flush interrupted by the kill leaves, whatever the timing of this run's own flushes:
    // a checkpoint directory with a rank file under its temporary name and no commit marker.
    mkdirSync(join(dir, ckpt(30)))
    writeFileSync(join(dir, ckpt(30), 'rank-0.mlf.tmp-4242-0badf00d'), new Uint8Array(100))
    const listing = await cli('inspect', dir)
    expect(listing.text).toMatch(/#30 +uncommitted .*\n +not committed: its write was interrupted when its run stopped/)
    expect(listing.text).not.toMatch(/INCOMPLETE|INVALID/)
    expect(listing.code).toBe(0)

    const resumed = await cli(...JACOBI, ...opts, '--resume')
    expect(resumed.code).toBe(0)
    expect(resumed.text).toMatch(/resuming from checkpoint \d+ \(skeleton 0, step 2[0-5]\) from the memory level/)
    expect(resumed.text).not.toMatch(/skipped|not completed|not committed|commit marker/)
  }, 120_000)

  it('a commit marker missing under a newer commit is still reported as incomplete', async () => {
    const dir = join(root, 'disk')
    const failed = await cli(...JACOBI, '--checkpoint', 'every:5', '--keep', '3', '--checkpoint-dir', dir, '--inject', 'rank=1,step=22', '--restarts', '0')
    expect(failed.code).toBe(1)
    // Checkpoints 1, 2, 3 (steps 9, 14, 19) kept; the marker of the middle one lost.
    expect(readdirSync(dir).filter((n) => n.startsWith('ckpt-'))).toEqual([ckpt(1), ckpt(2), ckpt(3)])
    unlinkSync(join(dir, ckpt(2), 'COMMIT'))
    const listing = await cli('inspect', dir)
    expect(listing.text).toMatch(/#2 +INCOMPLETE .*\n +no commit marker: the checkpoint was not completed/)
    expect(listing.text).toMatch(/#3 +valid/)
    expect(listing.code).toBe(0)
  }, 120_000)
})
