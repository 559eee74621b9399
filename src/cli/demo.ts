import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { privateResidentBytes } from '../bench/sysmem.js'
import { table } from '../bench/stats.js'
import { InternalError } from '../errors.js'
import { TRANSPORTS, type RunningRanks } from '../runtime/group.js'
import { launch } from '../runtime/launch/launcher.js'
import { Supervisor } from '../runtime/launch/supervisor.js'
import { option } from '../skeletons/options.js'
import { HELP_OPTION, parseCommand } from './args.js'
import { formatHelp } from './help.js'
import { formatSize } from '../util/bytes.js'

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

/** `molotof demo` (the README's main job). */
export async function demoCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const { values: f } = parseCommand(DEMO_OPTIONS, argv, 0)
  if (f.help) {
    out(DEMO_HELP)
    return 0
  }
  const { ranks, n, iterations, transport } = f
  const spares = Math.min(f.spares, ranks)
  const program = jacobiFile()
  const jargv = ['--n', String(n), '--iterations', String(iterations)]
  const every = Math.max(1, Math.floor(iterations / 8))
  const failAt = Math.floor(iterations * 0.55)
  const root = mkdtempSync(join(tmpdir(), 'molotof-demo-'))
  const quiet = { onLog: () => {} }
  try {
    out(`1. Reference: Jacobi n=${n}, ${iterations} sweeps on ${ranks} ranks, no fault tolerance`)
    const ref = await launch<JacobiValue>(program, { ranks, transport, argv: jargv, ...quiet })
    out(`   checksum ${ref.value.checksum}   (${(ref.wallMs / 1000).toFixed(2)} s)`)

    const how = spares > 0 ? `, ${spares} warm spare${spares > 1 ? 's' : ''} standing by` : ''
    out(`\n2. Same run, checkpoint every ${every} sweeps${how}, rank ${ranks - 1} killed at step ${failAt} (steps count from 0)`)
    let group: RunningRanks | undefined
    const system: number[] = []
    let minimal = 0
    const sup = new Supervisor<JacobiValue>(program, {
      ranks,
      transport,
      argv: jargv,
      checkpoint: { dir: join(root, 'minimal'), policy: { every }, keep: 2, resume: false },
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
        if (e.event === 'checkpoint') out(`   checkpoint ${e.seq} at step ${e.step}: ${mib(e.totalBytes)} in ${e.ms.toFixed(0)} ms`)
        if (e.event === 'failure') out(`   FAILURE: rank ${e.rank} ${e.reason === 'signal' ? 'killed' : 'died'} at step ${e.step} (${e.phase}); detected in ${e.detectionMs.toFixed(1)} ms`)
        if (e.event === 'recovery-line') out(`   recovery line: checkpoint ${e.seq} (step ${e.step}), agreed in ${e.negotiateMs.toFixed(1)} ms`)
        if (e.event === 'recovered') {
          const from = e.ranksFrom.spawned === 0 ? `the survivors kept, ${e.ranksFrom.spares} warm spare(s)` : `${e.ranksFrom.spawned} rank(s) started cold`
          out(
            `   first superstep done ${e.failureToFirstStepMs.toFixed(0)} ms after the failure (${from}):\n` +
              `     stop ${e.stopMs.toFixed(0)} ms, ${e.ranksFrom.spawned === 0 ? 'spare' : 'spawn'} ${e.startMs.toFixed(0)} ms, agree ${e.negotiateMs.toFixed(1)} ms, read ${e.loadMs.toFixed(1)} ms, ` +
              `replay ${e.replayMs.toFixed(1)} ms, restore ${e.restoreMs.toFixed(1)} ms, first superstep ${e.firstStepMs.toFixed(0)} ms`,
          )
        }
      },
      ...quiet,
    })
    const r = await sup.run()
    if (r.kind !== 'done') throw new InternalError('the demonstration run was preempted, though nothing asked it to stop')
    const same = Object.is(r.value.checksum, ref.value.checksum) && Object.is(r.value.residual, ref.value.residual)
    out(`   checksum ${r.value.checksum}   ${same ? 'bit-identical to the reference' : 'DIFFERENT FROM THE REFERENCE'} (${r.restarts} restart)`)

    out('\n3. Checkpoint size per rank (rank 0)')
    let def = 0
    await launch(program, {
      ranks,
      transport,
      argv: ['--n', String(n), '--iterations', '1'],
      checkpoint: { dir: join(root, 'default'), policy: { every: 1 }, keep: 1, resume: false, contents: 'default' },
      onCheckpoint: (e) => (def = e.bytes),
      ...quiet,
    })
    const sys = system.length ? Math.max(...system) : undefined
    const rows = [
      ['molotof, minimal (the grid just computed)', mib(minimal), '1.00'],
      ['molotof, default (both grids)', mib(def), (def / minimal).toFixed(2)],
      [`system-level image (private memory of the rank process)`, sys === undefined ? 'n/a (threads)' : mib(sys), sys === undefined ? '-' : (sys / minimal).toFixed(2)],
    ]
    out(table(['checkpoint', 'size', '× minimal'], rows))
    return same ? 0 : 1
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
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
