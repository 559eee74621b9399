// A resume on a full disk frees what the earlier run's interrupted writes
// left (a torn temporary file, a checkpoint never committed) before it needs
// the room, instead of failing at its first checkpoint. A real full disk: a
// small tmpfs mounted for the test (root only; skipped otherwise).
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, statfsSync, writeFileSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CheckpointStore } from '../../../src/checkpoint/store/checkpoint-store.js'
import { main } from '../../../src/cli/main.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-full-resume-'))
const mnt = join(root, 'mnt')
mkdirSync(mnt)
const mounted = process.getuid?.() === 0 && spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', mnt]).status === 0
if (!mounted) console.log('full-disk resume test skipped: it mounts a small tmpfs (needs root and mount)')

afterAll(async () => {
  // A file the last run's threads still close may keep the mount busy for a moment: try again, then detach it.
  for (let i = 0; mounted && i < 20 && spawnSync('umount', [mnt]).status !== 0; i++) await new Promise((r) => setTimeout(r, 100))
  if (mounted && spawnSync('mountpoint', ['-q', mnt]).status === 0) spawnSync('umount', ['-l', mnt])
  rmSync(root, { recursive: true, force: true })
})

async function cli(...args: string[]): Promise<{ code: number; text: string }> {
  const lines: string[] = []
  const code = await main(args, (s) => lines.push(s), (s) => lines.push(s))
  return { code, text: lines.join('\n') }
}

const dir = join(mnt, 'ckpt')
const second = join(mnt, 'ckpt-b')
const RUN = ['run', 'examples/jacobi/jacobi.ts', '--n', '256', '--iterations', '40', '--checkpoint', 'every:10', '--keep', '1']
const free = () => {
  const s = statfsSync(mnt)
  return s.bavail * s.bsize
}
const filesIn = (d: string) => readdirSync(d).map((n) => statSync(join(d, n)).size)

describe.skipIf(!mounted)('a resume on a full disk', () => {
  let checkpointBytes = 0
  beforeAll(async () => {
    // Rank 1 dies halfway through writing checkpoint 1: its torn file and rank 0's whole one stay behind. With
    // no restart the run ends at once, and rank 0 may be stopped in its own write too (two temporary files):
    // that layout is set up again, as the test is about one torn file beside a whole one.
    for (const d of [dir, second]) {
      let left: string[] = []
      for (let attempt = 0; attempt < 5 && !left.includes('rank-0.mlf'); attempt++) {
        rmSync(d, { recursive: true, force: true })
        const failed = await cli(...RUN, '--checkpoint-dir', d, '--inject', 'rank=1,step=19,phase=checkpoint', '--restarts', '0')
        expect(failed.code).toBe(1)
        left = readdirSync(join(d, 'ckpt-00000001')).sort()
      }
      expect(left).toEqual(['rank-0.mlf', expect.stringMatching(/^rank-1\.mlf\.tmp-\d+-torn$/)])
    }
    checkpointBytes = filesIn(join(dir, 'ckpt-00000000')).reduce((a, b) => a + b, 0)
    // A user's file fills the disk: half a checkpoint is left free, the leftovers hold three quarters of one.
    writeFileSync(join(mnt, 'users-data.bin'), new Uint8Array(free() - Math.floor(checkpointBytes / 2)))
    expect(free()).toBeLessThan(checkpointBytes)
  }, 60_000)

  it('frees the earlier run’s leftovers first, then checkpoints and finishes', async () => {
    const r = await cli(...RUN, '--checkpoint-dir', dir, '--resume')
    expect(r.text).toMatch(/note: freed what interrupted writes of an earlier run left in .*ckpt: checkpoint 1 \(never committed\) and 1 temporary file, \d+\.\d KiB/)
    expect(r.code).toBe(0)
    expect(r.text).toMatch(/resuming from checkpoint 0 \(skeleton 0, step 9\)/)
    expect((await new CheckpointStore(dir).list()).filter((c) => c.complete).map((c) => c.marker?.step)).toEqual([39])
    expect(existsSync(join(mnt, 'users-data.bin'))).toBe(true)
  }, 60_000)

  it('with no room even for the lock file, frees them before taking it instead of refusing', async () => {
    writeFileSync(join(mnt, 'more-users-data.bin'), new Uint8Array(free()))
    expect(free()).toBe(0)
    // No checkpoint to write: what is freed makes room for the lock and the run record, which a start needs.
    const r = await cli(...RUN, '--checkpoint-dir', second, '--resume', '--checkpoint', 'off')
    expect(r.text).toMatch(/note: freed what interrupted writes of an earlier run left in .*ckpt-b: checkpoint 1 \(never committed\) and 1 temporary file/)
    expect(r.code).toBe(0)
    expect(r.text).toMatch(/resuming from checkpoint 0 \(skeleton 0, step 9\)/)
    expect(existsSync(join(mnt, 'more-users-data.bin'))).toBe(true)
  }, 60_000)
})
