/**
 * What a checkpoint that leaves out the domain the next step reads
 * (`unregister('read')`) spends on that domain's digest (CRC32 of its
 * possessed cells, for the check after a recovery): the time of the pass, for
 * a contiguous block (a matmul block of B) and for a subdomain whose rows
 * are strided by halo columns (a 2-D stencil).
 *
 *   npx tsx bench/read-digest.ts [--n 1024] [--ranks 4] [--repeats 20]
 */
import { parseArgs } from 'node:util'
import { benchArgs } from './args.js'
import { Domain2D, DomainDesc, splitPoint } from '../src/index.js'
import { readDigest } from '../src/checkpoint/recovery/replay-check.js'
import type { SkeletonState } from '../src/checkpoint/skeleton-hooks.js'
import { summary, table } from '../src/bench/stats.js'
import type { Partition } from '../src/routing/partition.js'

const USAGE = 'npx tsx bench/read-digest.ts [--n 1024] [--ranks 4] [--repeats 20]'
const { values } = benchArgs(USAGE, () =>
  parseArgs({ options: { n: { type: 'string', default: '1024' }, ranks: { type: 'string', default: '4' }, repeats: { type: 'string', default: '20' } } }),
)
const n = Number(values.n)
const P = Number(values.ranks)
const repeats = Number(values.repeats)

class Grid extends Domain2D {
  possessed(): DomainDesc<2> {
    return DomainDesc.of([0, 0], [0, 0])
  }
  needed(): DomainDesc<2> {
    return DomainDesc.of([0, 0], [0, 0])
  }
}

/** Rank 0's digest of `possessed` in a domain allocated to `box`, timed `repeats` times (ms). */
function time(box: DomainDesc<2>, possessed: DomainDesc<2>): { ms: number[]; mib: number } {
  const d = new Grid()
  d.resize(box)
  for (let k = 0; k < d.data.length; k++) d.data[k] = Math.sin(k)
  const partition = { possessed: [possessed], needed: [box] } as unknown as Partition
  const state = { write: d, partition, next: partition, mode: 'border' } as unknown as SkeletonState
  const ms: number[] = []
  readDigest(state, 0)
  for (let r = 0; r < repeats; r++) {
    const t = performance.now()
    readDigest(state, 0)
    ms.push(performance.now() - t)
  }
  return { ms, mib: (possessed.volume * 8) / 2 ** 20 }
}

const rows = splitPoint(n, P, 1)
const block = DomainDesc.of([0, 0], [rows, n])
const side = Math.round(n / Math.sqrt(P))
const interior = DomainDesc.of([1, 1], [side + 1, side + 1])
const cases: [string, { ms: number[]; mib: number }][] = [
  [`matmul block of B, ${rows}×${n} (contiguous)`, time(block, block)],
  [`stencil subdomain ${side}×${side} inside its halo (strided rows)`, time(interior.expand(1), interior)],
]
console.log(`CRC32 digest of one rank's possessed cells (float64), n=${n}, ${P} ranks, ${repeats} repeats, ms`)
console.log(
  table(
    ['domain', 'MiB', 'min', 'median', 'max', 'GiB/s (median)'],
    cases.map(([name, { ms, mib }]) => {
      const s = summary(ms)
      return [name, mib.toFixed(1), s.min.toFixed(2), s.median.toFixed(2), s.max.toFixed(2), (mib / 1024 / (s.median / 1000)).toFixed(2)]
    }),
  ),
)
