import { mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { CheckpointStore } from '../../../src/checkpoint/store/checkpoint-store.js'
import { runLocal, type FaultToleranceConfig } from '../../../src/index.js'
import jacobi, { type JacobiResult } from '../../../examples/jacobi/jacobi.js'
import twoPhase from '../../fixtures/two-phase.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
function freshDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'molotof-resume-'))
  dirs.push(d)
  return d
}

function ft(dir: string, extra: Partial<FaultToleranceConfig> = {}): FaultToleranceConfig {
  return { dir, policy: { every: 1 }, keep: 2, resume: false, ...extra }
}

const bits = (xs: ArrayLike<number>) => Array.from(new BigUint64Array(Float64Array.from(xs).buffer))
function grid(rs: JacobiResult[]): bigint[] {
  return rs.flatMap((r) => bits(r.rows!.values))
}

describe('recovery by replay: Jacobi', () => {
  const n = 9
  const iterations = 8
  const argv = (minimal: boolean) => ['--n', String(n), '--iterations', String(iterations), '--return-rows', minimal ? '--minimal' : '--no-minimal']

  it.each([1, 2, 3, 4])('stopped after every step k and resumed gives the bit-identical grid on %i rank(s)', async (ranks) => {
    const reference = grid(await runLocal(jacobi, { ranks, argv: argv(true) }))
    for (const minimal of [true, false]) {
      for (const every of [1, 3]) {
        for (let k = 0; k < iterations; k++) {
          const dir = freshDir()
          const cfg = ft(dir, { policy: { every } })
          await expect(runLocal(jacobi, { ranks, argv: argv(minimal), checkpoint: { ...cfg, interrupt: { skeleton: 0, step: k } } })).rejects.toThrow(
            /interrupted/,
          )
          const logs: string[] = []
          const resumed = await runLocal(jacobi, { ranks, argv: argv(minimal), checkpoint: { ...cfg, resume: true }, onLog: (_r, t) => logs.push(t) })
          expect(grid(resumed), `ranks=${ranks} minimal=${minimal} every=${every} k=${k}`).toEqual(reference)
          const lastCheckpoint = Math.floor((k + 1) / every) * every - 1
          if (lastCheckpoint >= 0) expect(logs.join('\n')).toMatch(new RegExp(`resuming from checkpoint \\d+ \\(skeleton 0, step ${lastCheckpoint}\\)`))
          else expect(logs.join('\n')).toMatch(/no valid checkpoint .* starting from the beginning/)
        }
      }
    }
  })

  it.each([2, 3])('background checkpoints under a step policy: stopped after every step k and resumed gives the bit-identical grid on %i ranks', async (ranks) => {
    const reference = grid(await runLocal(jacobi, { ranks, argv: argv(true) }))
    for (const every of [1, 3]) {
      for (let k = 0; k < iterations; k++) {
        const dir = freshDir()
        const cfg = ft(dir, { policy: { every }, async: true })
        await expect(runLocal(jacobi, { ranks, argv: argv(true), checkpoint: { ...cfg, interrupt: { skeleton: 0, step: k } } })).rejects.toThrow(/interrupted/)
        const logs: string[] = []
        const resumed = await runLocal(jacobi, { ranks, argv: argv(true), checkpoint: { ...cfg, resume: true }, onLog: (_r, t) => logs.push(t) })
        expect(grid(resumed), `ranks=${ranks} every=${every} k=${k}`).toEqual(reference)
        // The interruption commits the checkpoint still in flight: the line is the last checkpoint point, as without background writes.
        const lastCheckpoint = Math.floor((k + 1) / every) * every - 1
        if (lastCheckpoint >= 0) expect(logs.join('\n')).toMatch(new RegExp(`resuming from checkpoint \\d+ \\(skeleton 0, step ${lastCheckpoint}\\)`))
        else expect(logs.join('\n')).toMatch(/no valid checkpoint .* starting from the beginning/)
      }
    }
  })

  it('background checkpoints under a step policy are all committed and verify', async () => {
    const dir = freshDir()
    await runLocal(jacobi, { ranks: 2, argv: ['--n', '256', '--iterations', '40'], checkpoint: ft(dir, { policy: { every: 4 }, async: true, keep: 100 }) })
    const store = new CheckpointStore(dir)
    const all = await store.list()
    expect(all.map((c) => [c.complete, c.marker?.step])).toEqual([3, 7, 11, 15, 19, 23, 27, 31, 35, 39].map((s) => [true, s]))
    for (const c of all) expect((await store.validate(c.seq, 2, { checksums: true })).ok).toBe(true)
  })

  it('a minimal checkpoint is about half the default one', async () => {
    const sizes: number[] = []
    for (const minimal of [true, false]) {
      const dir = freshDir()
      await runLocal(jacobi, { ranks: 2, argv: ['--n', '64', '--iterations', '2', minimal ? '--minimal' : '--no-minimal'], checkpoint: ft(dir) })
      const newest = readdirSync(dir).filter((f) => f.startsWith('ckpt-')).sort().pop()!
      sizes.push(readFileSync(join(dir, newest, 'rank-0.mlf')).byteLength)
    }
    const possessedBytes = 32 * 64 * 8
    expect(sizes[0]).toBeGreaterThanOrEqual(possessedBytes)
    expect(sizes[0]).toBeLessThanOrEqual(possessedBytes + 4096)
    expect(sizes[1] / sizes[0]).toBeGreaterThan(1.9)
    expect(sizes[1] / sizes[0]).toBeLessThan(2.05)
  })
})

describe('recovery by replay: two skeletons in sequence', () => {
  const argv = ['--n', '23', '--steps-a', '6', '--steps-b', '7']
  it.each([
    [0, 0],
    [0, 3],
    [0, 5],
    [1, 0],
    [1, 4],
    [1, 6],
  ])('interrupted in skeleton %i at step %i and resumed gives the same result', async (skeleton, step) => {
    for (const ranks of [1, 3]) {
      const reference = await runLocal(twoPhase, { ranks, argv })
      const dir = freshDir()
      await expect(runLocal(twoPhase, { ranks, argv, checkpoint: { ...ft(dir), interrupt: { skeleton, step } } })).rejects.toThrow(/interrupted/)
      const resumed = await runLocal(twoPhase, { ranks, argv, checkpoint: ft(dir, { resume: true }) })
      expect(resumed.map((r) => bits(r.values))).toEqual(reference.map((r) => bits(r.values)))
      expect(Object.is(resumed[0].massA, reference[0].massA)).toBe(true)
    }
  })
})

describe('recovery by replay: damaged checkpoints', () => {
  const argv = ['--n', '12', '--iterations', '9', '--return-rows']
  async function interruptedRun(): Promise<{ dir: string; newest: string; previous: string }> {
    const dir = freshDir()
    await expect(
      runLocal(jacobi, { ranks: 3, argv, checkpoint: { ...ft(dir, { policy: { every: 2 }, keep: 3 }), interrupt: { skeleton: 0, step: 6 } } }),
    ).rejects.toThrow(/interrupted/)
    const ck = readdirSync(dir).filter((f) => f.startsWith('ckpt-')).sort()
    return { dir, newest: join(dir, ck[ck.length - 1]), previous: join(dir, ck[ck.length - 2]) }
  }
  const damages: Array<[string, (ckpt: string) => void, RegExp]> = [
    [
      'a flipped payload byte',
      (c) => {
        const f = join(c, 'rank-1.mlf')
        const b = readFileSync(f)
        b[b.length - 20] ^= 0x40
        writeFileSync(f, b)
      },
      /rank-1\.mlf.*checksum/i,
    ],
    ['a truncated rank file', (c) => truncateSync(join(c, 'rank-2.mlf'), 300), /rank-2\.mlf/],
    ['a deleted rank file', (c) => unlinkSync(join(c, 'rank-0.mlf')), /rank-0\.mlf/],
    // A deleted marker of the newest checkpoint is an uncommitted checkpoint instead (test/cli/uncommitted.test.ts).
    [
      'a damaged commit marker',
      (c) => {
        const f = join(c, 'COMMIT')
        const b = readFileSync(f)
        b[30] ^= 0x40
        writeFileSync(f, b)
      },
      /COMMIT/,
    ],
  ]
  it.each(damages)('%s: the previous complete checkpoint is used, with a warning naming the file', async (_what, damage, warning) => {
    const reference = grid(await runLocal(jacobi, { ranks: 3, argv }))
    const { dir, newest } = await interruptedRun()
    damage(newest)
    const logs: string[] = []
    const resumed = await runLocal(jacobi, { ranks: 3, argv, checkpoint: ft(dir, { resume: true }), onLog: (_r, t) => logs.push(t) })
    const text = logs.join('\n')
    expect(text).toMatch(warning)
    expect(text).toMatch(/resuming from checkpoint \d+ \(skeleton 0, step 3\)/)
    expect(grid(resumed)).toEqual(reference)
  })
})

describe('resume refusals', () => {
  it('refuses other settings, listing each difference (another rank count alone is an elastic restart, not a difference)', async () => {
    const dir = freshDir()
    await runLocal(jacobi, { ranks: 2, argv: ['--n', '10', '--iterations', '3'], checkpoint: ft(dir) })
    const refused = runLocal(jacobi, { ranks: 3, argv: ['--n', '11', '--iterations', '4'], checkpoint: ft(dir, { resume: true }) })
    await expect(refused).rejects.toThrow(/n: 10 → 11[\s\S]*iterations: 3 → 4/)
    await expect(refused).rejects.not.toThrow(/ranks:/)
  })

  it('refuses a checkpoint directory of another program', async () => {
    const dir = freshDir()
    await runLocal(jacobi, { ranks: 1, argv: ['--n', '5', '--iterations', '2'], checkpoint: ft(dir) })
    await expect(runLocal(twoPhase, { ranks: 1, checkpoint: ft(dir) })).rejects.toThrow(/jacobi|another program|fingerprint/i)
  })

  it('catches a non-deterministic iterator and a non-deterministic watched value', async () => {
    for (const [flag, what] of [
      ['--random-salt', /iterator.*salt/],
      ['--random-watch', /watched value "table"/],
    ] as const) {
      const dir = freshDir()
      await expect(
        runLocal(twoPhase, { ranks: 2, argv: [flag], checkpoint: { ...ft(dir), interrupt: { skeleton: 0, step: 3 } } }),
      ).rejects.toThrow(/interrupted/)
      await expect(runLocal(twoPhase, { ranks: 2, argv: [flag], checkpoint: ft(dir, { resume: true }) })).rejects.toThrow(what)
    }
  })
})
