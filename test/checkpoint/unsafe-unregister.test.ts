// A skeleton that leaves the domain the next step reads out of its checkpoints
// (`unregister('read')`) is correct without failures and silently wrong after a
// recovery unless something refills that domain: refused at start without a
// `rebuild` (or an explicit declaration), and a refill that differs from the
// failure-free run is caught after the recovery (the checkpoint's digest).
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { main } from '../../src/cli/main.js'
import { CheckpointStore } from '../../src/checkpoint/store/checkpoint-store.js'
import {
  ConfigError,
  CountedKernel,
  defineProgram,
  Domain,
  Domain2D,
  DomainDesc,
  launch,
  option,
  ReplayDivergenceError,
  runLocal,
  splitPoint,
  Supervisor,
  type FaultToleranceConfig,
  type RebuildContext,
} from '../../src/index.js'
import program, { aAt, bAt, type RefillResult } from '../fixtures/circulation-refill.js'

const FILE = 'test/fixtures/circulation-refill.ts'
const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
const freshDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'molotof-refill-'))
  dirs.push(d)
  return d
}
const ft = (dir: string): FaultToleranceConfig => ({ dir, policy: { every: 2 }, keep: 2, resume: false })
const quiet = { onLog: () => {} }

/** rounds · A·(B + B shifted up one row), by plain loops over the formulas. */
function serial(n: number, rounds: number): number[] {
  const c = new Array<number>(n * n).fill(0)
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < n; i++) {
      for (let k = 0; k < n; k++) {
        for (let j = 0; j < n; j++) c[i * n + j] += aAt(i, k) * (bAt(k, j) + (k + 1 < n ? bAt(k + 1, j) : 0))
      }
    }
  }
  return c
}

/** C assembled from the ranks' rows. */
const assemble = (rs: readonly RefillResult[]): number[] => [...rs].sort((a, b) => a.first - b.first).flatMap((r) => r.c)

/** A supervised run of the fixture on 4 ranks (threads), rank 2 killed in step 5 (checkpoints at steps 1, 3, 5, …). */
function supervised(refill: string, kill = true) {
  return new Supervisor<RefillResult>(FILE, {
    ranks: 4,
    argv: ['--refill', refill],
    checkpoint: ft(freshDir()),
    inject: kill ? [{ rank: 2, skeleton: 0, step: 5, phase: 'calculate' }] : [],
    ...quiet,
  }).run()
}

const refusal = /the domain the next step reads is left out of checkpoints \(sk\.checkpoint\.unregister\('read'\)\) and nothing refills it.*give the kernel a rebuild\(read, write, ctx\)/s

/** Eight cells in strips; `initialize` marks each with its index. */
class Strip extends Domain<1> {
  constructor() {
    super(1)
  }
  possessed(rank: number, size: number): DomainDesc<1> {
    return DomainDesc.of([splitPoint(8, size, rank)], [splitPoint(8, size, rank + 1)])
  }
  needed(rank: number, size: number): DomainDesc<1> {
    return this.possessed(rank, size)
  }
}

/** Its state is a registered sum; the domains only carry the partition (calculate never writes them). */
class Tally extends CountedKernel<Strip> {
  readonly sum = new Float64Array(1)
  override initialize(read: Strip, write: Strip): void {
    for (const d of [read, write]) for (const [i] of d.possessedBox.cells()) d.set([i], i)
  }
  calculate(read: Strip, _write: Strip, it: number): void {
    for (const [i] of read.possessedBox.cells()) this.sum[0] += (it + 1) * read.get([i])
  }
}

const tally = defineProgram({
  name: 'tally',
  options: { declare: option.boolean(false, "declare unregister('read', { rebuiltBy: 'initialize' })") },
  async main(ctx) {
    const k = new Tally(6)
    const sk = ctx.skeleton(k, [new Strip(), new Strip()])
    sk.checkpoint.register('sum', k.sum)
    sk.checkpoint.unregister('read', ctx.options.declare ? { rebuiltBy: 'initialize' } : {})
    sk.checkpoint.unregister('write')
    await sk.run()
    return k.sum[0]
  },
})

/** A 9 × 7 grid in blocks over a 2 × (size / 2) grid of ranks (one rank: the whole grid), one halo cell around each block. */
class Blocks extends Domain2D {
  possessed(rank: number, size: number): DomainDesc<2> {
    const px = size === 1 ? 1 : 2
    const a = rank % px
    const b = Math.floor(rank / px)
    return DomainDesc.of([splitPoint(9, px, a), splitPoint(7, size / px, b)], [splitPoint(9, px, a + 1), splitPoint(7, size / px, b + 1)])
  }
  needed(rank: number, size: number): DomainDesc<2> {
    const p = this.possessed(rank, size)
    return DomainDesc.of([Math.max(0, p.lower[0] - 1), Math.max(0, p.lower[1] - 1)], [Math.min(9, p.upper[0] + 1), Math.min(7, p.upper[1] + 1)])
  }
}

/** The grid read at step t is (t + 1)·(i + 2j): each step averages the four neighbours (equal to the centre on a linear field) and adds i + 2j. */
class Linear extends CountedKernel<Blocks> {
  override initialize(read: Blocks): void {
    for (const [i, j] of read.possessedBox.cells()) read.put(i, j, i + 2 * j)
  }
  calculate(read: Blocks, write: Blocks): void {
    for (const [i, j] of write.possessedBox.cells()) {
      const inside = i > 0 && j > 0 && i < 8 && j < 6
      const base = inside ? (read.at(i - 1, j) + read.at(i + 1, j) + read.at(i, j - 1) + read.at(i, j + 1)) / 4 : read.at(i, j)
      write.put(i, j, base + i + 2 * j)
    }
  }
  /** Possessed cells only: the halos are routed after it. */
  override rebuild(read: Blocks, _write: Blocks, ctx: RebuildContext<number>): void {
    if (!ctx.restored.read) for (const [i, j] of read.possessedBox.cells()) read.put(i, j, (ctx.step + 1) * (i + 2 * j))
  }
}

const linear = defineProgram({
  name: 'linear',
  options: {},
  async main(ctx) {
    const sk = ctx.skeleton(new Linear(8), [new Blocks(), new Blocks()])
    sk.checkpoint.unregister('read')
    sk.checkpoint.unregister('write')
    const grid = await sk.run()
    return Array.from(grid.possessed(ctx.rank, ctx.size).cells(), ([i, j]) => grid.at(i, j) - 9 * (i + 2 * j))
  },
})

describe("unregister('read') needs something that refills the domain after a recovery", () => {
  it('border: a rebuild that fills possessed cells only; the halos are routed after it (2 × 2 ranks, resumed after steps 2 and 5)', async () => {
    // After 8 steps the grid is 9·(i + 2j) everywhere: every difference 0.
    const zeros = (rs: number[][]) => rs.every((r) => r.every((d) => d === 0))
    expect(zeros(await runLocal(linear, { ranks: 4, checkpoint: ft(freshDir()) }))).toBe(true)
    for (const step of [2, 5]) {
      const dir = freshDir()
      await expect(runLocal(linear, { ranks: 4, checkpoint: { ...ft(dir), interrupt: { skeleton: 0, step } } })).rejects.toThrow(/interrupted/)
      expect(zeros(await runLocal(linear, { ranks: 4, checkpoint: { ...ft(dir), resume: true } })), `resumed after step ${step}`).toBe(true)
    }
  })

  it("the legitimate case — initialize's values are what every step reads — is accepted once declared, and right after a resume", async () => {
    await expect(runLocal(tally, { ranks: 2, checkpoint: ft(freshDir()) })).rejects.toThrow(refusal)
    // Rank r adds (it + 1) · Σ its cells' indices over 6 steps.
    const expected = [0 + 1 + 2 + 3, 4 + 5 + 6 + 7].map((cells) => cells * (1 + 2 + 3 + 4 + 5 + 6))
    expect(await runLocal(tally, { ranks: 2, argv: ['--declare'], checkpoint: ft(freshDir()) })).toEqual(expected)
    const dir = freshDir()
    const stop = { ...ft(dir), interrupt: { skeleton: 0, step: 3 } }
    await expect(runLocal(tally, { ranks: 2, argv: ['--declare'], checkpoint: stop })).rejects.toThrow(/interrupted/)
    const store = new CheckpointStore(dir)
    const [line] = (await store.list()).slice(-1)
    const file = await store.loadRankFile(line.seq, 1)
    // The checkpoint leaves the domain out and records the digest of its possessed cells instead.
    expect([...file.entries.keys()].sort()).toEqual(['iterator', 'sum'])
    expect(file.header.digests['crc32:read']).toMatch(/^[0-9a-f]{8}$/)
    expect(await runLocal(tally, { ranks: 2, argv: ['--declare'], checkpoint: { ...ft(dir), resume: true } })).toEqual(expected)
  })

  it('without a rebuild: refused at start with a ConfigError saying what to add (runLocal, launch), before any checkpoint', async () => {
    const dir = freshDir()
    const local = runLocal(program, { ranks: 4, argv: ['--refill', 'none'], checkpoint: ft(dir) })
    await expect(local).rejects.toThrowError(ConfigError)
    await expect(local).rejects.toThrow(refusal)
    await expect(local).rejects.toThrow(/unregister\('read', \{ rebuiltBy: 'initialize' \}\)/)
    expect(readdirSync(dir).filter((f) => f.startsWith('ckpt-'))).toEqual([])
    const launched = launch(FILE, { ranks: 4, argv: ['--refill', 'none'], checkpoint: ft(freshDir()), ...quiet })
    await expect(launched).rejects.toThrowError(ConfigError)
    await expect(launched).rejects.toThrow(refusal)
  })

  it('without a rebuild: molotof run exits 2 and prints what to add', async () => {
    const out: string[] = []
    const code = await main(['run', FILE, '--ranks', '4', '--refill', 'none', '--checkpoint', 'every:2', '--checkpoint-dir', freshDir(), '--quiet'], (s) => out.push(s), (s) => out.push(s))
    expect(code).toBe(2)
    expect(out.join('\n')).toMatch(refusal)
  })

  it('with a rebuild that fills the possessed rows: accepted, and C is the serial product after rank 2 is killed in step 5', async () => {
    const reference = serial(10, 2)
    const r = await supervised('rebuild')
    expect(r.kind).toBe('done')
    if (r.kind !== 'done') return
    expect(r.restarts).toBe(1)
    expect(assemble(r.values)).toEqual(reference)
  })

  it('a rebuild that refills other values than the failure-free run had: ReplayDivergenceError after the recovery, not a wrong C', async () => {
    const err = await supervised('wrong').catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ReplayDivergenceError)
    expect((err as Error).message).toMatch(/the domain step 4 reads \(left out of checkpoints by unregister\('read'\)\)/)
    expect((err as Error).message).toMatch(/rebuild\(read, write, ctx\) must refill read's possessed cells/)
  })

  it("rebuiltBy: 'initialize' declared for blocks that move: accepted and right without failures, caught after a recovery", async () => {
    const clean = await supervised('initialize', false)
    expect(clean.kind === 'done' && assemble(clean.values)).toEqual(serial(10, 2))
    await expect(supervised('initialize')).rejects.toThrowError(ReplayDivergenceError)
  })
})
