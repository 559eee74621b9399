import { appendFileSync, existsSync, writeFileSync } from 'node:fs'
import { basename, join, resolve } from 'node:path'
import { parseDuration } from '../checkpoint/policy/duration.js'
import { parsePolicy } from '../checkpoint/policy/policy.js'
import { explainFsError } from '../checkpoint/store/fs-errors.js'
import type { FaultToleranceConfig } from '../checkpoint/config.js'
import { checkMemoryDirectory, memoryDirFor, RAM_ROOT } from '../checkpoint/store/memory-level.js'
import { ConfigError } from '../errors.js'
import { TRANSPORTS } from '../runtime/group.js'
import { checkDirTemplate, detectLauncher } from '../runtime/cluster-env.js'
import { parseInjection, type Injection, type RandomInjection } from '../runtime/inject.js'
import { describe } from '../runtime/launch/launcher.js'
import { MIN_HEARTBEAT_MS, RUN_DEFAULTS } from '../runtime/launch/run-options.js'
import { Supervisor, type GroupStarterOption } from '../runtime/launch/supervisor.js'
import { option, type OptionSpecs, type OptionValues } from '../skeletons/options.js'
import { HELP_OPTION, parseProgramCommand } from './args.js'
import { CLUSTER_OPTIONS, checkClusterFlags, copyLevels, joinCluster } from './cluster-run.js'
import { EXIT, exitCodeOf } from './exit-codes.js'
import { formatHelp, RUN_EXIT_CODES, STARTER_EXAMPLES_FROM } from './help.js'
import { ProgressView } from './progress.js'
import { StatusFile } from './status-file.js'
import { formatSize } from '../util/bytes.js'
import { parentAtCliStart, SAME_STOP_MS, takeHeldStopSignals } from './stop-signals.js'
import { watchLauncher, watchWrapper } from './wrapper-watch.js'

/** What `molotof run` prints (--log): everything, the events a batch log keeps, or the result only. */
const LOG_LEVELS = ['all', 'events', 'quiet'] as const
/** The rank lines `--log events` keeps (by their first word): what a batch log must tell. */
const EVENT_LINES = ['warning:', '--resume-or-start:']

/** The options of `molotof run` (the program's own options follow the program file). */
export const RUN_OPTIONS = {
  ranks: option.int(2, 'number of ranks (SPMD copies of the program)', { min: 1 }),
  transport: option.choice(TRANSPORTS, RUN_DEFAULTS.transport, 'worker threads of one process, one child process per rank (Unix sockets), or processes over TCP (always under a cluster launcher)'),
  checkpoint: option.string('off', 'checkpoint policy: off, every:<steps>, <seconds>s, mtbf:<duration>, request'),
  checkpointDir: option.string(undefined, 'checkpoint directory (default: .molotof/<program file name>)'),
  keep: option.int(2, 'complete checkpoints kept', { min: 1 }),
  memoryCheckpoint: option.string(undefined, 'memory-level policy (checkpoints in RAM, survive dead ranks): every:<steps>, <seconds>s, mtbf:<duration>, off; disk checkpoints are then flushed from it in the background'),
  memoryDir: option.string(undefined, 'directory in RAM for the memory level (default: /dev/shm/molotof-<hash of the checkpoint directory>); one already holding other files is left alone: the level uses its sub-directory molotof-memory'),
  asyncCheckpoints: option.boolean(false, 'write disk checkpoints through a memory copy flushed in the background (the same as --memory-checkpoint off)'),
  compress: option.boolean(false, 'compress disk checkpoints as they are flushed from the memory level, in the background (needs --memory-checkpoint or --async-checkpoints; their partner and shared copies are copies of those files); a payload registered with { compress: false } stays raw'),
  resume: option.boolean(false, 'resume from the newest checkpoint valid on every rank, found on any level or copy (refused, exit 2, when there is none)'),
  resumeOrStart: option.boolean(false, 'resume when there is a checkpoint of the run to resume, else start afresh (saying which it did)'),
  fresh: option.boolean(false, 'discard the checkpoints of an earlier, unfinished run found in the checkpoint directory, then start afresh'),
  allowCodeChange: option.boolean(false, "with --resume: resume even though the program's code changed since the checkpoint (a warning instead of a refusal)"),
  restarts: option.int(RUN_DEFAULTS.restarts, 'automatic restarts after failures (the restart budget)', { min: 0 }),
  spares: option.int(RUN_DEFAULTS.spares, "warm spares: rank processes (threads) started ahead with the program loaded; a failed rank is replaced by one (an idle spare process holds a rank's large buffers, touched ahead)", { min: 0 }),
  keepSurvivors: option.boolean(RUN_DEFAULTS.keepSurvivors, 'with --spares: survivors of a failure run the program again in their own process (--no-keep-survivors: replaced by spares too)'),
  heartbeat: option.int(RUN_DEFAULTS.heartbeatMs, 'heartbeat period of rank processes, ms', { min: MIN_HEARTBEAT_MS }),
  hangTimeout: option.int(undefined, `a rank process silent this long (ms) is hung (default: max(${RUN_DEFAULTS.hangTimeoutFloorMs}, ${RUN_DEFAULTS.hangTimeoutBeats} × heartbeat))`, { min: 1 }),
  inject: option.string(undefined, 'inject failures: rank=R,step=S[,phase=calculate|route|checkpoint] or random[:seed][,count=K]; several separated by ;'),
  timeLimit: option.string(undefined, 'checkpoint and stop before this wall time (e.g. 2h, 30m), leaving room for one checkpoint'),
  events: option.string(undefined, 'write every event (start, checkpoint, failure, recovery, finish) as JSON lines to this file'),
  statusFile: option.string(undefined, "write the run's outcome (exit code, its meaning, the command to resume) as JSON to this file, at start and end: for batch scripts whose launcher or wrapper hides the exit code (mpirun, npx)"),
  json: option.boolean(false, "print rank 0's result as JSON instead of the program's text"),
  ...CLUSTER_OPTIONS,
  log: option.choice(
    LOG_LEVELS,
    'all',
    'what a run prints: all (progress, checkpoints, log lines, failures, recoveries, the result); events (failures, restarts, recoveries, warnings and the result: for batch logs); quiet (the result only)',
  ),
  quiet: option.boolean(false, 'print only the result (the same as --log quiet)'),
  ...HELP_OPTION,
}

type RunValues = OptionValues<typeof RUN_OPTIONS>

const RUN_HELP = {
  usage: 'molotof run <program.ts|.js> [options] [program options]',
  about: `Runs a molotof program (a module whose default export is defineProgram({...}))
on N ranks under a supervisor: a rank that dies, throws or hangs is detected,
the survivors are stopped, and all ranks restart from the newest checkpoint.
SIGTERM or SIGINT make the ranks checkpoint and stop (exit code 75); a second
signal, half a second or more later, stops at once. SIGUSR1 asks for a
checkpoint and goes on. In batch scripts start ./node_modules/.bin/molotof
rather than npx (which may exit 143 or 130 when signalled), and read
--status-file where a launcher reports its own code (mpirun: 137). TypeScript
programs run as they are, without a build. Options may stand before or after
the program file; the program's own options are listed by
molotof run --help <program>.`,
  exitCodes: RUN_EXIT_CODES,
  examplesFrom: STARTER_EXAMPLES_FROM,
  examples: [
    'molotof run relax.ts --ranks 4 --n 1024 --sweeps 500',
    'molotof run relax.ts --ranks 2 --checkpoint every:50 --inject rank=1,step=120',
    'molotof run relax.ts --ranks 2 --transport processes --checkpoint 10s --time-limit 2h',
    'molotof run relax.ts --ranks 2 --checkpoint every:50 --resume      # after a crash',
    'molotof run relax.ts --ranks 2 --checkpoint every:50 --resume-or-start   # in a batch loop',
    'molotof run relax.ts --ranks 2 --memory-checkpoint every:5 --checkpoint every:50',
    'molotof run relax.ts --ranks 2 --transport processes --checkpoint every:20 --spares 1',
    'molotof run relax.ts --ranks 4 --checkpoint 30s --log events > run.log 2>&1   # a batch log',
    'molotof run --help relax.ts                                        # its options',
  ],
}

/** `molotof run --help [program]`: the run options, and the program's own when one is named. */
async function runHelp(program: string | undefined): Promise<string> {
  const sections: { title: string; specs: OptionSpecs | string }[] = [{ title: 'Options', specs: RUN_OPTIONS }]
  if (program) {
    const d = await describe(program)
    sections.push({ title: 'Program options', specs: `  ${d.name}${d.description ? `: ${d.description}` : ''}\n\n${d.optionsHelp}` })
  }
  return formatHelp({ ...RUN_HELP, sections })
}

export async function runCommand(argv: readonly string[], out: (s: string) => void, err: (s: string) => void = out): Promise<number> {
  const { values: f, program, programArgv } = parseProgramCommand(RUN_OPTIONS, argv)
  if (f.help) {
    out(await runHelp(program))
    return 0
  }
  if (!program) throw new ConfigError('molotof run: name the program file to run (see molotof run --help)')
  const resume = `molotof run ${[program, ...argv.filter((a) => a !== program && !/^--(no-)?(resume|resume-or-start|fresh)(=|$)/.test(a))].join(' ')} --resume`
  if (f.statusFile !== undefined && f.statusFile.trim() === '') throw new ConfigError('--status-file needs a file path (got an empty value)')
  const status = f.statusFile === undefined ? undefined : new StatusFile(resolve(f.statusFile), detectLauncher(process.env)?.node ?? 0, err)
  status?.running()
  try {
    const code = await runSupervised(f, program, programArgv, resume, out, err)
    status?.ended(code, { resume })
    return code
  } catch (e) {
    status?.ended(exitCodeOf(e), { resume, message: e instanceof Error ? e.message : String(e) })
    throw e
  }
}

/** `molotof run` once its options are read: the run under its supervisor (one node's part under a cluster launcher). */
async function runSupervised(f: RunValues, program: string, programArgv: string[], resume: string, out: (s: string) => void, err: (s: string) => void): Promise<number> {
  const level = f.quiet ? 'quiet' : f.log
  const quiet = level === 'quiet'
  const everything = level === 'all'
  const checkpoint = faultTolerance(program, f)
  checkClusterFlags(f)
  const { fixed, random } = injections(f.inject)
  const timeLimit = f.timeLimit === undefined ? undefined : parseDuration(f.timeLimit)
  if (f.timeLimit !== undefined && timeLimit === undefined) {
    throw new ConfigError(`--time-limit needs a positive duration such as 2h, 30m or 90s (got "${f.timeLimit}")`)
  }
  const eventsFile = f.events === undefined ? undefined : resolve(f.events)
  if (eventsFile) {
    try {
      writeFileSync(eventsFile, '')
    } catch (e) {
      throw new ConfigError(`--events: cannot write ${eventsFile}: ${explainFsError(e)}`)
    }
  }

  // Partner copies need the node count (the launcher's, one node without one): refused before the nodes meet.
  Object.assign(checkpoint, copyLevels(f, detectLauncher(process.env)?.nodes ?? 1, program))
  // A resume reads the shared level whenever --shared-dir names it, also without --shared-checkpoint this time.
  if (checkpoint.resume && checkpoint.shared === undefined && f.sharedDir !== undefined && f.sharedDir.trim() !== '') {
    checkpoint.resumeSharedDir = join(resolve(f.sharedDir), basename(program).replace(/\.[^.]+$/, ''))
  }
  const view = new ProgressView((s) => process.stderr.write(s), process.stderr.isTTY === true)
  // Under a cluster launcher (mpirun, srun, flux) this process is one node's supervisor.
  // A launcher killed outright leaves this process orphaned: stop as if it had sent SIGTERM (a node other than 0
  // passes it to node 0, which stops every node with a checkpoint).
  let onLauncherGone = (why: string) => {
    view.line(`${why}: checkpointing and stopping`)
    process.kill(process.pid, 'SIGTERM')
  }
  const stopLauncherWatch = watchLauncher((why) => onLauncherGone(why), process.env, parentAtCliStart())
  const cluster = await joinCluster(f, program, clusterSettings(f, programArgv), checkpoint.dir, (text) => view.line(text))
  if (cluster?.kind === 'agent') {
    stopLauncherWatch?.()
    return cluster.code
  }
  const leader = cluster?.leader
  const ranks = leader ? leader.size : f.ranks
  const transport = leader ? 'tcp' : f.transport
  const starter: GroupStarterOption = { startGroup: leader?.startGroup }
  const supervisor = new Supervisor(program, {
    ...starter,
    ranks,
    transport,
    argv: programArgv,
    checkpoint,
    inject: fixed,
    injectRandom: random,
    restarts: f.restarts,
    spares: f.spares,
    keepSurvivors: f.keepSurvivors,
    heartbeatMs: f.heartbeat,
    hangTimeoutMs: f.hangTimeout,
    timeLimitMs: timeLimit === undefined ? undefined : timeLimit * 1000,
    onLog: (_rank, text) => {
      // A batch log (--log events) keeps, of the rank lines, the warnings and a resume that started afresh.
      if (everything || (level === 'events' && EVENT_LINES.some((p) => text.startsWith(p)))) {
        view.clear()
        out(text)
      }
    },
    onCheckpoint: (e) => {
      if (!everything) return
      const background = e.level === 'partner' || e.level === 'shared' ? 'copied' : 'flushed'
      const how = e.level === 'memory' ? `in ${e.ms.toFixed(1)} ms` : e.stallMs === 0 ? `${background} in the background in ${e.ms.toFixed(0)} ms` : `in ${e.ms.toFixed(0)} ms`
      view.line(`checkpoint ${e.seq} committed to ${e.level}: skeleton ${e.skeleton}, step ${e.step}, ${formatSize(e.totalBytes)} on ${ranks} rank(s) ${how}`)
    },
    onEvent: (e) => {
      if (eventsFile) appendFileSync(eventsFile, JSON.stringify({ time: new Date().toISOString(), ...e }) + '\n')
      if (everything || (level === 'events' && e.event !== 'progress')) view.event(e)
    },
  })
  let firstStopAt: number | undefined
  const onSignal = (sig: NodeJS.Signals) => {
    const now = performance.now()
    // A copy of the same stop (a group signal forwarded again by a wrapper such as npm exec): not a second signal.
    if (firstStopAt !== undefined && now - firstStopAt < SAME_STOP_MS) return
    firstStopAt ??= now
    if (supervisor.preempt(sig) === 'immediate') view.line(`${sig} again: stopping at once`)
  }
  // A stop asked for elsewhere (another node's copy of the batch system's signal, the death of the wrapper that
  // started this process): only the first counts, it never escalates to a stop at once.
  const onStopRequest = (why: string, say?: string) => {
    if (firstStopAt !== undefined) return
    firstStopAt = performance.now()
    if (say) view.line(say)
    supervisor.preempt(why)
  }
  const onUsr1 = () => {
    view.line('SIGUSR1: checkpoint requested')
    supervisor.requestCheckpoint()
  }
  process.on('SIGTERM', onSignal)
  process.on('SIGINT', onSignal)
  process.on('SIGUSR1', onUsr1)
  for (const sig of takeHeldStopSignals()) onSignal(sig)
  // Under a cluster launcher the parent is the launcher's process (watched above): npm's variables come from outside it.
  const stopWatch = stopLauncherWatch ? undefined : watchWrapper((why) => onStopRequest(why, `${why}: checkpointing and stopping`), process.env, parentAtCliStart())
  if (leader) leader.onPreempt = (why) => onStopRequest(why)
  onLauncherGone = (why) => onStopRequest(why, `${why}: checkpointing and stopping`)
  let code: number = EXIT.failed
  try {
    const r = await supervisor.run()
    view.clear()
    if (r.kind === 'preempted') {
      const where = r.seq === undefined ? 'no checkpoint could be taken' : `checkpoint ${r.seq} (skeleton ${r.skeleton}, step ${r.step}) in ${r.checkpointDir}`
      err(`preempted: ${where}.\nResume with: ${resume}`)
      return (code = EXIT.preempted)
    }
    if (f.json) out(JSON.stringify(r.value, jsonReplacer, 2))
    else out(r.text ?? JSON.stringify(r.value, jsonReplacer, 2))
    if (!quiet && !f.json) {
      const restarts = r.restarts > 0 ? `, ${r.restarts} restart${r.restarts > 1 ? 's' : ''}` : ''
      const nodes = cluster?.kind === 'leader' ? `${cluster.place.nodes} node${cluster.place.nodes > 1 ? 's' : ''} (${cluster.place.launcher}), ` : ''
      out(`(${nodes}${ranks} rank${ranks > 1 ? 's' : ''}, ${transport}, wall ${(r.wallMs / 1000).toFixed(3)} s${restarts})`)
    }
    return (code = EXIT.done)
  } catch (e) {
    code = exitCodeOf(e)
    throw e
  } finally {
    process.off('SIGTERM', onSignal)
    process.off('SIGINT', onSignal)
    process.off('SIGUSR1', onUsr1)
    stopWatch?.()
    stopLauncherWatch?.()
    // Every other node exits with the same code.
    await leader?.finish(code)
  }
}

/** The settings every node of a cluster run must share (compared at the rendezvous, named in a refusal). */
function clusterSettings(f: RunValues, programArgv: readonly string[]): Record<string, unknown> {
  return {
    'program options': programArgv.join(' '),
    'checkpoint policy': f.checkpoint,
    'checkpoint directory': f.checkpointDir ?? '(default)',
    keep: f.keep,
    'async checkpoints': f.asyncCheckpoints,
    compress: f.compress,
    resume: f.resume,
    'resume or start': f.resumeOrStart,
    restarts: f.restarts,
    heartbeat: f.heartbeat,
    'hang timeout': f.hangTimeout,
    inject: f.inject,
    'time limit': f.timeLimit,
    'node timeout': f.nodeTimeout,
    'partner copies': f.partnerCopies,
    'shared checkpoint': f.sharedCheckpoint,
  }
}

/** Always on under the supervisor: restarts and preemption need somewhere to checkpoint to. */
function faultTolerance(program: string, f: RunValues): FaultToleranceConfig {
  // resolve('') is the current directory: an empty value is a mistake (an unset variable), not a choice.
  if (f.checkpointDir !== undefined && f.checkpointDir.trim() === '') throw new ConfigError('--checkpoint-dir needs a directory path (got an empty value)')
  const resume = f.resume || f.resumeOrStart
  if (f.allowCodeChange && !resume) throw new ConfigError('--allow-code-change applies to a resume: add --resume')
  if (f.fresh && resume) throw new ConfigError(`--fresh discards the checkpoints that ${f.resume ? '--resume' : '--resume-or-start'} would continue from: give one or the other`)
  const dir = f.checkpointDir ?? join('.molotof', basename(program).replace(/\.[^.]+$/, ''))
  checkDirTemplate(dir)
  const ft: FaultToleranceConfig = {
    dir: resolve(dir),
    policy: policyFor('--checkpoint', f.checkpoint),
    keep: f.keep,
    resume,
    fresh: f.fresh,
    allowCodeChange: f.allowCodeChange,
    ...(resume ? { resumeRequest: f.resume ? ('required' as const) : ('or-start' as const) } : {}),
  }
  // --memory-dir alone: where a resume looks for the earlier run's memory level (this run keeps none).
  const memoryDirToRead = f.memoryDir !== undefined && f.memoryCheckpoint === undefined && !f.asyncCheckpoints
  if (memoryDirToRead && !resume) {
    throw new ConfigError('--memory-dir names the memory level\'s directory: give --memory-checkpoint too (e.g. every:5), or --resume to read an earlier run\'s memory level there')
  }
  if (f.memoryCheckpoint !== undefined || f.asyncCheckpoints) {
    // --async-checkpoints is a memory level with no policy of its own: disk checkpoints go through RAM.
    const policy = f.memoryCheckpoint === undefined ? ({ kind: 'off' } as const) : policyFor('--memory-checkpoint', f.memoryCheckpoint)
    if (f.memoryDir !== undefined) checkDirTemplate(f.memoryDir)
    const memoryDir = f.memoryDir ?? memoryDirFor(ft.dir) + placeholdersOf(dir)
    checkMemoryDirectory(memoryDir, dir, f.memoryDir === undefined ? "the memory level's directory" : '--memory-dir')
    ft.memory = { policy, dir: resolve(memoryDir) }
  }
  if (f.compress) {
    // Compressing at the checkpoint point would lengthen the stall: only a background flush compresses.
    if (!ft.memory) throw new ConfigError('--compress compresses disk checkpoints as they are flushed from the memory level: add --async-checkpoints (or --memory-checkpoint)')
    ft.compress = true
  }
  if (existsSync(RAM_ROOT)) {
    // The earlier run may have kept a memory level in the default place: a resume reads it too (the supervisor adds
    // the directory on record in the checkpoint directory, for one given with --memory-dir), a plain start is refused
    // by an unfinished run's checkpoints there, whether or not this run keeps a memory level.
    ft.resumeMemoryDirs = [memoryDirFor(ft.dir) + placeholdersOf(dir)]
  }
  if (memoryDirToRead) {
    checkDirTemplate(f.memoryDir!)
    if (f.memoryDir!.trim() === '') throw new ConfigError('--memory-dir needs a directory path (got an empty value)')
    ft.resumeMemoryDirs = [...(ft.resumeMemoryDirs ?? []), resolve(f.memoryDir!)]
  }
  return ft
}

/** The default memory directory is one per disk directory: `{node}` or `{rank}` there give one per node or rank here too. */
function placeholdersOf(dir: string): string {
  return ['{node}', '{rank}'].filter((p) => dir.includes(p)).map((p) => `-${p}`).join('')
}

function injections(text: string | undefined): { fixed: Injection[]; random: RandomInjection | undefined } {
  const fixed: Injection[] = []
  let random: RandomInjection | undefined
  for (const part of (text ?? '').split(';').filter((s) => s.trim() !== '')) {
    const p = parseInjection(part)
    if (p.kind === 'fixed') fixed.push(p.at)
    else if (random) throw new ConfigError('--inject: give random at most once')
    else random = { seed: p.seed, count: p.count }
  }
  return { fixed, random }
}

function jsonReplacer(_k: string, v: unknown): unknown {
  if (ArrayBuffer.isView(v)) return `<${v.constructor.name} of ${(v as Float64Array).length}>`
  return v
}

/** A policy flag's value, refused naming the flag. */
function policyFor(flag: string, value: string): ReturnType<typeof parsePolicy> {
  try {
    return parsePolicy(value)
  } catch (e) {
    if (e instanceof ConfigError) throw new ConfigError(`${flag}: ${e.message}`)
    throw e
  }
}
