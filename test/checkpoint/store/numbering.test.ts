// Checkpoint numbers come from molotof's own checkpoints only: a user's folder
// named like one (`ckpt-00000099`) neither moves the numbering nor is written
// into; its number is skipped when the run gets there.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { CheckpointStore } from '../../../src/checkpoint/store/checkpoint-store.js'
import { CheckpointNumbers } from '../../../src/checkpoint/store/numbering.js'
import { run, sandbox, type RunEvent } from '../../cli/jacobi-cli.js'
import { writeCheckpoint } from '../helpers.js'

const { root } = sandbox('molotof-numbering-')

/** A folder of the user's named like checkpoint `seq`, holding a file of theirs. */
function plant(dir: string, seq: number): string {
  const folder = join(dir, `ckpt-${String(seq).padStart(8, '0')}`)
  mkdirSync(folder, { recursive: true })
  writeFileSync(join(folder, 'notes.txt'), `mine ${seq}`)
  return folder
}

describe('checkpoint numbers', () => {
  it('CheckpointNumbers: increasing, never a taken number, every free number from the first on', () => {
    fc.assert(
      fc.property(fc.nat(50), fc.uniqueArray(fc.nat(80), { maxLength: 20 }), fc.integer({ min: 1, max: 40 }), (first, taken, count) => {
        const numbers = new CheckpointNumbers(first, taken)
        const given = Array.from({ length: count }, () => numbers.take())
        const free = Array.from({ length: first + count + taken.length + 1 }, (_, n) => n).filter((n) => n >= first && !taken.includes(n))
        expect(given).toEqual(free.slice(0, count))
        expect(numbers.last).toBe(given[given.length - 1])
      }),
    )
  })

  it("a store's next number: past molotof's own checkpoints, a user's folder skipped, never counted", async () => {
    const dir = join(root, 'store')
    const store = new CheckpointStore(dir)
    plant(dir, 99)
    expect(await store.nextSeq()).toBe(0)
    await writeCheckpoint(store, 0)
    plant(dir, 1)
    expect(await store.nextSeq()).toBe(2)
  })

  it("a run numbers from its own checkpoints: 0, 2, 3, 4 beside the user's ckpt-00000001 and ckpt-00000099, both untouched", async () => {
    const dir = join(root, 'run')
    const planted = [plant(dir, 1), plant(dir, 99)]
    const events = join(root, 'run-events.jsonl')
    const r = await run('--checkpoint', 'every:10', '--keep', '10', '--checkpoint-dir', dir, '--events', events)
    expect(r.code, r.err).toBe(0)
    const committed = readFileSync(events, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as RunEvent).filter((e) => e.event === 'checkpoint').map((e) => e.seq)
    expect(committed).toEqual([0, 2, 3, 4])
    for (const [i, folder] of planted.entries()) {
      expect(readdirSync(folder)).toEqual(['notes.txt'])
      expect(readFileSync(join(folder, 'notes.txt'), 'utf8')).toBe(`mine ${[1, 99][i]}`)
    }
    expect(readdirSync(dir).filter((n) => n.startsWith('ckpt-')).sort()).toEqual(['ckpt-00000000', 'ckpt-00000001', 'ckpt-00000002', 'ckpt-00000003', 'ckpt-00000004', 'ckpt-00000099'])
  })
})
