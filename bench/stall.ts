/**
 * The stall of memory checkpoints, side by side for several checkouts of
 * molotof: the 2-rank Jacobi on rank processes with a memory checkpoint every
 * `--every` seconds, one run per checkout in turn, `--rounds` times, and the
 * quartiles of every memory checkpoint's stall (the first of each run, which
 * starts the I/O thread and sizes its buffers, left out). To compare a change
 * with what came before, check the older commit out beside this one
 * (`git worktree add ../before <commit>`, with node_modules linked in) and
 * name both. Each checkout runs its own code: its bench/timed-jacobi.ts and
 * what that imports.
 *
 *   npm run bench:stall -- [--tree ../before] [--tree .] [--rounds 4] [--n 2048] [--iterations 2000] [--every 0.5]
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { benchArgs } from './args.js'
import type { CheckpointEvent } from '../src/checkpoint/events.js'
import { quantile } from '../src/bench/stats.js'
import type { timedJacobi as TimedJacobi } from './timed-jacobi.js'

const USAGE = 'npm run bench:stall -- [--tree ../before] [--tree .] [--rounds 4] [--n 2048] [--iterations 2000] [--every 0.5]'
const { values } = benchArgs(USAGE, () =>
  parseArgs({
    options: {
      tree: { type: 'string', multiple: true, default: ['.'] },
      rounds: { type: 'string', default: '4' },
      n: { type: 'string', default: '2048' },
      iterations: { type: 'string', default: '2000' },
      every: { type: 'string', default: '0.5' },
    },
  }),
)
const trees = values.tree.map((t) => resolve(t))
const rounds = Number(values.rounds)
const n = Number(values.n)
const iterations = Number(values.iterations)
const every = Number(values.every)
if (![rounds, n, iterations].every((v) => Number.isSafeInteger(v) && v > 0) || !(every > 0)) {
  console.error(`--rounds, --n and --iterations must be positive integers and --every a positive number of seconds\n\nusage: ${USAGE}`)
  process.exit(2)
}

const stalls = new Map<string, number[]>(trees.map((t) => [t, []]))
console.log(`Jacobi ${n}², 2 ranks (processes), ${iterations} supersteps, a memory checkpoint every ${every} s; ${rounds} rounds over ${trees.length} checkout(s)`)
for (let r = 0; r < rounds; r++) {
  for (const tree of trees) {
    const { timedJacobi } = (await import(pathToFileURL(join(tree, 'bench', 'timed-jacobi.ts')).href)) as { timedJacobi: typeof TimedJacobi }
    const dir = mkdtempSync(join(tmpdir(), 'molotof-bench-stall-'))
    try {
      const run = await timedJacobi({
        ranks: 2,
        transport: 'processes',
        n,
        iterations,
        checkpoint: { dir, policy: { kind: 'off' }, memory: { policy: { seconds: every } }, keep: 2, resume: false },
      })
      const mine = run.events.filter((e: CheckpointEvent) => e.level === 'memory').slice(1).map((e: CheckpointEvent) => e.stallMs)
      stalls.get(tree)!.push(...mine)
      console.log(`  round ${r + 1}, ${tree}: ${mine.length} checkpoints, stall median ${quantile(mine, 0.5).toFixed(2)} ms`)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }
}
console.log('\nstall at a memory checkpoint, ms (lower quartile, median, upper quartile, p90):')
for (const [tree, xs] of stalls) {
  const q = [0.25, 0.5, 0.75, 0.9].map((p) => quantile(xs, p).toFixed(2))
  console.log(`  ${tree}: ${q.join(', ')} (${xs.length} checkpoints)`)
}
