import { appendFileSync, existsSync, writeFileSync } from 'node:fs'
import { basename, join, resolve } from 'node:path'
import { parseDuration } from '../checkpoint/policy/duration.js'
import { parsePolicy } from '../checkpoint/policy/policy.js'
import { explainFsError } from '../checkpoint/store/fs-errors.js'
import type { FaultToleranceConfig } from '../checkpoint/config.js'
import { checkMemoryDirectory, memoryDirFor, RAM_ROOT } from '../checkpoint/store/memory-level.js'
import { ConfigError, RestartBudgetExhaustedError } from '../errors.js'
import { TRANSPORTS } from '../runtime/group.js'
import { checkDirTemplate, detectLauncher } from '../runtime/cluster-env.js'
import { parseInjection, type Injection, type RandomInjection } from '../runtime/inject.js'
import { describe } from '../runtime/launch/launcher.js'
import { MIN_HEARTBEAT_MS, RUN_DEFAULTS } from '../runtime/launch/run-options.js'
import { Supervisor, type GroupStarterOption, type SuperviseOptions, type SuperviseResult } from '../runtime/launch/supervisor.js'
import type { LogKind } from '../runtime/protocol.js'
import type { ClusterLeader, NodeLoss, StandDown } from '../runtime/cluster/cluster.js'
import type { Takeover } from '../runtime/launch/supervisor.js'
import { option, type OptionSpecs, type OptionValues } from '../skeletons/options.js'
import { HELP_OPTION, parseProgramCommand } from './args.js'
import { checkRedundancy } from '../checkpoint/redundancy/sets.js'
import { CLUSTER_OPTIONS, checkClusterFlags, checkSpareCopies, checkSpareNodes, copyLevels, joinCluster, type ClusterRole } from './cluster-run.js'
import { EXIT, exitCodeOf } from './exit-codes.js'
import { formatHelp, RUN_EXIT_CODES, STARTER_EXAMPLES_FROM } from './help.js'
import { ProgressView } from './progress.js'
import { StatusFile } from './status-file.js'
import { formatSize } from '../util/bytes.js'
import { parentAtCliStart, SAME_STOP_MS, takeHeldStopSignals } from './stop-signals.js'
import { watchLauncher, watchWrapper } from './wrapper-watch.js'

/** What `molotof run` prints (--log): everything, the events a batch log keeps, or the result only. */
const LOG_LEVELS = ['all', 'events', 'quiet'] as const

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
  incremental: option.boolean(false, 'incremental disk checkpoints: a disk checkpoint flushed from the memory level stores only the 64 KiB blocks changed since the previous one (needs --memory-checkpoint or --async-checkpoints and a disk policy; with --compress their blocks are compressed)'),
  fullEvery: option.int(undefined, 'with --incremental: a full disk checkpoint every K (default 8; also when more than half of the bytes changed)', { min: 1 }),
  resume: option.boolean(false, 'resume from the newest checkpoint valid on every rank, found on any level or copy (refused, exit 2, when there is none)'),
  resumeOrStart: option.boolean(false, 'resume when there is a checkpoint of the run to resume, else start afresh (saying which it did)'),
  fresh: option.boolean(false, 'discard the checkpoints of an earlier, unfinished run found in the checkpoint directory, then start afresh'),
  allowCodeChange: option.boolean(false, "with --resume: resume even though the program's code changed since the checkpoint (a warning instead of a refusal)"),
  restarts: option.int(RUN_DEFAULTS.restarts, 'automatic restarts after failures (the restart budget)', { min: 0 }),
  spares: option.int(RUN_DEFAULTS.spares, "warm spares: rank processes (threads) started ahead with the program loaded; a failed rank is replaced by one (an idle spare process holds a rank's large buffers, touched ahead)", { min: 0 }),
  keepSurvivors: option.boolean(RUN_DEFAULTS.keepSurvivors, 'with --spares, and on every node of a cluster run: survivors of a failure run the program again in their own process (--no-keep-survivors: replaced by spares or new processes too)'),
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
    const code = await runSupervised(f, program, programArgv, resume, out, err, (how) => (how === 'dropped' ? status?.disown() : status?.yieldToOthers()))
    status?.ended(code, { resume })
    return code
  } catch (e) {
    // Gave up after failures: the checkpoints it wrote are there to resume from once the cause is fixed.
    const resumeAfterFix = e instanceof RestartBudgetExhaustedError
    if (resumeAfterFix) err(`Once the cause is fixed, resume from the last complete checkpoint with: ${resume}`)
    status?.ended(exitCodeOf(e), { resume, message: e instanceof Error ? e.message : String(e), resumeAfterFix })
    throw e
  }
}

/** `molotof run` once its options are read: the run under its supervisor (one node's part under a cluster launcher). */
async function runSupervised(
  f: RunValues,
  program: string,
  programArgv: string[],
  resume: string,
  out: (s: string) => void,
  err: (s: string) => void,
  /** This node was dropped from the run as lost: the run's outcome is the others' to write. */
  onDropped: (how: StandDown) => void,
): Promise<number> {
  const level: LogLevel = f.quiet ? 'quiet' : f.log
  const setup = readRunSetup(f, program)
  const view = new ProgressView((s) => process.stderr.write(s), process.stderr.isTTY === true)
  const stops = new StopRequests(view)
  // Under a cluster launcher (mpirun, srun, flux) this process is one node's supervisor.
  const cluster = await joinCluster(f, program, clusterSettings(f, programArgv), setup.checkpoint.dir, (text) => view.line(text), onDropped)
  if (cluster?.kind === 'agent') {
    stops.close()
    return cluster.code
  }
  const leader = cluster?.leader
  const compression = compressionNote(setup.checkpoint)
  if (compression !== undefined && level !== 'quiet') out(`note: ${compression}`)
  const shape: RunShape = { ranks: leader ? leader.size : f.ranks, transport: leader ? 'tcp' : f.transport, cluster }
  const supervisor = new Supervisor(program, { ...supervisorOptions(f, setup, shape, programArgv), ...runOutput(level, view, out, setup.eventsFile, shape.ranks) })
  if (leader) {
    // Every node is told where the run is, for a successor should this node be lost; a minority disowns the outcome.
    leader.runState = () => supervisor.handover()
    leader.onMinority = () => onDropped('minority')
  }
  stops.listen(supervisor, leader)
  let code: number = EXIT.failed
  try {
    const r = await supervisor.run()
    view.clear()
    code = reportRun(r, level, f.json, shape, resume, out, err)
    return code
  } catch (e) {
    code = exitCodeOf(e)
    throw e
  } finally {
    stops.close()
    // Every other node exits with the same code.
    await leader?.finish(code)
  }
}

/** What `--log` prints (see LOG_LEVELS). */
type LogLevel = (typeof LOG_LEVELS)[number]

/** The kinds of rank lines `--log events` keeps (see LogKind): what a batch log must tell. */
const EVENT_LINE_KINDS: readonly LogKind[] = ['warning', 'notice']

/** Whether `--log <level>` prints a rank's line of this kind: every line under `all`; under `events` the warnings and notices. */
export function printsLine(level: LogLevel, kind: LogKind | undefined): boolean {
  return level === 'all' || (level === 'events' && kind !== undefined && EVENT_LINE_KINDS.includes(kind))
}

/** The run's settings read from the options, each refused naming its option before anything starts. */
interface RunSetup {
  checkpoint: FaultToleranceConfig
  fixed: Injection[]
  random: RandomInjection | undefined
  timeLimitMs: number | undefined
  /** Where every event goes as a JSON line (--events), emptied at the start. */
  eventsFile: string | undefined
}

/** The options read and checked, in the order their refusals are given; the --events file emptied (refused when it cannot be written). */
function readRunSetup(f: RunValues, program: string): RunSetup {
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
  // Spare nodes carry no ranks: the copies are kept among the working nodes.
  const launcherNodes = detectLauncher(process.env)?.nodes
  checkSpareNodes(f.spareNodes, launcherNodes)
  Object.assign(checkpoint, copyLevels(f, (launcherNodes ?? 1) - f.spareNodes, program))
  checkSpareCopies(f.spareNodes, checkpoint)
  if (checkpoint.xor) checkRedundancy(checkpoint.xor.setSize * checkpoint.xor.ranksPerNode, checkpoint)
  // A resume reads the shared level whenever --shared-dir names it, also without --shared-checkpoint this time.
  if (checkpoint.resume && checkpoint.shared === undefined && f.sharedDir !== undefined && f.sharedDir.trim() !== '') {
    checkpoint.resumeSharedDir = join(resolve(f.sharedDir), basename(program).replace(/\.[^.]+$/, ''))
  }
  return { checkpoint, fixed, random, timeLimitMs: timeLimit === undefined ? undefined : timeLimit * 1000, eventsFile }
}

/** How the run is spread: its ranks and transport (a cluster run's: every node's ranks over TCP), and this node's part. */
interface RunShape {
  ranks: number
  transport: RunValues['transport'] | 'tcp'
  cluster: ClusterRole | undefined
}

/** The supervisor's options from the command line; a cluster run's ranks started on every node by its leader. */
function supervisorOptions(f: RunValues, setup: RunSetup, shape: RunShape, programArgv: string[]): SuperviseOptions {
  const leader = shape.cluster?.leader
  const starter: GroupStarterOption = leader ? { startGroup: leader.startGroup, groupSize: () => leader.size, origin: () => leader.lastOrigin } : {}
  if (shape.cluster?.kind === 'successor') starter.takeover = takeoverOf(shape.cluster, f.ranksPerNode)
  return {
    ...starter,
    ranks: shape.ranks,
    transport: shape.transport,
    argv: programArgv,
    checkpoint: setup.checkpoint,
    inject: setup.fixed,
    injectRandom: setup.random,
    restarts: f.restarts,
    spares: f.spares,
    keepSurvivors: f.keepSurvivors,
    heartbeatMs: f.heartbeat,
    hangTimeoutMs: f.hangTimeout,
    timeLimitMs: setup.timeLimitMs,
  }
}

/** Where the lost coordinator left the run, for this node's supervisor (see Takeover). */
function takeoverOf({ leader, place, succession: s }: Extract<ClusterRole, { kind: 'successor' }>, ranksPerNode: number): Takeover {
  const { attempt, failures, preempt, fired } = s.view.run
  const rank = Math.max(0, s.view.membership.slots.indexOf(s.lost)) * ranksPerNode
  const message = `node ${s.lost} was lost (${s.why}); node ${place.node} took the coordinator's role over`
  return { attempt, failures, preempt, fired, loss: { rank, message, lostAt: s.lostAt }, home: { node: place.node, rank: Math.max(0, leader.membership.slotOf(place.node)) * ranksPerNode } }
}

/** What the run prints as it goes (by --log) and writes to --events. */
function runOutput(level: LogLevel, view: ProgressView, out: (s: string) => void, eventsFile: string | undefined, ranks: number): Pick<SuperviseOptions, 'onLog' | 'onCheckpoint' | 'onEvent'> {
  const everything = level === 'all'
  // The rank count of the attempt running: an in-run shrink lowers it.
  let running = ranks
  return {
    onLog: (_rank, text, kind) => {
      // A batch log (--log events) keeps, of the rank lines, the warnings and a resume that started afresh.
      if (!printsLine(level, kind)) return
      view.clear()
      out(text)
    },
    onCheckpoint: (e) => {
      if (!everything) return
      const background = e.level === 'partner' || e.level === 'shared' || e.level === 'xor' ? 'copied' : 'flushed'
      const how = e.level === 'memory' ? `in ${e.ms.toFixed(1)} ms` : e.stallMs === 0 ? `${background} in the background in ${e.ms.toFixed(0)} ms` : `in ${e.ms.toFixed(0)} ms`
      view.line(`checkpoint ${e.seq} committed to ${e.level}: skeleton ${e.skeleton}, step ${e.step}, ${formatSize(e.totalBytes)} on ${running} rank(s) ${how}`)
    },
    onEvent: (e) => {
      if (e.event === 'start') running = e.ranks
      if (eventsFile) appendFileSync(eventsFile, JSON.stringify({ time: new Date().toISOString(), ...e }) + '\n')
      if (everything || (level === 'events' && e.event !== 'progress')) view.event(e)
    },
  }
}

/** The run's end as the user reads it: the result (and a summary line), or where a preempted run can resume from; its exit code. */
function reportRun(r: SuperviseResult, level: LogLevel, json: boolean, shape: RunShape, resume: string, out: (s: string) => void, err: (s: string) => void): number {
  if (r.kind === 'preempted') {
    const where = r.seq === undefined ? 'no checkpoint could be taken' : `checkpoint ${r.seq} (skeleton ${r.skeleton}, step ${r.step}) in ${r.checkpointDir}`
    err(`preempted: ${where}.\nResume with: ${resume}`)
    return EXIT.preempted
  }
  if (json) out(JSON.stringify(r.value, jsonReplacer, 2))
  else out(r.text ?? JSON.stringify(r.value, jsonReplacer, 2))
  if (level !== 'quiet' && !json) {
    const { transport, cluster } = shape
    const restarts = r.restarts > 0 ? `, ${r.restarts} restart${r.restarts > 1 ? 's' : ''}` : ''
    const lost = cluster?.leader?.lossCount ?? 0
    const losses = lost > 0 ? `, ${lost} node${lost > 1 ? 's' : ''} lost` : ''
    const place = cluster?.kind === 'agent' ? undefined : cluster?.place
    const nodes = place ? `${place.nodes} node${place.nodes > 1 ? 's' : ''} (${place.launcher}), ` : ''
    out(`(${nodes}${r.ranks} rank${r.ranks > 1 ? 's' : ''}, ${transport}, wall ${(r.wallMs / 1000).toFixed(3)} s${restarts}${losses})`)
  }
  return EXIT.done
}

/** A node lost in a cluster run, as events: `node-lost`, and the new `membership` unless the run cannot go on. */
function reportNodeLoss(supervisor: Supervisor, leader: ClusterLeader, loss: NodeLoss): void {
  const { change: c } = loss
  const ranks = c.kind === 'spare-lost' ? [] : [...c.ranks]
  const spare = c.kind === 'replaced' ? { spare: c.spare, sparesLeft: c.sparesLeft } : c.kind === 'spare-lost' ? { sparesLeft: c.sparesLeft } : c.kind === 'shrunk' ? { size: c.size } : {}
  supervisor.reportClusterEvent({ event: 'node-lost', node: c.node, why: loss.why, skeleton: loss.skeleton, step: loss.step, ranks, outcome: c.kind, ...spare })
  if (c.kind !== 'unrecoverable') supervisor.reportClusterEvent({ event: 'membership', epoch: c.epoch, working: leader.membership.placement(), spares: [...leader.membership.spares] })
}

/**
 * The requests that stop the run with a checkpoint, wherever they come from: this process's SIGTERM/SIGINT (a
 * second one stops at once), the death of the cluster launcher or of the npm wrapper that started this process,
 * another node's stop; and SIGUSR1, a checkpoint and go on.
 */
class StopRequests {
  private firstStopAt: number | undefined
  private supervisor: Supervisor | undefined
  private readonly stopLauncherWatch: (() => void) | undefined
  private stopWrapperWatch: (() => void) | undefined
  private onLauncherGone: (why: string) => void

  /** Watches the cluster launcher from the start: its rendezvous may be what waits when it dies. */
  constructor(private readonly view: ProgressView) {
    // A launcher killed outright leaves this process orphaned: stop as if it had sent SIGTERM (a node other than 0
    // passes it to node 0, which stops every node with a checkpoint).
    this.onLauncherGone = (why) => {
      view.line(`${why}: checkpointing and stopping`)
      process.kill(process.pid, 'SIGTERM')
    }
    this.stopLauncherWatch = watchLauncher((why) => this.onLauncherGone(why), process.env, parentAtCliStart())
  }

  /** From now on every request goes to the supervisor; the signals held while the CLI started are applied first. */
  listen(supervisor: Supervisor, leader: ClusterLeader | undefined): void {
    this.supervisor = supervisor
    process.on('SIGTERM', this.onSignal)
    process.on('SIGINT', this.onSignal)
    process.on('SIGUSR1', this.onUsr1)
    for (const sig of takeHeldStopSignals()) this.onSignal(sig)
    // Under a cluster launcher the parent is the launcher's process (watched above): npm's variables come from outside it.
    if (!this.stopLauncherWatch) this.stopWrapperWatch = watchWrapper((why) => this.onStopRequest(why, `${why}: checkpointing and stopping`), process.env, parentAtCliStart())
    if (leader) {
      leader.onPreempt = (why) => this.onStopRequest(why)
      // A successor's losses were decided as it took over, before this supervisor existed.
      for (const loss of leader.losses) reportNodeLoss(supervisor, leader, loss)
      leader.onNodeLost = (loss) => reportNodeLoss(supervisor, leader, loss)
    }
    this.onLauncherGone = (why) => this.onStopRequest(why, `${why}: checkpointing and stopping`)
  }

  private readonly onSignal = (sig: NodeJS.Signals): void => {
    const now = performance.now()
    // A copy of the same stop (a group signal forwarded again by a wrapper such as npm exec): not a second signal.
    if (this.firstStopAt !== undefined && now - this.firstStopAt < SAME_STOP_MS) return
    this.firstStopAt ??= now
    if (this.supervisor!.preempt(sig) === 'immediate') this.view.line(`${sig} again: stopping at once`)
  }

  // A stop asked for elsewhere (another node's copy of the batch system's signal, the death of the wrapper that
  // started this process): only the first counts, it never escalates to a stop at once.
  private onStopRequest(why: string, say?: string): void {
    if (this.firstStopAt !== undefined) return
    this.firstStopAt = performance.now()
    if (say) this.view.line(say)
    this.supervisor!.preempt(why)
  }

  private readonly onUsr1 = (): void => {
    this.view.line('SIGUSR1: checkpoint requested')
    this.supervisor!.requestCheckpoint()
  }

  close(): void {
    process.off('SIGTERM', this.onSignal)
    process.off('SIGINT', this.onSignal)
    process.off('SIGUSR1', this.onUsr1)
    this.stopWrapperWatch?.()
    this.stopLauncherWatch?.()
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
    incremental: f.incremental ? (f.fullEvery ?? DEFAULT_FULL_EVERY) : false,
    resume: f.resume,
    'resume or start': f.resumeOrStart,
    restarts: f.restarts,
    heartbeat: f.heartbeat,
    'hang timeout': f.hangTimeout,
    inject: f.inject,
    'time limit': f.timeLimit,
    'node timeout': f.nodeTimeout,
    'partner copies': f.partnerCopies,
    'spare nodes': f.spareNodes,
    redundancy: f.redundancy,
    'shared checkpoint': f.sharedCheckpoint,
  }
}

/**
 * What --compress does when the run writes no disk checkpoint on its own
 * (--checkpoint off, a memory level only): memory checkpoints are never
 * compressed, only the disk checkpoint a stop writes is. Said, not refused.
 */
function compressionNote(ft: FaultToleranceConfig): string | undefined {
  if (!ft.compress || !('kind' in ft.policy) || ft.policy.kind !== 'off') return undefined
  return '--compress with --checkpoint off: memory checkpoints are never compressed; only the disk checkpoint a stop writes (SIGTERM, SIGINT, --time-limit) is. Give a disk policy (e.g. --checkpoint every:50) for compressed disk checkpoints as the run goes'
}

/** `--incremental` without `--full-every`: a full disk checkpoint every 8. */
const DEFAULT_FULL_EVERY = 8

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
  if (f.fullEvery !== undefined && !f.incremental) throw new ConfigError('--full-every sets how often an incremental run writes a full disk checkpoint: add --incremental')
  if (f.incremental) {
    // Deltas are made by the background flush from the memory copy (its block digests off the stall), on the disk level only.
    if (!ft.memory) throw new ConfigError('--incremental stores disk checkpoints flushed from the memory level as deltas: add --async-checkpoints (or --memory-checkpoint)')
    if ('kind' in ft.policy && ft.policy.kind === 'off') throw new ConfigError('--incremental stores disk checkpoints as deltas, and --checkpoint off writes none: give a disk policy (e.g. --checkpoint every:50)')
    ft.incremental = { every: f.fullEvery ?? DEFAULT_FULL_EVERY }
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
