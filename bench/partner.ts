/**
 * Partner copies: what a checkpoint costs at the checkpoint point with and
 * without a partner copy (each rank's file also sent to the other rank, as
 * between two nodes, and written there in the background), for foreground
 * disk checkpoints and for disk checkpoints flushed from the memory level
 * (--async-checkpoints), and for memory-level checkpoints (a memory
 * checkpoint every `--memory-every` supersteps besides the disk ones; with
 * partner copies each is also copied into the partner's memory level). Also
 * the whole run's time, so the background work (which competes for the same
 * cores) shows too. Configurations interleaved.
 *
 *   npm run bench:partner -- [--n 2048] [--iterations 400] [--every 50] [--memory-every 10] [--repeats 3] [--transport tcp]
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { benchArgs } from './args.js'
import { openRecord } from './record.js'
import type { FaultToleranceConfig } from '../src/checkpoint/config.js'
import { summary } from '../src/bench/stats.js'
import type { Transport } from '../src/runtime/group.js'
import { timedJacobi } from './timed-jacobi.js'

const USAGE = 'npm run bench:partner -- [--n 2048] [--iterations 400] [--every 50] [--memory-every 10] [--repeats 3] [--transport tcp]'
const { values } = benchArgs(USAGE, () => parseArgs({
  options: {
    n: { type: 'string', default: '2048' },
    iterations: { type: 'string', default: '400' },
    every: { type: 'string', default: '50' },
    'memory-every': { type: 'string', default: '10' },
    repeats: { type: 'string', default: '3' },
    transport: { type: 'string', default: 'tcp' },
  },
}))
const n = Number(values.n)
const iterations = Number(values.iterations)
const every = Number(values.every)
const memoryEvery = Number(values['memory-every'])
const repeats = Number(values.repeats)
const transport = values.transport as Transport
const ranks = 2
const record = openRecord('partner', 'Partner copies: cost at the checkpoint point')
const root = mkdtempSync(join(tmpdir(), 'molotof-bench-partner-'))
let dirs = 0

// The project's median (src/bench/stats.ts), as every bench reports it.
const median = (xs: number[]) => summary(xs).median
const f1 = (x: number) => x.toFixed(1)

/** One Jacobi run: wall time (first to last superstep) and every checkpoint event. */
const run = (checkpoint: FaultToleranceConfig | undefined) => timedJacobi({ ranks, transport, n, iterations, checkpoint })

const configs: { name: string; cfg: () => FaultToleranceConfig | undefined; stallLevel: 'disk' | 'memory' }[] = [
  { name: 'no checkpoints', cfg: () => undefined, stallLevel: 'disk' },
  { name: 'disk', cfg: () => ({ dir: join(root, `d${dirs++}`), policy: { every }, keep: 2, resume: false }), stallLevel: 'disk' },
  { name: 'disk + partner', cfg: () => ({ dir: join(root, `d${dirs++}`), policy: { every }, keep: 2, resume: false, partner: { ranksPerNode: 1 } }), stallLevel: 'disk' },
  { name: 'async disk', cfg: () => ({ dir: join(root, `d${dirs++}`), policy: { every }, keep: 2, resume: false, async: true }), stallLevel: 'memory' },
  {
    name: 'async disk + partner',
    cfg: () => ({ dir: join(root, `d${dirs++}`), policy: { every }, keep: 2, resume: false, async: true, partner: { ranksPerNode: 1 } }),
    stallLevel: 'memory',
  },
  { name: 'memory', cfg: () => ({ dir: join(root, `d${dirs++}`), policy: { every }, keep: 2, resume: false, memory: { policy: { every: memoryEvery } } }), stallLevel: 'memory' },
  {
    name: 'memory + partner',
    cfg: () => ({ dir: join(root, `d${dirs++}`), policy: { every }, keep: 2, resume: false, memory: { policy: { every: memoryEvery } }, partner: { ranksPerNode: 1 } }),
    stallLevel: 'memory',
  },
]

try {
  const walls = new Map<string, number[]>(configs.map((c) => [c.name, []]))
  const stalls = new Map<string, number[]>(configs.map((c) => [c.name, []]))
  const partnerMs: number[] = []
  // Checkpoints per run at each configuration's stall level (memory configurations take many more).
  const points = new Map<string, number>()
  let count = 0
  let bytes = 0
  for (let rep = 0; rep < repeats; rep++) {
    for (const c of configs) {
      const r = await run(c.cfg())
      walls.get(c.name)!.push(r.ms)
      stalls.get(c.name)!.push(...r.events.filter((e) => e.level === c.stallLevel).map((e) => e.stallMs))
      points.set(c.name, r.events.filter((e) => e.level === c.stallLevel).length)
      partnerMs.push(...r.events.filter((e) => e.level === 'partner').map((e) => e.ms))
      if (c.name === 'disk') {
        count = r.events.length
        bytes = r.events[0]?.bytes ?? 0
      }
    }
  }
  console.log(`Jacobi ${n}², ${ranks} ranks (${transport}), ${iterations} supersteps, a disk checkpoint every ${every} (${count} per run; memory rows: also a memory checkpoint every ${memoryEvery}), ${(bytes / 2 ** 20).toFixed(1)} MiB per rank file, ${repeats} repeats, interleaved`)
  const none = median(walls.get('no checkpoints')!)
  console.log(`\n  configuration            stall at the point (median)   run time (median)   run time over no checkpoints, per checkpoint (how many)`)
  for (const c of configs) {
    const wall = median(walls.get(c.name)!)
    const stall = c.name === 'no checkpoints' ? '' : `${f1(median(stalls.get(c.name)!))} ms`
    const per = c.name === 'no checkpoints' ? '' : `${f1((wall - none) / Math.max(1, points.get(c.name)!))} ms (${points.get(c.name)})`
    console.log(`  ${c.name.padEnd(24)} ${stall.padStart(12)}                 ${(wall / 1000).toFixed(2).padStart(6)} s            ${per.padStart(9)}`)
  }
  const ratio = (a: string, b: string, of: (name: string) => number) => (of(a) / of(b)).toFixed(2)
  const stallOf = (name: string) => median(stalls.get(name)!)
  const perOf = (name: string) => (median(walls.get(name)!) - none) / Math.max(1, points.get(name)!)
  console.log(
    `\n  partner / without, stall at the point:  foreground ${ratio('disk + partner', 'disk', stallOf)}×, async ${ratio('async disk + partner', 'async disk', stallOf)}×, ` +
      `memory checkpoints ${ratio('memory + partner', 'memory', stallOf)}×   (target ≤ 1.5×)`,
  )
  console.log(
    `  partner / without, whole-run cost:      foreground ${ratio('disk + partner', 'disk', perOf)}×, async ${ratio('async disk + partner', 'async disk', perOf)}×, ` +
      `memory ${ratio('memory + partner', 'memory', perOf)}×`,
  )
  console.log(`  partner copy, checkpoint point to partner commit: ${f1(median(partnerMs))} ms median (${partnerMs.length} copies)`)
  for (const c of configs) if (c.name !== 'no checkpoints') record.figure(`${c.name}: stall at the checkpoint point`, stalls.get(c.name)!, 'ms')
  record.figure('partner / without, stall at a foreground disk checkpoint', stallOf('disk + partner') / stallOf('disk'), '×', { headline: 'partner copies: stall at the checkpoint point against none', target: '≤ 1.5×' })
  record.figure('partner copy, checkpoint point to partner commit', partnerMs, 'ms')
} finally {
  rmSync(root, { recursive: true, force: true })
}
record.save()
