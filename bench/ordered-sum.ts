/**
 * The cost of ctx.sumInStorageOrder (a serial pass on rank 0 plus the
 * transfer) against an allreduce of local sums, on a 2-D grid of ranks.
 *
 *   npx tsx bench/ordered-sum.ts [--n 2048] [--ranks 4] [--px 2] [--transport threads] [--repeats 5]
 */
import { parseArgs } from 'node:util'
import { benchArgs } from './args.js'
import { launch, type Transport } from '../src/index.js'
import { summary, table } from '../src/bench/stats.js'

const USAGE = 'npx tsx bench/ordered-sum.ts [--n 2048] [--ranks 4] [--px 2] [--transport threads] [--repeats 5]'
const { values } = benchArgs(USAGE, () => parseArgs({
  options: {
    n: { type: 'string', default: '2048' },
    ranks: { type: 'string', default: '4' },
    px: { type: 'string', default: '2' },
    transport: { type: 'string', default: 'threads' },
    repeats: { type: 'string', default: '5' },
  },
}))
const r = await launch<{ ordered: number[]; reduce: number[]; local: number[] }>('bench/programs/ordered-sum.ts', {
  ranks: Number(values.ranks),
  transport: values.transport as Transport,
  argv: ['--n', values.n!, '--px', values.px!, '--repeats', values.repeats!],
  onLog: () => {},
})
const row = (name: string, xs: number[]) => {
  const s = summary(xs)
  return [name, s.min.toFixed(1), s.median.toFixed(1), s.max.toFixed(1)]
}
const v = r.value
console.log(`sum of ${values.n}² float64 on ${values.ranks} ranks (${values.px} rank rows), ${values.transport}, rank 0's times in ms, ${values.repeats} repeats`)
console.log(
  table(
    ['method', 'min', 'median', 'max'],
    [row('sumInStorageOrder (serial bits)', v.ordered), row('local loop + allreduce', v.reduce), row("local loop over rank 0's cells", v.local)],
  ),
)
