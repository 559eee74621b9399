/**
 * Recovery time, failure → end of the first superstep computed again, with
 * and without warm spares: Jacobi under the supervisor, one rank process
 * killed mid-run (SIGKILL), each configuration repeated and interleaved.
 * Prints the breakdown (stop, start, negotiate, load, replay, restore, first
 * superstep) and checks each recovered result against a failure-free run.
 *
 *   npm run bench:recovery -- [--ranks 2] [--transport processes] [--n 2048]
 *     [--iterations 120] [--every 10] [--repeats 5] [--configs cold,spares,spares-replace,memory-spares,memory-replace]
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { benchArgs } from './args.js'
import { openRecord } from './record.js'
import type { JacobiResult } from '../examples/jacobi/jacobi.js'
import { launch } from '../src/index.js'
import { summary, table } from '../src/bench/stats.js'
import { Supervisor, type SupervisorEvent } from '../src/runtime/launch/supervisor.js'

const USAGE = 'npm run bench:recovery -- [--ranks 2] [--transport processes] [--n 2048]'
const { values } = benchArgs(USAGE, () => parseArgs({
  options: {
    ranks: { type: 'string', default: '2' },
    transport: { type: 'string', default: 'processes' },
    n: { type: 'string', default: '2048' },
    iterations: { type: 'string', default: '120' },
    every: { type: 'string', default: '10' },
    repeats: { type: 'string', default: '5' },
    configs: { type: 'string', default: 'cold,spares,spares-replace' },
  },
}))
const ranks = Number(values.ranks)
const transport = values.transport as 'processes' | 'threads'
const iterations = Number(values.iterations)
const every = Number(values.every)
const repeats = Number(values.repeats)
const failStep = Math.floor(iterations * 0.6) + Math.floor(every / 2)
const argv = ['--n', values.n!, '--iterations', String(iterations)]
const program = 'examples/jacobi/jacobi.ts'
const record = openRecord('recovery', 'Recovery: failure to the first superstep computed again')

interface Config {
  name: string
  spares: number
  keepSurvivors: boolean
  /** Checkpoints on the memory level (RAM) instead of the disk. */
  memory?: boolean
}
const known: Record<string, Config> = {
  cold: { name: 'cold restart (no spares)', spares: 0, keepSurvivors: true },
  spares: { name: `spares ${ranks === 1 ? 1 : 1}, survivors kept`, spares: 1, keepSurvivors: true },
  'spares-replace': { name: `spares ${ranks}, survivors replaced`, spares: ranks, keepSurvivors: false },
  // A survivor's memory writes in flight end before it is given its rank again (see runSession).
  'memory-spares': { name: 'memory level, spares 1, survivors kept', spares: 1, keepSurvivors: true, memory: true },
  'memory-replace': { name: `memory level, spares ${ranks}, survivors replaced`, spares: ranks, keepSurvivors: false, memory: true },
}
const configs = values.configs!.split(',').map((c) => known[c.trim()] ?? fail(`unknown config ${c}`))

function fail(why: string): never {
  throw new Error(why)
}

type Recovered = Extract<SupervisorEvent, { event: 'recovered' }>
const ref = await launch<JacobiResult>(program, { ranks, transport, argv, onLog: () => {} })
const rows = new Map<Config, Recovered[]>(configs.map((c) => [c, []]))
let allSame = true
const root = mkdtempSync(join(tmpdir(), 'molotof-recovery-'))
try {
  for (let rep = 0; rep < repeats; rep++) {
    for (const c of configs) {
      let recovered: Recovered | undefined
      const r = await new Supervisor<JacobiResult>(program, {
        ranks,
        transport,
        argv,
        checkpoint: c.memory
          ? // Memory checkpoints every `every` steps (in /dev/shm); the disk level never fires during the run.
            { dir: join(root, `r${rep}-memory`), policy: { every: 1_000_000 }, memory: { policy: { every } }, keep: 2, resume: false }
          : { dir: join(root, `r${rep}-${c.spares}-${c.keepSurvivors}`), policy: { every }, keep: 2, resume: false },
        inject: [{ rank: ranks - 1, skeleton: 0, step: failStep, phase: 'calculate' }],
        restarts: 1,
        // A loaded 2-core machine can starve a starting process for seconds: measure recoveries, not hangs.
        hangTimeoutMs: 10_000,
        spares: c.spares,
        keepSurvivors: c.keepSurvivors,
        onLog: () => {},
        onEvent: (e) => {
          if (e.event === 'recovered') recovered = e
        },
      }).run()
      const same = r.kind === 'done' && Object.is(r.value.checksum, ref.value.checksum) && Object.is(r.value.residual, ref.value.residual)
      allSame &&= same
      if (recovered) rows.get(c)!.push(recovered)
      process.stderr.write(`${c.name}, repeat ${rep + 1}: ${recovered ? recovered.failureToFirstStepMs.toFixed(0) : '?'} ms${same ? '' : ' (RESULT DIFFERS)'}\n`)
    }
  }
} finally {
  rmSync(root, { recursive: true, force: true })
}

const med = (xs: number[]) => summary(xs).median.toFixed(1)
const keys = ['failureToFirstStepMs', 'stopMs', 'startMs', 'negotiateMs', 'loadMs', 'replayMs', 'restoreMs', 'firstStepMs'] as const
console.log(
  `Jacobi n=${values.n}, ${ranks} ${transport}, checkpoint every ${every}, rank ${ranks - 1} killed at step ${failStep}; median of ${repeats} (ms)`,
)
console.log(
  table(
    ['configuration', 'failure → 1st step', 'min–max', 'stop', 'start', 'negotiate', 'load', 'replay', 'restore', '1st step'],
    configs.map((c) => {
      const rs = rows.get(c)!
      const total = rs.map((x) => x.failureToFirstStepMs)
      return [c.name, med(total), `${Math.min(...total).toFixed(0)}–${Math.max(...total).toFixed(0)}`, ...keys.slice(1).map((k) => med(rs.map((x) => x[k])))]
    }),
  ),
)
console.log(`every recovered result bit-identical to the failure-free run: ${allSame ? 'yes' : 'NO'}`)
for (const c of configs) {
  const total = rows.get(c)!.map((x) => x.failureToFirstStepMs)
  const warm = c.spares > 0 && c.keepSurvivors
  record.figure(`${c.name}: failure → first superstep`, total, 'ms', warm ? { headline: `recovery on warm spares, Jacobi n=${values.n}, ${ranks} ${transport}`, target: '< 100 ms' } : {})
}
record.save()
