import { existsSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { privateResidentBytes } from '../bench/sysmem.js'
import { table } from '../bench/stats.js'
import { InternalError } from '../errors.js'
import { TRANSPORTS, type RunningRanks } from '../runtime/group.js'
import { launch } from '../runtime/launch/launcher.js'
import { Supervisor, type SupervisorEvent } from '../runtime/launch/supervisor.js'
import { option } from '../skeletons/options.js'
import { HELP_OPTION, parseCommand } from './args.js'
import { formatHelp } from './help.js'
import { formatSize } from '../util/bytes.js'
import { withScratchDirectory } from '../util/scratch.js'

const DEMO_OPTIONS = {
  ranks: option.int(4, 'ranks (the last one is killed)', { min: 1 }),
  n: option.int(2048, 'Jacobi interior size', { min: 1 }),
  iterations: option.int(200, 'Jacobi sweeps', { min: 1 }),
  transport: option.choice(TRANSPORTS, 'processes', 'processes (a real SIGKILL) or threads'),
  spares: option.int(1, 'warm spares (the killed rank is replaced by one; 0 restarts every rank cold)', { min: 0 }),
  ...HELP_OPTION,
}

const DEMO_HELP = formatHelp({
  usage: 'molotof demo [options]',
  about: `What molotof does, in under a minute: Jacobi on several ranks, a rank killed
mid-run, the automatic recovery from the last checkpoint on a warm spare
(a rank process started ahead with the program loaded), the bit-identical
result, and how small the checkpoints are.`,
  sections: [{ title: 'Options', specs: DEMO_OPTIONS }],
  exitCodes: [
    [0, 'the recovered result is bit-identical to the reference'],
    [1, 'it is not, or a run failed'],
    [2, 'bad input (options)'],
  ],
})

interface JacobiValue {
  checksum: number
  residual: number
}

/** What the three steps of the demonstration share: the program, its options, the ranks and a scratch directory. */
interface DemoSetup {
  program: string
  ranks: number
  n: number
  iterations: number
  transport: (typeof TRANSPORTS)[number]
  spares: number
  jargv: string[]
  root: string
  out: (s: string) => void
}

/** The ranks' own lines are not the demonstration's. */
const quiet = { onLog: () => {} }

/** `molotof demo` (the README's main job). */
export async function demoCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const { values: f } = parseCommand(DEMO_OPTIONS, argv, 0)
  if (f.help) {
    out(DEMO_HELP)
    return 0
  }
  const { ranks, n, iterations, transport } = f
  return withScratchDirectory('molotof-demo-', async (root) => {
    const d: DemoSetup = { program: jacobiFile(), ranks, n, iterations, transport, spares: Math.min(f.spares, ranks), jargv: ['--n', String(n), '--iterations', String(iterations)], root, out }
    const ref = await referenceRun(d)
    const { same, minimal, system } = await recoveredRun(d, ref)
    await checkpointSizes(d, minimal, system)
    return same ? 0 : 1
  })
}

/** 1. The result to compare with: the same run without fault tolerance. */
async function referenceRun(d: DemoSetup): Promise<JacobiValue> {
  d.out(`1. Reference: Jacobi n=${d.n}, ${d.iterations} sweeps on ${d.ranks} ranks, no fault tolerance`)
  const ref = await launch<JacobiValue>(d.program, { ranks: d.ranks, transport: d.transport, argv: d.jargv, ...quiet })
  d.out(`   checksum ${ref.value.checksum}   (${(ref.wallMs / 1000).toFixed(2)} s)`)
  return ref.value
}

/**
 * 2. The same run with checkpoints and the last rank killed past half-way: the recovery as it happens, and
 * whether its result is bit-identical. Also measures, for step 3, the checkpoint's size and rank 0's private memory.
 */
async function recoveredRun(d: DemoSetup, ref: JacobiValue): Promise<{ same: boolean; minimal: number; system: number[] }> {
  const { ranks, spares, iterations, out } = d
  const every = Math.max(1, Math.floor(iterations / 8))
  const failAt = Math.floor(iterations * 0.55)
  const how = spares > 0 ? `, ${spares} warm spare${spares > 1 ? 's' : ''} standing by` : ''
  out(`\n2. Same run, checkpoint every ${every} sweeps${how}, rank ${ranks - 1} killed at step ${failAt} (steps count from 0)`)
  let group: RunningRanks | undefined
  const system: number[] = []
  let minimal = 0
  const sup = new Supervisor<JacobiValue>(d.program, {
    ranks,
    transport: d.transport,
    argv: d.jargv,
    checkpoint: { dir: join(d.root, 'minimal'), policy: { every }, keep: 2, resume: false },
    inject: [{ rank: ranks - 1, skeleton: 0, step: failAt, phase: 'calculate' }],
    spares,
    onGroup: (g) => (group = g),
    onCheckpoint: (e) => {
      minimal = e.bytes
      const pid = group?.pid?.(0)
      const b = pid === undefined ? undefined : privateResidentBytes(pid)
      if (b !== undefined) system.push(b)
    },
    onEvent: (e) => {
      const line = recoveryLine(e)
      if (line !== undefined) out(line)
    },
    ...quiet,
  })
  const r = await sup.run()
  if (r.kind !== 'done') throw new InternalError('the demonstration run was preempted, though nothing asked it to stop')
  const same = Object.is(r.value.checksum, ref.checksum) && Object.is(r.value.residual, ref.residual)
  out(`   checksum ${r.value.checksum}   ${same ? 'bit-identical to the reference' : 'DIFFERENT FROM THE REFERENCE'} (${r.restarts} restart)`)
  return { same, minimal, system }
}

/** The events of step 2 the demonstration tells: checkpoints, the failure, the recovery line, the recovery's phases. */
function recoveryLine(e: SupervisorEvent): string | undefined {
  switch (e.event) {
    case 'checkpoint':
      return `   checkpoint ${e.seq} at step ${e.step}: ${mib(e.totalBytes)} in ${e.ms.toFixed(0)} ms`
    case 'failure':
      return `   FAILURE: rank ${e.rank} ${e.reason === 'signal' ? 'killed' : 'died'} at step ${e.step} (${e.phase}); detected in ${e.detectionMs.toFixed(1)} ms`
    case 'recovery-line':
      return `   recovery line: checkpoint ${e.seq} (step ${e.step}), agreed in ${e.negotiateMs.toFixed(1)} ms`
    case 'recovered': {
      const from = e.ranksFrom.spawned === 0 ? `the survivors kept, ${e.ranksFrom.spares} warm spare(s)` : `${e.ranksFrom.spawned} rank(s) started cold`
      return (
        `   first superstep done ${e.failureToFirstStepMs.toFixed(0)} ms after the failure (${from}):\n` +
        `     stop ${e.stopMs.toFixed(0)} ms, ${e.ranksFrom.spawned === 0 ? 'spare' : 'spawn'} ${e.startMs.toFixed(0)} ms, agree ${e.negotiateMs.toFixed(1)} ms, read ${e.loadMs.toFixed(1)} ms, ` +
        `replay ${e.replayMs.toFixed(1)} ms, restore ${e.restoreMs.toFixed(1)} ms, first superstep ${e.firstStepMs.toFixed(0)} ms`
      )
    }
    default:
      return undefined
  }
}

/** 3. How small the checkpoint is: minimal contents, default contents (one sweep), and rank 0's system-level image. */
async function checkpointSizes(d: DemoSetup, minimal: number, system: number[]): Promise<void> {
  d.out('\n3. Checkpoint size per rank (rank 0)')
  let def = 0
  await launch(d.program, {
    ranks: d.ranks,
    transport: d.transport,
    argv: ['--n', String(d.n), '--iterations', '1'],
    checkpoint: { dir: join(d.root, 'default'), policy: { every: 1 }, keep: 1, resume: false, contents: 'default' },
    onCheckpoint: (e) => (def = e.bytes),
    ...quiet,
  })
  const sys = system.length ? Math.max(...system) : undefined
  const rows = [
    ['molotof, minimal (the grid just computed)', mib(minimal), '1.00'],
    ['molotof, default (both grids)', mib(def), (def / minimal).toFixed(2)],
    [`system-level image (private memory of the rank process)`, sys === undefined ? 'n/a (threads)' : mib(sys), sys === undefined ? '-' : (sys / minimal).toFixed(2)],
  ]
  d.out(table(['checkpoint', 'size', '× minimal'], rows))
}

const mib = (b: number) => formatSize(b, { unit: 'MiB', digits: 2 })

/** examples/jacobi/jacobi.ts of this package (the demo runs from src/ or dist/). */
function jacobiFile(): string {
  for (let url = new URL('./', import.meta.url); url.pathname !== '/'; url = new URL('../', url)) {
    const candidate = resolve(fileURLToPath(url), 'examples/jacobi/jacobi.ts')
    if (existsSync(candidate)) return candidate
  }
  return resolve('examples/jacobi/jacobi.ts')
}
