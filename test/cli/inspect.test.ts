import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { join } from 'node:path'
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

describe('molotof inspect: the partner and shared levels', () => {
  // Jacobi on 2 ranks, disk checkpoints 0 (step 3) and 1 (step 7); with ranksPerNode 1, rank r's copy is kept by rank 1 - r.
  const argv = ['--n', '8', '--iterations', '8']
  const newest = (d: string) => readdirSync(d).filter((n) => n.startsWith('ckpt-')).sort().pop()!
  function damage(file: string): void {
    const bytes = readFileSync(file)
    bytes[bytes.length - 9] ^= 0xff
    writeFileSync(file, bytes)
  }
  async function said(...args: string[]): Promise<{ code: number; text: string; err: string }> {
    const lines: string[] = []
    const errs: string[] = []
    const code = await main(['inspect', ...args], (s) => lines.push(s), (s) => errs.push(s))
    return { code, text: lines.join('\n'), err: errs.join('\n') }
  }
  /** The lines of the level whose heading names `where`, heading included. */
  function levelIn(text: string, where: string): string {
    const lines = text.split('\n')
    const at = lines.findIndex((l) => l.startsWith(`checkpoints in ${where} (`))
    if (at < 0) return ''
    const end = lines.findIndex((l, i) => i > at && !l.startsWith(' '))
    return lines.slice(at, end < 0 ? undefined : end).join('\n')
  }

  it("{rank} directories: each partner/ listed with the ranks it keeps; damaged copies are named, with the levels that can replace them", async () => {
    const { Supervisor } = await import('../../src/runtime/launch/supervisor.js')
    const template = join(dir, 'ck-{rank}')
    const [ck0, ck1] = [join(dir, 'ck-0'), join(dir, 'ck-1')]
    const shared = join(dir, 'shared')
    const checkpoint = { dir: template, policy: { every: 4 }, keep: 2, resume: false, partner: { ranksPerNode: 1 }, shared: { dir: join(shared, 'jacobi'), every: 2 } }
    expect((await new Supervisor('examples/jacobi/jacobi.ts', { ranks: 2, argv, checkpoint, onLog: () => {} }).run()).kind).toBe('done')

    const fine = await said(template, '--shared-dir', shared, '--verify')
    expect(fine.code).toBe(0)
    // Re-slicing is judged from the files wherever they are: Jacobi's checkpoints resume on any rank count.
    expect(levelIn(fine.text, `${ck0}, ${ck1}`)).toMatch(/#1 {2}valid .* elastic$/m)
    const partner0 = levelIn(fine.text, `${ck0}/partner`)
    expect(partner0).toMatch(/^checkpoints in \S+ \(partner level/)
    expect(partner0).toMatch(/#0 {2}valid .* step 3 {2}2 ranks {2}copies of rank 1 /)
    expect(partner0).toMatch(/#1 {2}valid .* step 7 {2}2 ranks {2}copies of rank 1 /)
    expect(levelIn(fine.text, `${ck1}/partner`)).toMatch(/#1 {2}valid .* copies of rank 0 /)
    // every:2 of the disk checkpoints 0 and 1: the shared level holds the first only.
    const sharedLevel = levelIn(fine.text, join(shared, 'jacobi'))
    expect(sharedLevel).toMatch(/\(shared level\)[^\n]*\n {2}#0 {2}valid .* step 3 /)
    expect(sharedLevel).not.toMatch(/#1 /)
    const json = JSON.parse((await said(template, '--shared-dir', shared, '--json')).text) as {
      levels: { level: string; dir?: string; dirs?: string[]; checkpoints: { seq: number; present: number[] }[] }[]
    }
    expect(json.levels.map((l) => [l.level, l.dir ?? l.dirs])).toEqual([
      ['disk', [ck0, ck1]],
      ['partner', `${ck0}/partner`],
      ['partner', `${ck1}/partner`],
      ['shared', join(shared, 'jacobi')],
    ])
    expect(json.levels.slice(1, 3).map((l) => l.checkpoints.map((c) => c.present))).toEqual([[[1], [1]], [[0], [0]]])

    // A damaged partner copy: that level says so, naming the file; the disk level (the exit code) is intact.
    const copy = join(ck0, 'partner', newest(ck0), 'rank-1.mlf')
    damage(copy)
    const badCopy = await said(template, '--shared-dir', shared, '--verify')
    expect(badCopy.code).toBe(0)
    expect(levelIn(badCopy.text, `${ck0}/partner`)).toMatch(
      new RegExp(`#1 {2}INVALID .*\\n {6}${copy}: checksum mismatch.*\\n {6}rank 1's file: a valid copy is on the disk level \\(${ck0}, ${ck1}\\)`),
    )

    // A damaged disk file: exit 1 even where the partner level holds a valid copy, which the listing names.
    damage(join(ck0, newest(ck0), 'rank-0.mlf'))
    const badDisk = await said(template, '--shared-dir', shared, '--verify')
    expect(badDisk.code).toBe(1)
    expect(levelIn(badDisk.text, `${ck0}, ${ck1}`)).toMatch(new RegExp(`#1 {2}INVALID [^]*rank 0's file: a valid copy is on the partner level \\(${ck1}/partner\\)`))
    // Rank 1's disk file damaged too: its partner copy is damaged and the shared level has no checkpoint 1.
    damage(join(ck1, newest(ck1), 'rank-1.mlf'))
    expect((await said(template, '--shared-dir', shared, '--verify')).text).toMatch(/rank 1's file: no valid copy on another level/)
  })

  it('one directory: its partner/ and the shared level named by --shared-dir (the run\'s, or its checkpoint directory)', async () => {
    const { runLocal } = await import('../../src/index.js')
    const jacobi = (await import('../../examples/jacobi/jacobi.js')).default
    const shared = join(dir, 'shared')
    const ckpt = join(dir, 'ckpt')
    const checkpoint = { dir: ckpt, policy: { every: 4 }, keep: 2, resume: false, partner: { ranksPerNode: 1 }, shared: { dir: join(shared, 'jacobi'), every: 1 } }
    await runLocal(jacobi, { ranks: 2, argv, checkpoint })
    // One directory for both ranks here: its partner/ keeps both ranks' copies.
    const { code, text } = await said(ckpt, '--shared-dir', join(shared, 'jacobi'))
    expect(code).toBe(0)
    expect(levelIn(text, `${ckpt}/partner`)).toMatch(/#1 {2}valid .* copies of ranks 0, 1 /)
    expect(levelIn(text, join(shared, 'jacobi'))).toMatch(/#1 {2}valid .* step 7 /)
    const json = JSON.parse((await said(ckpt, '--shared-dir', shared, '--json')).text) as { levels: { level: string; dir: string }[] }
    expect(json.levels.map((l) => [l.level, l.dir])).toEqual([
      ['disk', ckpt],
      ['partner', `${ckpt}/partner`],
      ['shared', join(shared, 'jacobi')],
    ])
    // A damaged disk file: exit 1, though the partner and shared levels hold valid copies of it (the listing names them).
    damage(join(ckpt, newest(ckpt), 'rank-1.mlf'))
    const badDisk = await said(ckpt, '--shared-dir', shared, '--verify')
    expect(badDisk.code).toBe(1)
    expect(levelIn(badDisk.text, ckpt)).toMatch(
      new RegExp(`#1 {2}INVALID [^]*rank 1's file: a valid copy is on the partner level \\(${ckpt}/partner\\), the shared level \\(${join(shared, 'jacobi')}\\)`),
    )
    // A shared directory of several programs: inspect asks which one.
    mkdirSync(join(shared, 'other', 'ckpt-00000000'), { recursive: true })
    const two = await said(ckpt, '--shared-dir', shared)
    expect(two.code).toBe(2)
    expect(two.err).toMatch(/holds the checkpoints of several programs \(jacobi, other\): name one/)
  })
})
