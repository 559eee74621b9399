/**
 * Swing, large preset: molotof on 1 and 2 ranks side by side (interleaved),
 * and the minimal checkpoint per rank next to the raw bytes of the rank's
 * possessed part of one domain.
 *
 *   npm run bench:swing -- [--preset large-g2d] [--repeats 3]
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { benchArgs } from './args.js'
import { openRecord } from './record.js'
import { readHeaderOnly } from '../src/checkpoint/format/rank-file.js'
import { launch } from '../src/index.js'
import type { SwingResult } from '../examples/swing/swing.js'
import { summary, table } from '../src/bench/stats.js'

const USAGE = 'npm run bench:swing -- [--preset large-g2d] [--repeats 3]'
const { values } = benchArgs(USAGE, () => parseArgs({ options: { preset: { type: 'string', default: 'large-g2d' }, repeats: { type: 'string', default: '3' } } }))
const preset = values.preset!
const repeats = Number(values.repeats)
const quiet = { onLog: () => {} }
const record = openRecord('swing', `Swing, preset ${preset}: 1 and 2 ranks`)

const runOnce = async (ranks: number) => {
  const r = await launch<SwingResult>('examples/swing/swing.ts', { ranks, argv: ['--preset', preset], ...quiet })
  return r.value
}

console.log(`Swing ${preset}: ${repeats} repeats (+1 warm-up), 1 and 2 ranks interleaved`)
const times: number[][] = [[], []]
let value = NaN
for (let rep = -1; rep < repeats; rep++) {
  for (const ranks of [1, 2]) {
    const r = await runOnce(ranks)
    if (rep >= 0) times[ranks - 1].push(r.dpSeconds)
    if (!Number.isNaN(value) && !Object.is(value, r.value)) throw new Error(`values differ: ${value} vs ${r.value}`)
    value = r.value
  }
  process.stderr.write(rep < 0 ? 'warm-up done\n' : `repeat ${rep + 1}/${repeats}\n`)
}
const s1 = summary(times[0])
const s2 = summary(times[1])
console.log(
  table(
    ['ranks', 'dp s min', 'median', 'max', 'speed-up (median)'],
    [
      ['1', s1.min.toFixed(2), s1.median.toFixed(2), s1.max.toFixed(2), '1.000'],
      ['2', s2.min.toFixed(2), s2.median.toFixed(2), s2.max.toFixed(2), (s1.median / s2.median).toFixed(3)],
    ],
  ),
)
console.log(`value ${value.toPrecision(15)} (identical on 1 and 2 ranks)`)
record.figure('dynamic programming, 1 rank', times[0], 's')
record.figure('dynamic programming, 2 ranks', times[1], 's')
record.figure('speed-up on 2 ranks (per repeat)', times[0].map((t, i) => t / times[1][i]), '×', { headline: `Swing ${preset}: speed-up on 2 ranks` })

// Minimal checkpoint on 2 ranks, taken at a few dates.
const dir = mkdtempSync(join(tmpdir(), 'molotof-bench-swing-'))
try {
  await launch('examples/swing/swing.ts', {
    ranks: 2,
    argv: ['--preset', preset],
    checkpoint: { dir, policy: { every: 40 }, keep: 10, resume: false },
    ...quiet,
  })
  const rows: string[][] = []
  for (const ck of readdirSync(dir).filter((f) => f.startsWith('ckpt-')).sort()) {
    for (const rank of [0, 1]) {
      const info = await readHeaderOnly(join(dir, ck, `rank-${rank}.mlf`))
      const e = info.header.entries.find((x) => x.name === 'read')!
      const cells = e.box!.upper.reduce((v, u, d) => v * (u - e.box!.lower[d]), 1)
      const raw = cells * 8
      rows.push([String(info.header.step), String(rank), `[${e.box!.lower}]..[${e.box!.upper})`, String(raw), String(info.fileBytes), String(info.fileBytes - raw)])
    }
  }
  console.log('\nMinimal checkpoint per rank (every 40 dates, 2 ranks):')
  console.log(table(['step', 'rank', 'possessed box (level, node)', 'raw bytes', 'file bytes', 'overhead'], rows))
} finally {
  rmSync(dir, { recursive: true, force: true })
}
record.save()
