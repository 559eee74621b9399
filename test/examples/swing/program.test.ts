import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { launch, runLocal } from '../../../src/index.js'
import swing, { type SwingResult } from '../../../examples/swing/swing.js'
import { resolveParams } from '../../../examples/swing/model/params.js'
import { valueSwing } from '../../../examples/swing/model/serial.js'

const run = async (ranks: number, argv: string[]) => (await runLocal(swing, { ranks, argv }))[0]

describe('examples/swing on the framework', () => {
  it.each(['stopt-tree', 'stopt-tree-grid', 'daily-g', 'daily-nig', 'small-g', 'weekly-g2d'])(
    '%s: 1, 2, 3 and 4 ranks, full grid and window, all bit-identical to the serial valuation',
    async (preset) => {
      const serial = valueSwing(resolveParams(preset)).value
      // The NIG lattice takes most of a second to build on each rank: fewer rank counts there.
      for (const ranks of preset === 'daily-nig' ? [1, 3] : [1, 2, 3, 4]) {
        for (const window of ['--window', '--no-window']) {
          const r = await run(ranks, ['--preset', preset, window])
          expect(Object.is(r.value, serial), `${preset} ranks=${ranks} ${window}: ${r.value} vs ${serial}`).toBe(true)
          expect(r.value).toBeGreaterThanOrEqual(r.intrinsic)
        }
      }
    },
  )

  it('--drift lattice: 1, 2, 3 and 4 ranks, full grid and window, bit-identical to the serial valuation (small-g)', async () => {
    const serial = valueSwing(resolveParams('small-g', { drift: 'lattice' })).value
    expect(Object.is(serial, valueSwing(resolveParams('small-g')).value)).toBe(false) // the option has an effect
    for (const ranks of [1, 2, 3, 4]) {
      for (const window of ['--window', '--no-window']) {
        const r = await run(ranks, ['--preset', 'small-g', '--drift', 'lattice', window])
        expect(r.params.drift).toBe('lattice')
        expect(Object.is(r.value, serial), `ranks=${ranks} ${window}: ${r.value} vs ${serial}`).toBe(true)
        expect(r.value).toBeGreaterThanOrEqual(r.intrinsic)
      }
    }
  })

  it('--drift is a setting: a resume with another drift is refused', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'molotof-swing-'))
    try {
      const cfg = { dir, policy: { every: 5 }, keep: 2, resume: false }
      const argv = ['--preset', 'small-g']
      await expect(runLocal(swing, { ranks: 2, argv, checkpoint: { ...cfg, interrupt: { skeleton: 0, step: 12 } } })).rejects.toThrow(/interrupted/)
      await expect(
        runLocal(swing, { ranks: 2, argv: [...argv, '--drift', 'lattice'], checkpoint: { ...cfg, resume: true } }),
      ).rejects.toThrow(/drift/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('overrides parameters from the command line and rejects bad ones naming the parameter', async () => {
    const r = await run(2, ['--preset', 'small-g', '--n-grid', '40', '--vmax', '40'])
    expect(r.params.nGrid).toBe(40)
    expect(Object.is(r.value, valueSwing(resolveParams('small-g', { nGrid: 40, vmax: 40 })).value)).toBe(true)
    await expect(run(1, ['--preset', 'nope'])).rejects.toThrow(/--preset must be one of .*stopt-tree/)
    await expect(run(1, ['--preset', 'small-g', '--v0', '3.5'])).rejects.toThrow(/v0/)
    await expect(run(1, ['--preset', 'small-g', '--vmin', '30'])).rejects.toThrow(/vmin/)
    await expect(run(1, ['--preset', 'small-g', '--inj-rate', '-1'])).rejects.toThrow(/--inj-rate must be a number ≥ 0, got -1/)
    await expect(run(1, ['--preset', 'daily-nig', '--nig-beta', '20'])).rejects.toThrow(/nigBeta|nigAlpha/)
    await expect(run(1, ['--preset', 'daily-g', '--n-grid', '10'])).rejects.toThrow(/grid|coarse/i)
    await expect(run(1, ['--preset', 'small-g', '--n-gird', '10'])).rejects.toThrow(/unknown option --n-gird.*--n-grid/)
    await expect(run(1, ['--preset', 'small-g', '--sigma', 'abc'])).rejects.toThrow(/sigma.*not a number/)
    await expect(run(1, ['--preset', 'small-g', '--drift', 'foo'])).rejects.toThrow(/--drift must be one of ou, lattice; got "foo"/)
    await expect(run(1, ['--preset', 'daily-nig', '--drift', 'ou'])).rejects.toThrow(/"drift": model nig always computes c_k/)
  })

  it('interrupted at an arbitrary date and resumed gives the bit-identical value (2 and 3 ranks)', async () => {
    const argv = ['--preset', 'daily-g']
    const reference = (await runLocal(swing, { ranks: 3, argv }))[0].value
    for (const [ranks, step] of [
      [2, 0],
      [2, 100],
      [3, 250],
      [3, 363],
    ]) {
      const dir = mkdtempSync(join(tmpdir(), 'molotof-swing-'))
      try {
        const cfg = { dir, policy: { every: 7 }, keep: 2, resume: false }
        await expect(runLocal(swing, { ranks, argv, checkpoint: { ...cfg, interrupt: { skeleton: 0, step } } })).rejects.toThrow(/interrupted/)
        const resumed = (await runLocal<SwingResult>(swing, { ranks, argv, checkpoint: { ...cfg, resume: true } }))[0]
        expect(Object.is(resumed.value, reference), `ranks=${ranks} step=${step}`).toBe(true)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }
  })

  it('runs on worker threads with the same value, and reports the value it computed', async () => {
    const r = await launch<SwingResult>('examples/swing/swing.ts', { ranks: 2, argv: ['--preset', 'stopt-tree'], onLog: () => {} })
    const serial = valueSwing(resolveParams('stopt-tree'))
    expect(Object.is(r.value.value, serial.value)).toBe(true)
    expect(Object.is(r.value.intrinsic, serial.intrinsic)).toBe(true)
    expect(r.value.value).toBeGreaterThan(r.value.intrinsic)
    // The report prints the result's own figures (15 significant digits), not a stored number.
    expect(r.text).toContain(`value      ${r.value.value.toPrecision(15)}`)
    expect(r.text).toContain(`intrinsic  ${r.value.intrinsic.toPrecision(15)}`)
  })

  it('closed-form bounds through the framework: a full storage on a flat curve is worth at least selling it all at once', async () => {
    // stopt-tree-flat with prohibitive injection and a withdrawal rate that empties the
    // storage at once: the flat forward curve gives an intrinsic value of 90000·(50 − 0.35),
    // and the tree value is at least that (selling everything at date 0 is a policy whose
    // cash does not depend on the price path: S_0 = F_0 = 50 at the root).
    const argv = ['--preset', 'stopt-tree-flat', '--wd-rate', '90000', '--c-inj', '1000000']
    for (const ranks of [1, 3]) {
      const r = await run(ranks, argv)
      expect([r.params.wdRate, r.params.cInj]).toEqual([90000, 1000000])
      expect(r.intrinsic).toBe(90000 * (50 - 0.35))
      expect(r.value).toBeGreaterThanOrEqual(90000 * (50 - 0.35))
    }
  })
})
