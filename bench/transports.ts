/**
 * Transports side by side: Jacobi on 2 rank processes linked by Unix-domain
 * sockets (`processes`) and by TCP over loopback (`tcp`, the transport between
 * nodes of a cluster run), configurations interleaved so machine noise hits
 * them alike. Prints MLUPS and the ratio tcp / Unix sockets (target ≥ 0.95).
 *
 *   npm run bench:transports -- [--n 2048] [--iterations 200] [--repeats 5] [--ranks 2]
 */
import { parseArgs } from 'node:util'
import { benchArgs } from './args.js'
import { openRecord } from './record.js'
import type { JacobiResult } from '../examples/jacobi/jacobi.js'
import { summary, table } from '../src/bench/stats.js'
import { launch } from '../src/index.js'

const USAGE = 'npm run bench:transports -- [--n 2048] [--iterations 200] [--repeats 5] [--ranks 2]'
const { values } = benchArgs(USAGE, () => parseArgs({
  options: {
    n: { type: 'string', default: '2048' },
    iterations: { type: 'string', default: '200' },
    repeats: { type: 'string', default: '5' },
    ranks: { type: 'string', default: '2' },
  },
}))
const n = Number(values.n)
const iterations = Number(values.iterations)
const repeats = Number(values.repeats)
const ranks = Number(values.ranks)
const updates = n * n * iterations
const transports = ['processes', 'tcp'] as const
const record = openRecord('transports', 'Transports: Unix sockets against TCP')

console.log(`Jacobi n=${n}, ${iterations} iterations, ${ranks} rank processes, ${repeats} repeats (+1 warm-up), transports interleaved`)
const times = transports.map(() => [] as number[])
for (let rep = -1; rep < repeats; rep++) {
  for (const [i, transport] of transports.entries()) {
    const r = await launch<JacobiResult>('examples/jacobi/jacobi.ts', {
      ranks,
      transport,
      argv: ['--n', String(n), '--iterations', String(iterations)],
      onLog: () => {},
      hangTimeoutMs: 60_000,
    })
    if (rep >= 0) times[i].push(r.value.seconds)
  }
  process.stderr.write(rep < 0 ? 'warm-up done\n' : `repeat ${rep + 1}/${repeats}\n`)
}
const med = times.map((t) => summary(t).median)
const rows = transports.map((t, i) => {
  const s = summary(times[i].map((x) => updates / x / 1e6))
  return [t === 'tcp' ? 'tcp (loopback)' : 'processes (Unix sockets)', s.min.toFixed(0), s.median.toFixed(0), s.max.toFixed(0)]
})
console.log(table(['transport', 'MLUPS min', 'median', 'max'], rows))
console.log(`tcp / Unix sockets (medians of the skeleton loop time on rank 0): ${(med[0] / med[1]).toFixed(3)}`)
transports.forEach((t, i) => record.figure(`${t}, Jacobi n=${n}, ${ranks} ranks`, times[i].map((x) => updates / x / 1e6), 'MLUPS'))
record.figure('TCP / Unix sockets throughput (per repeat)', times[0].map((u, r) => u / times[1][r]), '×', { headline: 'TCP against Unix sockets, Jacobi throughput', target: '≥ 0.95' })
record.save()
