/**
 * Failure-free overhead of the checkpoint levels, measured side by side in
 * time: a run with memory checkpoints every 2 s and disk checkpoints every
 * 60 s and a run without checkpoints go at the same moment, each on one rank
 * pinned to its own core (taskset), and swap cores every pair. This machine's
 * speed drifts by several per cent over tens of seconds, which runs one after
 * the other cannot tell from the cost of checkpoints; runs at the same moment
 * see the same drift. Each pair's ratio is the compute time the program
 * reports (its supersteps, start-up left out); the rank's I/O thread shares
 * its pinned core, so the background work of the levels is charged.
 *
 * `--control` adds, after each pair, a pair of two runs without checkpoints:
 * their ratio is the noise floor (what the cores and the moment alone make of
 * identical work), to read the overhead against.
 *
 *   npx tsx bench/overhead-pinned.ts [--n 2048] [--seconds 70] [--pairs 6] [--control]
 */
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs, promisify } from 'node:util'
import { summary } from '../src/bench/stats.js'
import { benchArgs } from './args.js'
import { openRecord } from './record.js'

const run = promisify(execFile)
const USAGE = 'npx tsx bench/overhead-pinned.ts [--n 2048] [--seconds 70] [--pairs 6] [--control]'
const { values } = benchArgs(USAGE, () => parseArgs({
  options: {
    n: { type: 'string', default: '2048' },
    seconds: { type: 'string', default: '70' },
    pairs: { type: 'string', default: '6' },
    control: { type: 'boolean', default: false },
  },
}))
const n = Number(values.n)
const seconds = Number(values.seconds)
const pairs = Number(values.pairs)
const root = mkdtempSync(join(tmpdir(), 'molotof-bench-overhead-'))
const record = openRecord('overhead-pinned', 'Failure-free overhead of the levels, one rank per core')
const median = (xs: number[]) => summary(xs).median
const pct = (r: number) => `${((r - 1) * 100).toFixed(2)} %`

/** One 1-rank Jacobi run pinned to `core`: the compute seconds it reports, and its checkpoints by level. */
async function jacobi(core: number, iterations: number, levels: boolean, dir: string): Promise<{ compute: number; memory: number; disk: number }> {
  const events = `${dir}.events.jsonl`
  const args = ['-c', String(core), process.execPath, 'bin/molotof.mjs', 'run', 'examples/jacobi/jacobi.ts', '--ranks', '1', '--transport', 'processes']
  // Its own directory also for a run without checkpoints: the directory's lock is taken either way.
  args.push('--n', String(n), '--iterations', String(iterations), '--checkpoint-dir', dir, '--events', events)
  args.push(...(levels ? ['--memory-checkpoint', '2s', '--checkpoint', '60s'] : ['--checkpoint', 'off']))
  const { stdout } = await run('taskset', args, { maxBuffer: 1 << 24 })
  const compute = /compute\s+([\d.]+) s/.exec(stdout)
  if (!compute) throw new Error(`no compute time in the output of molotof run:\n${stdout}`)
  const checkpoints = readFileSync(events, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { event: string; level?: string })
    .filter((e) => e.event === 'checkpoint')
  return { compute: Number(compute[1]), memory: checkpoints.filter((e) => e.level === 'memory').length, disk: checkpoints.filter((e) => e.level === 'disk').length }
}

try {
  // Calibrate on core 0: supersteps for a run of about `seconds`.
  const probe = await jacobi(0, 200, false, join(root, 'probe'))
  const iterations = Math.max(200, Math.round((seconds / probe.compute) * 200))
  console.log(`Jacobi ${n}², 1 rank per run, 2 runs at once (one per core, swapped every pair), ${iterations} supersteps (~${seconds} s), ${pairs} pairs`)
  const ratios: number[] = []
  const controls: number[] = []
  for (let p = 0; p < pairs; p++) {
    const levelsCore = p % 2
    const [withLevels, without] = await Promise.all([
      jacobi(levelsCore, iterations, true, join(root, `l${p}`)),
      jacobi(1 - levelsCore, iterations, false, join(root, `o${p}`)),
    ])
    ratios.push(withLevels.compute / without.compute)
    if (values.control) {
      const [a, b] = await Promise.all([jacobi(levelsCore, iterations, false, join(root, `ca${p}`)), jacobi(1 - levelsCore, iterations, false, join(root, `cb${p}`))])
      controls.push(a.compute / b.compute)
      console.log(`  control ${p + 1}: two runs without checkpoints, ${a.compute.toFixed(2)} s (core ${levelsCore}) and ${b.compute.toFixed(2)} s: ${pct(controls[p])}`)
    }
    console.log(
      `  pair ${p + 1}: with levels ${withLevels.compute.toFixed(2)} s (core ${levelsCore}; ${withLevels.memory} memory, ${withLevels.disk} disk checkpoints), ` +
        `without ${without.compute.toFixed(2)} s (core ${1 - levelsCore}): ${pct(ratios[p])}`,
    )
  }
  const byCore = [0, 1].map((c) => ratios.filter((_, p) => p % 2 === c))
  // The cores are not equally fast (core 0 takes more interrupts): pairs with the cores swapped, taken
  // together (geometric mean of their two ratios), cancel that out.
  const swapped: number[] = []
  for (let p = 0; p + 1 < pairs; p += 2) swapped.push(Math.sqrt(ratios[p] * ratios[p + 1]))
  console.log(`levels on core 0: ${byCore[0].map(pct).join(', ')}; on core 1: ${byCore[1].map(pct).join(', ')}`)
  console.log(`median of the ${pairs} paired ratios: ${pct(median(ratios))}`)
  record.figure('overhead, memory every 2 s + disk every 60 s (paired runs)', ratios.map((r) => (r - 1) * 100), '%', { target: '≤ 1 %' })
  if (controls.length > 0) console.log(`control pairs (identical work): ${controls.map(pct).join(', ')}`)
  if (swapped.length > 0) {
    console.log(
      `overhead of memory every 2 s + disk every 60 s: ${pct(median(swapped))} (median over ${swapped.length} core-swapped pairs of pairs: ${swapped.map(pct).join(', ')})`,
    )
  }
} finally {
  rmSync(root, { recursive: true, force: true })
}
record.save()
