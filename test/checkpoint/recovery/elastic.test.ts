import fc from 'fast-check'
import { mkdtempSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { launch, runLocal, type FaultToleranceConfig } from '../../../src/index.js'
import { readHeaderOnly } from '../../../src/checkpoint/format/rank-file.js'
import jacobi, { type JacobiResult } from '../../../examples/jacobi/jacobi.js'
import swing from '../../../examples/swing/swing.js'
import { resolveParams } from '../../../examples/swing/model/params.js'
import { valueSwing } from '../../../examples/swing/model/serial.js'
import line, { type ElasticResult } from '../../fixtures/elastic.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
function freshDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'molotof-elastic-'))
  dirs.push(d)
  return d
}
const ft = (dir: string, extra: Partial<FaultToleranceConfig> = {}): FaultToleranceConfig => ({ dir, policy: { every: 1 }, keep: 2, resume: false, ...extra })
const bits = (xs: ArrayLike<number>) => Array.from(new BigUint64Array(Float64Array.from(xs).buffer))

/** The whole interior, row by row, as bit patterns. */
function grid(rs: JacobiResult[]): bigint[] {
  return [...rs].sort((a, b) => a.rows!.first - b.rows!.first).flatMap((r) => bits(r.rows!.values))
}
/** Checkpoint on `from` ranks, stopped after step `stop`, then resumed on `to`: the results and the log. */
async function resumeElsewhere<R>(
  program: Parameters<typeof runLocal<R>>[0],
  argv: string[],
  from: number,
  to: number,
  stop: number,
  extra: Partial<FaultToleranceConfig> = {},
): Promise<{ results: R[]; log: string; dir: string }> {
  const dir = freshDir()
  await expect(runLocal(program, { ranks: from, argv, checkpoint: { ...ft(dir, extra), interrupt: { skeleton: 0, step: stop } } })).rejects.toThrow(/interrupted/)
  const logs: string[] = []
  const results = await runLocal(program, { ranks: to, argv, checkpoint: ft(dir, { ...extra, resume: true }), onLog: (_r, t) => logs.push(t) })
  return { results, log: logs.join('\n'), dir }
}

describe('elastic restart: Jacobi', () => {
  const argv = (n: number, iterations: number, minimal = true) => ['--n', String(n), '--iterations', String(iterations), '--return-rows', minimal ? '--minimal' : '--no-minimal']

  it.each([1, 2, 3, 5])('a checkpoint of 4 ranks resumed on %i gives the bit-identical grid', async (to) => {
    const a = argv(11, 9)
    const reference = grid(await runLocal(jacobi, { ranks: to, argv: a }))
    const { results, log } = await resumeElsewhere<JacobiResult>(jacobi, a, 4, to, 5, { policy: { every: 2 } })
    expect(log).toContain(`resuming a checkpoint of 4 ranks on ${to}`)
    expect(log).toMatch(/resuming from checkpoint \d+ \(skeleton 0, step 5\)/)
    expect(grid(results)).toEqual(reference)
  })

  it('property: any P → P′, n, step and contents give the grid of an uninterrupted run, bit for bit', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 14 }),
        fc.integer({ min: 0, max: 5 }),
        fc.boolean(),
        async (from, to, n, stop, minimal) => {
          const a = argv(n, 6, minimal)
          const reference = grid(await runLocal(jacobi, { ranks: 1, argv: a }))
          const { results } = await resumeElsewhere<JacobiResult>(jacobi, a, from, to, stop)
          expect(grid(results)).toEqual(reference)
        },
      ),
      { numRuns: 15 },
    )
  })

  const damages: Array<[string, (file: string) => Promise<void>, RegExp]> = [
    [
      'a flipped byte in the middle of its grid (only the collective checksum can tell)',
      async (file) => {
        const { header, fileBytes } = await readHeaderOnly(file)
        const read = header.entries.find((e) => e.name === 'read')!
        const bytes = readFileSync(file)
        bytes[fileBytes - header.dataLength + read.offset + Math.floor(read.length / 2)] ^= 0x10
        writeFileSync(file, bytes)
      },
      /warning: checkpoint \d+ skipped: .*rank-2\.mlf: checksum mismatch in entry "read"/,
    ],
    ['a deleted file (seen by negotiation)', async (file) => unlinkSync(file), /warning: checkpoint \d+ skipped: .*rank-2\.mlf: the file is missing/],
  ]
  it.each(damages)('a damaged old file that a new rank needs, %s: the previous complete checkpoint is used, with a warning naming the file', async (_what, damage, warning) => {
    const a = argv(12, 9)
    const reference = grid(await runLocal(jacobi, { ranks: 3, argv: a }))
    const dir = freshDir()
    const cfg = ft(dir, { policy: { every: 2 }, keep: 3 })
    await expect(runLocal(jacobi, { ranks: 4, argv: a, checkpoint: { ...cfg, interrupt: { skeleton: 0, step: 6 } } })).rejects.toThrow(/interrupted/)
    const newest = join(dir, readdirSync(dir).filter((f) => f.startsWith('ckpt-')).sort().pop()!)
    await damage(join(newest, 'rank-2.mlf'))
    const logs: string[] = []
    const resumed = await runLocal(jacobi, { ranks: 3, argv: a, checkpoint: { ...cfg, resume: true }, onLog: (_r, t) => logs.push(t) })
    const text = logs.join('\n')
    expect(text).toMatch(warning)
    expect(text).toMatch(/resuming from checkpoint \d+ \(skeleton 0, step 3\)/)
    expect(grid(resumed)).toEqual(reference)
  })
})

describe('elastic restart: worker threads', () => {
  it('a checkpoint of 3 rank threads resumed on 2 (shared-memory domains) gives the checksum of a run without checkpoints', async () => {
    const argv = ['--n', '40', '--iterations', '12']
    const dir = freshDir()
    const cfg = ft(dir, { policy: { every: 3 } })
    await expect(launch('examples/jacobi/jacobi.ts', { ranks: 3, argv, checkpoint: { ...cfg, interrupt: { skeleton: 0, step: 7 } }, onLog: () => {} })).rejects.toThrow(/interrupted/)
    const logs: string[] = []
    const resumed = await launch<JacobiResult>('examples/jacobi/jacobi.ts', { ranks: 2, argv, checkpoint: { ...cfg, resume: true }, onLog: (_r, t) => logs.push(t) })
    expect(logs.join('\n')).toMatch(/resuming a checkpoint of 3 ranks on 2[\s\S]*resuming from checkpoint \d+ \(skeleton 0, step 5\)/)
    const [plain] = await runLocal(jacobi, { ranks: 1, argv })
    expect(Object.is(resumed.value.checksum, plain.checksum)).toBe(true)
  })
})

describe('elastic restart: swing (domains resized every step)', () => {
  it.each([1, 3])('a checkpoint of 2 ranks resumed on %i gives the serial valuation exactly', async (to) => {
    const serial = valueSwing(resolveParams('small-g')).value
    for (const window of ['--window', '--no-window']) {
      const { results, log } = await resumeElsewhere(swing, ['--preset', 'small-g', window], 2, to, 17, { policy: { every: 5 } })
      expect(log).toContain(`resuming a checkpoint of 2 ranks on ${to}`)
      expect(Object.is(results[0].value, serial), `${window}: ${results[0].value} vs ${serial}`).toBe(true)
    }
  })
})

describe('elastic restart: registered arrays and light values, both routing modes', () => {
  const assemble = (rs: ElasticResult[], key: 'values' | 'acc') => {
    const out: number[] = []
    for (const r of rs) r[key].forEach((v, i) => (out[(key === 'acc' ? r.accFirst : r.first) + i] = v))
    return bits(out)
  }

  it.each([
    ['border', 4, 3],
    ['border', 2, 5],
    ['circulation', 4, 3],
    ['circulation', 3, 1],
    ['circulation', 2, 5],
  ] as const)('%s: an array registered with its box and a value with a merge rule, %i → %i ranks, match an uninterrupted run', async (routing, from, to) => {
    const argv = ['--routing', routing, '--acc', 'box', '--tally', 'merge']
    const reference = await runLocal(line, { ranks: to, argv })
    const { results, log } = await resumeElsewhere<ElasticResult>(line, argv, from, to, 4, { policy: { every: 2 } })
    expect(log).toContain(`resuming a checkpoint of ${from} ranks on ${to}`)
    expect(assemble(results, 'values')).toEqual(assemble(reference, 'values'))
    expect(assemble(results, 'acc')).toEqual(assemble(reference, 'acc'))
    // The merge rule gives rank 0 the old ranks' sum: the total is the uninterrupted run's.
    expect(results.reduce((s, r) => s + r.tally, 0)).toBe(reference.reduce((s, r) => s + r.tally, 0))
  })

  it('an array registered without its box is refused by name, on another rank count only', async () => {
    const argv = ['--acc', 'nobox']
    const dir = freshDir()
    await expect(runLocal(line, { ranks: 3, argv, checkpoint: { ...ft(dir), interrupt: { skeleton: 0, step: 3 } } })).rejects.toThrow(/interrupted/)
    await expect(runLocal(line, { ranks: 2, argv, checkpoint: ft(dir, { resume: true }) })).rejects.toThrow(
      /cannot resume checkpoint \d+, taken on 3 ranks, on 2: "acc" \(skeleton 0\) is an array saved without its global box: register it with \{ box \}/,
    )
    const same = await runLocal(line, { ranks: 3, argv, checkpoint: ft(dir, { resume: true }) })
    expect(same).toHaveLength(3)
  })

  it('a light value that differs between ranks is refused by name without a merge rule', async () => {
    const argv = ['--tally', 'plain']
    const dir = freshDir()
    await expect(runLocal(line, { ranks: 3, argv: [...argv, '--n', '16'], checkpoint: { ...ft(dir), interrupt: { skeleton: 0, step: 2 } } })).rejects.toThrow(/interrupted/)
    await expect(runLocal(line, { ranks: 2, argv: [...argv, '--n', '16'], checkpoint: ft(dir, { resume: true }) })).rejects.toThrow(
      /light value "tally" \(skeleton 0\) differs between the old ranks; give it a merge rule/,
    )
  })
})
