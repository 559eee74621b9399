import { rm } from 'node:fs/promises'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { CheckpointStore } from '../../src/checkpoint/store/checkpoint-store.js'
import { main } from '../../src/cli/main.js'
import { tempDir, writeCheckpoint } from '../checkpoint/helpers.js'

let dir: string
beforeEach(async () => {
  dir = await tempDir('inspect')
})
afterEach(async () => {
  await rm(dir, { recursive: true, force: true })
})

async function inspect(...args: string[]): Promise<{ code: number; text: string }> {
  const lines: string[] = []
  const code = await main(['inspect', dir, ...args], (s) => lines.push(s))
  return { code, text: lines.join('\n') }
}

describe('molotof inspect', () => {
  it('lists the kept checkpoints and the spare files pruning left, in text and JSON', async () => {
    const store = new CheckpointStore(dir)
    for (let seq = 0; seq < 3; seq++) await writeCheckpoint(store, seq)
    expect((await inspect()).text).not.toMatch(/spare/)
    await store.prune(2)
    const { code, text } = await inspect('--verify')
    expect(code).toBe(0)
    expect(text).toMatch(/#1 {2}valid/)
    expect(text).toMatch(/#2 {2}valid/)
    expect(text).not.toMatch(/#0 /)
    expect(text).toMatch(/spare: 3 rank files of pruned checkpoints/)
    const json = JSON.parse((await inspect('--json')).text) as { checkpoints: { seq: number }[]; spares: { rank: number; bytes: number }[] }
    expect(json.checkpoints.map((c) => c.seq)).toEqual([1, 2])
    expect(json.spares.map((s) => s.rank)).toEqual([0, 1, 2])
    expect(json.spares.every((s) => s.bytes > 0)).toBe(true)
  })
})

describe('molotof inspect: elastic restart', () => {
  it('says whether each checkpoint can be resumed on another rank count, and what blocks it', async () => {
    const { runLocal } = await import('../../src/index.js')
    const line = (await import('../fixtures/elastic.js')).default
    const cases: Array<[string[], RegExp, boolean]> = [
      [['--acc', 'box'], /#\d+ {2}valid .* entries: .* elastic$/m, true],
      [['--acc', 'nobox'], /not elastic\n {6}on another rank count: no: "acc" \(skeleton 0\) is an array saved without its global box/, false],
      [['--tally', 'plain', '--n', '16'], /not elastic\n {6}on another rank count: only if the program merges them: "tally" \(skeleton 0\) is a light value that differs between ranks/, false],
    ]
    for (const [argv, said, ok] of cases) {
      await rm(dir, { recursive: true, force: true })
      await runLocal(line, { ranks: 3, argv, checkpoint: { dir, policy: { every: 3 }, keep: 1, resume: false } })
      const { code, text } = await inspect()
      expect(code).toBe(0)
      expect(text).toMatch(said)
      const json = JSON.parse((await inspect('--json')).text) as { checkpoints: { elastic: { ok: boolean } }[] }
      expect(json.checkpoints[0].elastic.ok).toBe(ok)
    }
  })
})
