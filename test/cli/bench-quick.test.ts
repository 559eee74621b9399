import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import type { BenchReport } from '../../src/bench/runner.js'
import type { BenchSummary } from '../../src/bench/summarize.js'
import { main } from '../../src/cli/main.js'

const out = mkdtempSync(join(tmpdir(), 'molotof-bench-quick-'))
afterAll(() => rmSync(out, { recursive: true, force: true }))

describe('molotof bench --quick', () => {
  it('produces the reports with sane numbers (processes transport, small Jacobi)', async () => {
    const lines: string[] = []
    const code = await main(
      ['bench', 'examples/jacobi/jacobi.ts', '--quick', '--ranks', '2', '--out', out, '--n', '96', '--iterations', '60'],
      (s) => lines.push(s),
      () => {},
    )
    expect(code).toBe(0)
    expect(existsSync(join(out, 'bench-report.html'))).toBe(true)
    const { report, summary } = JSON.parse(readFileSync(join(out, 'bench-report.json'), 'utf8')) as { report: BenchReport; summary: BenchSummary }
    expect(report.steps).toBe(60)
    const ft = summary.configs.filter((c) => c.contents !== 'none')
    for (const c of ft) {
      expect(c.bytesPerRank!).toBeGreaterThan(0)
      expect(Number.isFinite(c.overheadPct)).toBe(true)
      expect(c.systemBytesPerRank!).toBeGreaterThan(c.bytesPerRank!)
    }
    for (const k of [2, 5]) {
      const d = ft.find((c) => c.contents === 'default' && c.requested === k)!
      const m = ft.find((c) => c.contents === 'minimal' && c.requested === k)!
      expect(m.bytesPerRank!).toBeLessThan(d.bytesPerRank!)
      expect(m.placed).toBe(k)
    }
    expect(summary.recovery.allSame).toBe(true)
    expect(summary.recovery.median!.lostSteps).toBeGreaterThanOrEqual(0)
    expect(lines.join('\n')).toMatch(/Checkpoint size per rank: minimal .* default .* system-level/)
    // One repeat, and a second run without fault tolerance for the noise: overheads within it are no figures.
    expect(report.configs[0].runs).toHaveLength(2)
    expect(Number.isFinite(summary.noiseMs)).toBe(true)
    expect(lines.join('\n')).toMatch(/Noise: the runs without fault tolerance spread over [\d.]+ ms/)
  })

  it('refuses an output directory it cannot write, and too many checkpoints are placed as they fit', async () => {
    const errs: string[] = []
    // A path below a regular file cannot be created, even by root.
    const blocked = join(out, 'bench-report.json', 'sub')
    const code = await main(['bench', 'examples/jacobi/jacobi.ts', '--quick', '--out', blocked], () => {}, (s) => errs.push(s))
    expect(code).toBe(2)
    expect(errs.join('\n')).toMatch(/cannot write the report to .*bench-report\.json\/sub/)
    const lines: string[] = []
    expect(
      await main(
        ['bench', 'examples/jacobi/jacobi.ts', '--transport', 'threads', '--repeats', '1', '--counts', '40', '--no-failure', '--out', out, '--n', '16', '--iterations', '10'],
        (s) => lines.push(s),
        () => {},
      ),
    ).toBe(0)
    expect(lines.join('\n')).toMatch(/10 supersteps: 40 checkpoints per run do not fit, 10 were placed/)
  })
})
