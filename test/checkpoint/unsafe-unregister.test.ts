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
import { ConfigError, launch, ReplayDivergenceError, runLocal, Supervisor, type FaultToleranceConfig } from '../../src/index.js'
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

describe("unregister('read') needs something that refills the domain after a recovery", () => {
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
