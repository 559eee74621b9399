/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium } from 'playwright-core'
import { afterAll, describe, expect, it } from 'vitest'
import { htmlReport } from '../../src/bench/report-html.js'
import { textReport } from '../../src/bench/report-text.js'
import type { BenchReport, RunFigures } from '../../src/bench/runner.js'
import { summarize } from '../../src/bench/summarize.js'

// Debian's chromium (npm test's pretest installs it as root); MOLOTOF_CHROMIUM names another binary.
const CHROMIUM = process.env.MOLOTOF_CHROMIUM ?? '/usr/bin/chromium'
// Without it the browser test is skipped, with the reason, as README says; the others still run.
const haveChromium = existsSync(CHROMIUM)
if (!haveChromium) console.log(`HTML report test in a browser skipped: ${CHROMIUM} is missing (apt-get install chromium; npm test installs it as root)`)
const dir = mkdtempSync(join(tmpdir(), 'molotof-html-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const run = (runtimeMs: number, ckpts: number, bytes: number, sys?: number): RunFigures => ({
  runtimeMs,
  checkpoints: Array.from({ length: ckpts }, () => ({ bytes, totalBytes: 2 * bytes, ms: 20 })),
  privateBytes: [sys, sys],
})

/** A report with known figures (the runner is exercised by the CLI test). */
const report: BenchReport = {
  program: 'examples/jacobi/jacobi.ts',
  argv: ['--n', '64'],
  ranks: 2,
  transport: 'processes',
  steps: 100,
  async: false,
  date: '2026-11-21T00:00:00.000Z',
  machine: { cpus: 2, model: 'test cpu', memoryGiB: 24, node: 'v20' },
  notes: [],
  configs: [
    { contents: 'none', requested: 0, every: undefined, runs: [run(1000, 0, 0), run(1010, 0, 0)] },
    { contents: 'default', requested: 2, every: 34, runs: [run(1040, 2, 2_000_000, 9_000_000), run(1050, 2, 2_000_000, 9_000_000)] },
    { contents: 'default', requested: 5, every: 17, runs: [run(1100, 5, 2_000_000, 9_000_000), run(1110, 5, 2_000_000, 9_000_000)] },
    { contents: 'minimal', requested: 2, every: 34, runs: [run(1020, 2, 1_000_000, 8_000_000), run(1025, 2, 1_000_000, 8_000_000)] },
    { contents: 'minimal', requested: 5, every: 17, runs: [run(1060, 5, 1_000_000, 8_000_000), run(1070, 5, 1_000_000, 8_000_000)] },
  ],
  recovery: [
    {
      failedStep: 50,
      lineStep: 33,
      detectionMs: 2,
      spawnMs: 300,
      negotiateMs: 4,
      loadMs: 6,
      replayMs: 0.1,
      restoreMs: 3,
      stopMs: 5,
      firstStepMs: 10,
      toFirstStepMs: 330,
      lostSteps: 16,
      lostMs: 160,
      runtimeMs: 1500,
      sameResult: true,
    },
    {
      spares: 1,
      failedStep: 50,
      lineStep: 33,
      detectionMs: 2,
      spawnMs: 30,
      negotiateMs: 4,
      loadMs: 6,
      replayMs: 0.1,
      restoreMs: 3,
      stopMs: 5,
      firstStepMs: 10,
      toFirstStepMs: 60,
      lostSteps: 16,
      lostMs: 160,
      runtimeMs: 1200,
      sameResult: true,
    },
  ],
}

describe('bench reports', () => {
  it('summarizes: overhead against no fault tolerance, sizes, ratios', () => {
    const s = summarize(report)
    const min2 = s.configs.find((c) => c.contents === 'minimal' && c.requested === 2)!
    expect(min2.overheadPct).toBeCloseTo((1022.5 / 1005 - 1) * 100, 10)
    expect(min2.bytesPerRank).toBe(1_000_000)
    expect(min2.systemBytesPerRank).toBe(8_000_000)
    expect(textReport(report, s)).toMatch(/minimal\/default 0\.500.*minimal\/system 0\.125/)
  })

  it('prints no overhead within the noise of the runs without fault tolerance as a figure', () => {
    // The runs without fault tolerance spread over 30 ms; minimal at 2 checkpoints is 7.5 ms slower, at 5 checkpoints 55 ms.
    const r: BenchReport = { ...report, configs: report.configs.map((c) => (c.contents === 'none' ? { ...c, runs: [run(990, 0, 0), run(1020, 0, 0)] } : c)) }
    const s = summarize(r)
    expect(s.noiseMs).toBe(30)
    const text = textReport(r, s)
    const row = (contents: string, count: number) => text.split('\n').find((l) => new RegExp(`^${contents} +${count} `).test(l))!
    expect(row('minimal', 2)).toContain('below noise')
    expect(row('minimal', 2)).not.toContain(` ${((1022.5 / 1005 - 1) * 100).toFixed(1)} `) // 1.7, printed as a figure before
    expect(row('minimal', 5)).toContain(((1065 / 1005 - 1) * 100).toFixed(1))
    expect(text).toMatch(/Noise: the runs without fault tolerance spread over 30 ms/)
    // A checkpoint cost whose total at the largest count stays within the noise is no figure either.
    const flat: BenchReport = {
      ...r,
      configs: [r.configs[0], ...[2, 5].flatMap((k) => (['default', 'minimal'] as const).map((contents) => ({ contents, requested: k, every: 10, runs: [run(1005 + k, k, 1000)] })))],
    }
    const fs = summarize(flat)
    expect(fs.derived.map((d) => d.belowNoise)).toEqual([true, true])
    expect(textReport(flat, fs)).toMatch(/^default +below noise +- +[\d.]+ s +-$/m)
  })

  it('derives the cost of one checkpoint from every count, not from one noisy configuration', () => {
    // 12 ms per checkpoint exactly, except that the 10-checkpoint run caught 60 ms of noise.
    const linear = (contents: 'default' | 'minimal', count: number, extra = 0) =>
      ({ contents, requested: count, every: 10, runs: [run(1000 + 12 * count + extra, count, 1000)] }) as BenchReport['configs'][number]
    const r: BenchReport = {
      ...report,
      configs: [report.configs[0], ...[2, 5, 10, 20].map((k) => linear('minimal', k, k === 20 ? 60 : 0)), ...[2, 5].map((k) => linear('default', k))],
    }
    r.configs[0] = { ...r.configs[0], runs: [run(1000, 0, 0)] }
    const d = Object.fromEntries(summarize(r).derived.map((x) => [x.contents, x]))
    expect(d.default.costMs).toBeCloseTo(12, 9)
    expect(d.default.every2sPct).toBeCloseTo(0.6, 9)
    // The last point alone (or a least-squares fit, which it dominates) would say 15 ms.
    expect(d.minimal.costMs).toBeCloseTo(12, 9)
  })

  it.skipIf(!haveChromium)('renders its three charts with data in a real headless Chromium', async () => {
    const s = summarize(report)
    const file = join(dir, 'report.html')
    writeFileSync(file, htmlReport(report, s, textReport(report, s)))
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    })
    try {
      const page = await browser.newPage({ viewport: { width: 1200, height: 1600 } })
      const errors: string[] = []
      page.on('pageerror', (e) => errors.push(e.message))
      await page.goto(`file://${file}`)
      await page.waitForFunction(() => (window as unknown as { __molotofCharts?: unknown }).__molotofCharts !== undefined, null, { timeout: 10_000 })
      const charts = await page.evaluate(() => (window as unknown as { __molotofCharts: { id: string; points: number }[] }).__molotofCharts)
      expect(errors).toEqual([])
      expect(charts.map((c) => c.id)).toEqual(['sizes', 'runtime', 'recovery'])
      // The recovery chart has a bar per row of the recovery table (cold restart, one warm spare), 8 phases each.
      expect(charts.map((c) => c.points)).toEqual([3, 12, 16])
      expect(await page.evaluate(() => (window as unknown as { __molotofCharts: { labels: string[] }[] }).__molotofCharts[2].labels)).toEqual([
        'all spawned (no spares)',
        '1 warm spare(s), survivors kept',
      ])
      // Something was actually drawn: each canvas has many non-blank pixels.
      const inked = await page.evaluate(() =>
        [...document.querySelectorAll('canvas')].map((c) => {
          const d = (c as HTMLCanvasElement).getContext('2d')!.getImageData(0, 0, c.width, c.height).data
          let n = 0
          for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++
          return n
        }),
      )
      for (const n of inked) expect(n).toBeGreaterThan(2000)
      await page.screenshot({ path: join(dir, 'report.png'), fullPage: true })
    } finally {
      await browser.close()
    }
  })
})
