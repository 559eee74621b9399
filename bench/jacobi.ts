/**
 * Jacobi throughput: molotof on 1 and 2 ranks next to a plain hand-written
 * serial loop of the same kernel, measured side by side in one run with the
 * configurations interleaved so machine noise hits them alike.
 *
 *   npm run bench:jacobi -- [--n 2048] [--iterations 200] [--repeats 5]
 */
import { parseArgs } from 'node:util'
import { benchArgs } from './args.js'
import { openRecord } from './record.js'
import { launch } from '../src/index.js'
import type { JacobiResult } from '../examples/jacobi/jacobi.js'
import { jacobiSerial } from '../examples/jacobi/serial.js'
import { summary, table } from '../src/bench/stats.js'
import { jacobiThreads } from './jacobi-two-threads.mjs'

const USAGE = 'npm run bench:jacobi -- [--n 2048] [--iterations 200] [--repeats 5]'
const { values } = benchArgs(USAGE, () => parseArgs({
  options: {
    n: { type: 'string', default: '2048' },
    iterations: { type: 'string', default: '200' },
    repeats: { type: 'string', default: '5' },
  },
}))
const n = Number(values.n)
const iterations = Number(values.iterations)
const repeats = Number(values.repeats)
const updates = n * n * iterations
const record = openRecord('jacobi', 'Jacobi throughput against hand-written loops')

const configs: Array<{ name: string; run: () => Promise<number> }> = [
  {
    name: 'plain serial loop',
    run: async () => {
      const t0 = performance.now()
      jacobiSerial(n, iterations)
      return (performance.now() - t0) / 1000
    },
  },
  {
    name: 'hand-written 2 threads',
    run: () => jacobiThreads(n, iterations, 2) as Promise<number>,
  },
  ...[1, 2].map((ranks) => ({
    name: `molotof, ${ranks} rank${ranks > 1 ? 's' : ''}`,
    run: async () => {
      const r = await launch<JacobiResult>('examples/jacobi/jacobi.ts', {
        ranks,
        argv: ['--n', String(n), '--iterations', String(iterations)],
        onLog: () => {},
      })
      return r.value.seconds
    },
  })),
]

console.log(`Jacobi n=${n}, ${iterations} iterations, ${repeats} repeats (+1 warm-up), configurations interleaved`)
const times = configs.map(() => [] as number[])
for (let rep = -1; rep < repeats; rep++) {
  for (let c = 0; c < configs.length; c++) {
    const s = await configs[c].run()
    if (rep >= 0) times[c].push(s)
  }
  process.stderr.write(rep < 0 ? 'warm-up done\n' : `repeat ${rep + 1}/${repeats}\n`)
}
const med = times.map((t) => summary(t).median)
const rows = configs.map((c, i) => {
  const mlups = times[i].map((t) => updates / t / 1e6)
  const s = summary(mlups)
  return [c.name, s.min.toFixed(0), s.median.toFixed(0), s.max.toFixed(0), (med[0] / med[i]).toFixed(3)]
})
console.log(table(['configuration', 'MLUPS min', 'median', 'max', '× serial (median)'], rows))
console.log('(time measured around the skeleton loop on rank 0 for molotof, around the loops for the hand-written codes)')
// Three readings of the same comparison: medians, best runs (the least disturbed by other load), and the
// median of each repeat's pair (the two ran back to back, so slow drifts of the machine cancel).
const best = times.map((t) => summary(t).min)
const pairs = summary(times[1].map((hand, r) => hand / times[3][r])).median
console.log(`molotof 2 ranks / hand-written 2 threads: ${(med[1] / med[3]).toFixed(3)} (medians), ${(best[1] / best[3]).toFixed(3)} (best runs), ${pairs.toFixed(3)} (median of the per-repeat ratios)`)
configs.forEach((c, i) => record.figure(`${c.name}, n=${n}`, times[i].map((t) => updates / t / 1e6), 'MLUPS'))
record.figure('molotof 2 ranks / hand-written 2 threads (per repeat)', times[1].map((hand, r) => hand / times[3][r]), '×', {
  headline: `Jacobi ${n}², 2 ranks: throughput against a hand-written 2-thread loop`,
  target: '≥ 0.95',
})
record.save()
