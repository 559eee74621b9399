// What a run says of itself where a new user was left guessing: --compress
// with no disk policy, and Jacobi's compute time after a recovery.
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { checksumOf, run, sandbox, straight } from './jacobi-cli.js'

const { root, ramDirs } = sandbox('molotof-run-notes-')

describe('--compress with a memory level only (--checkpoint off)', () => {
  it('says what it compresses: only the disk checkpoint a stop writes', async () => {
    const memory = join('/dev/shm', `molotof-run-notes-${process.pid}`)
    ramDirs.push(memory)
    const r = await run('--memory-checkpoint', 'every:5', '--memory-dir', memory, '--compress', '--checkpoint-dir', join(root, 'compress'))
    expect(r.code, r.err).toBe(0)
    expect(r.out).toMatch(/note: --compress with --checkpoint off: memory checkpoints are never compressed; only the disk checkpoint a stop writes \(SIGTERM, SIGINT, --time-limit\) is/)
    // With a disk policy, nothing to say.
    const withDisk = await run('--memory-checkpoint', 'every:5', '--memory-dir', memory, '--compress', '--checkpoint', 'every:10', '--checkpoint-dir', join(root, 'compress-disk'))
    expect(withDisk.code, withDisk.err).toBe(0)
    expect(withDisk.out).not.toMatch(/note: --compress/)
  })
})

describe("Jacobi's compute time", () => {
  it('after a recovery says it counts from the restart; a run without one says nothing of the kind', async () => {
    const failed = await run('--checkpoint', 'every:10', '--checkpoint-dir', join(root, 'jacobi'), '--inject', 'rank=1,step=25')
    expect(failed.code, failed.err).toBe(0)
    expect(checksumOf(failed.out)).toBe(straight)
    expect(failed.out).toMatch(/compute {2}\d+\.\d{3} s \(from the checkpoint it resumed from: the steps before it are not counted\)/)
    const plain = await run('--checkpoint', 'every:10', '--checkpoint-dir', join(root, 'jacobi-plain'))
    expect(plain.out).toMatch(/compute {2}\d+\.\d{3} s$/m)
  })
})
