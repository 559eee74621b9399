import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import type { BenchRecord } from '../../bench/record.js'
import {
  HEADLINES_BEGIN,
  HEADLINES_END,
  formatValue,
  newestPerBench,
  publishedRecords,
  renderHeadlines,
  renderResults,
  RESULTS_FILE,
  withHeadlines,
} from '../../bench/results.js'

const machine = { cores: 2, cpu: 'Test CPU', node: 'v20.0.0', platform: 'linux x64', memoryGiB: 24, freeGiB: 20, loadAverage: [0.5, 0.4, 0.3] }

function record(over: Partial<BenchRecord>): BenchRecord {
  return {
    bench: 'levels',
    title: 'Checkpoint levels',
    command: 'npx tsx bench/levels.ts --repeats 3',
    date: '2026-11-26T10:00:00.000Z',
    commit: '0123456789abcdef0123456789abcdef01234567',
    dirty: false,
    machine,
    figures: [],
    transcript: '',
    ...over,
  }
}

describe('results rendering', () => {
  it('writes values with three significant digits and no exponent for everyday sizes', () => {
    expect(formatValue(2.5649)).toBe('2.56')
    expect(formatValue(0.0123)).toBe('0.0123')
    expect(formatValue(12345.6)).toBe('12346')
    expect(formatValue(0)).toBe('0')
    expect(formatValue(0.0004)).toBe('4.00e-4')
  })

  it('renders every figure with its median, spread, count, unit and target', () => {
    const md = renderResults([
      record({
        figures: [{ name: 'stall at a memory checkpoint', unit: 'ms', median: 2.5, min: 2, max: 3, n: 48, target: 'copy + 1 ms' }],
        transcript: 'plain copy 1.7 ms\n',
      }),
    ])
    expect(md).toContain('| stall at a memory checkpoint | 2.5 | 2–3 | 48 | ms | copy + 1 ms |')
    expect(md).toContain('`npx tsx bench/levels.ts --repeats 3`')
    expect(md).toContain('2026-11-26 10:00 UTC, commit 0123456; 2 cores (Test CPU), 24 GiB, Node v20.0.0, load average 0.5 / 0.4 / 0.3')
    expect(md).toContain('```\nplain copy 1.7 ms\n```')
  })

  it('says when a record was measured on uncommitted changes', () => {
    expect(renderResults([record({ dirty: true })])).toContain('commit 0123456 (with uncommitted changes)')
  })

  it('keeps the newest record of each benchmark', () => {
    const old = record({ date: '2026-11-01T00:00:00.000Z', title: 'old' })
    const mid = record({ date: '2026-11-20T00:00:00.000Z', title: 'new' })
    const other = record({ bench: 'elastic', title: 'elastic' })
    expect(newestPerBench([mid, other, old]).map((r) => r.title)).toEqual(['elastic', 'new'])
  })

  it('lists only headline figures in README, linked to their record', () => {
    const table = renderHeadlines([
      record({
        figures: [
          { name: 'a', unit: 'ms', median: 80, min: 70, max: 100, n: 5, headline: 'recovery on warm spares', target: '< 100 ms' },
          { name: 'b', unit: 'ms', median: 1, min: 1, max: 1, n: 1 },
        ],
      }),
    ])
    const rows = table.split('\n').slice(2)
    expect(rows).toEqual(['| recovery on warm spares | 80 ms (70–100) | < 100 ms | `npx tsx bench/levels.ts --repeats 3` | [2026-11-26](docs/RESULTS.md#levels) |'])
  })

  it('replaces only the block between the markers', () => {
    const readme = `before\n${HEADLINES_BEGIN}\nold table\n${HEADLINES_END}\nafter\n`
    expect(withHeadlines(readme, 'new table')).toBe(`before\n${HEADLINES_BEGIN}\nnew table\n${HEADLINES_END}\nafter\n`)
    expect(() => withHeadlines('no markers', 'x')).toThrow(/no <!-- results:headlines/)
  })
})

describe('published results', () => {
  const records = publishedRecords()

  it('exist, each naming its command, commit and machine', () => {
    expect(records.length).toBeGreaterThan(0)
    for (const r of records) {
      expect(r.command).toMatch(/^npx tsx bench\//)
      expect(r.commit).toMatch(/^[0-9a-f]{40}$/)
      expect(r.machine.cores).toBeGreaterThan(0)
      expect(r.figures.length).toBeGreaterThan(0)
      for (const f of r.figures) expect(f.min <= f.median && f.median <= f.max).toBe(true)
    }
  })

  it('are what docs/RESULTS.md and README.md show (rendered, not edited by hand)', () => {
    expect(readFileSync(RESULTS_FILE, 'utf8')).toBe(renderResults(records))
    const readme = readFileSync('README.md', 'utf8')
    expect(withHeadlines(readme, renderHeadlines(records))).toBe(readme)
  })
})
