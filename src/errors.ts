/**
 * The error catalogue. Every error molotof throws on purpose is a
 * `MolotofError` subclass from this file with a stable `code`, so callers can
 * branch on `err.code` (or `instanceof`) and users get one clear sentence that
 * says what is wrong and, where possible, what to do.
 *
 * ```ts
 * import { launch, RankFailedError } from 'molotof'
 * try { await launch('examples/jacobi/jacobi.ts', { ranks: 4 }) }
 * catch (e) { if (e instanceof RankFailedError) console.error(e.rank, e.step) }
 * ```
 *
 * Each class also says what it means for a script (`exit`, which the CLI
 * turns into its exit status) and whether starting the ranks again can help
 * (`restartable`: a supervisor restarts only then). An error thrown in a rank
 * crosses to the launcher as its code and fields (`errorRecord`) and is rebuilt
 * there as the same class (`reviveError`). A new class goes into `CATALOGUE`
 * at the end of this file.
 */

/**
 * What an error tells a script about the run: `failed` (exit 1), `bad-input`
 * (exit 2: refused before compute), `preempted` (exit 75: resumable),
 * `node-lost` (exit 76: a node of a cluster run was lost; run the launcher
 * again with --resume).
 */
export type ExitClass = 'failed' | 'bad-input' | 'preempted' | 'node-lost'

/**
 * The base of every error molotof throws on purpose (the catalogue is this
 * file): `code` is stable, `exit` says what it means for a script, and
 * `restartable` whether starting the ranks again can help.
 *
 * ```ts
 * try {
 *   await launch('examples/jacobi/jacobi.ts', { ranks: 4, argv: ['--n', '512'] })
 * } catch (e) {
 *   if (e instanceof RankFailedError) console.error(`rank ${e.rank} failed at step ${e.step}`)
 *   else if (e instanceof MolotofError && e.exit === 'bad-input') console.error(e.message)   // fix the command
 *   else throw e
 * }
 * ```
 */
export class MolotofError extends Error {
  /** What a run ending with this class of error tells a script (subclasses override it). */
  static readonly exit: ExitClass = 'failed'
  /** Whether starting every rank again from the last checkpoint can help; a supervisor restarts only then. */
  static readonly restartable: boolean = true
  readonly code: string
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.code = code
    this.name = new.target.name
  }
  /** The `exit` of this error's class. */
  get exit(): ExitClass {
    return (this.constructor as typeof MolotofError).exit
  }
  /** The `restartable` of this error's class. */
  get restartable(): boolean {
    return (this.constructor as typeof MolotofError).restartable
  }
}

/**
 * Invalid user input: options, program definitions, arguments to public APIs.
 * A program that calls an API wrongly is bad input too: the program must change; a restart cannot help.
 */
export class ConfigError extends MolotofError {
  static readonly code = 'E_CONFIG'
  static override readonly exit: ExitClass = 'bad-input'
  static override readonly restartable: boolean = false
  constructor(message: string, options?: { cause?: unknown }) {
    super(ConfigError.code, message, options)
  }
}

/** The partition methods of a domain describe an impossible layout, or ranks disagree on it. */
export class PartitionError extends MolotofError {
  static readonly code = 'E_PARTITION'
  static override readonly exit: ExitClass = 'bad-input'
  static override readonly restartable: boolean = false
  constructor(message: string) {
    super(PartitionError.code, message)
  }
}

/** The program file could not be loaded or does not export a molotof program. */
export class ProgramLoadError extends MolotofError {
  static readonly code = 'E_PROGRAM'
  static override readonly exit: ExitClass = 'bad-input'
  static override readonly restartable: boolean = false
  constructor(message: string, options?: { cause?: unknown }) {
    super(ProgramLoadError.code, message, options)
  }
}

/** Where in the program a rank was when something happened. */
export interface RankLocation {
  rank: number
  /** Index of the skeleton in the program (0-based), or -1 outside any skeleton. */
  skeleton: number
  /** Superstep index inside that skeleton, or -1 outside the loop. */
  step: number
  /** `init`, `calculate`, `route`, `checkpoint`, `swap`, `light` … */
  phase: string
}

/** A rank threw, exited or was killed; the run was stopped on every rank. */
export class RankFailedError extends MolotofError implements RankLocation {
  static readonly code = 'E_RANK'
  readonly rank: number
  readonly skeleton: number
  readonly step: number
  readonly phase: string
  readonly remoteStack: string | undefined
  /** `cause`: the error the rank threw, rebuilt as its own class when it is one of the catalogue's. */
  constructor(loc: RankLocation, reason: string, remoteStack?: string, options?: { cause?: unknown }) {
    super(RankFailedError.code, `rank ${loc.rank} failed ${whereIs(loc)}: ${reason}`, options)
    this.rank = loc.rank
    this.skeleton = loc.skeleton
    this.step = loc.step
    this.phase = loc.phase
    this.remoteStack = remoteStack
  }
}

/**
 * Checkpoints could not be written, committed or read (disk full, permissions,
 * I/O errors …): the run failed. Starting again would fail the same way, so a
 * supervisor does not restart.
 */
export class CheckpointError extends MolotofError {
  static readonly code = 'E_CHECKPOINT'
  static override readonly restartable: boolean = false
  constructor(message: string, options?: { cause?: unknown }) {
    super(CheckpointError.code, message, options)
  }
}

/** A rank file failed validation (size, magic, header or checksum). */
export class CheckpointCorruptError extends MolotofError {
  static readonly code = 'E_CHECKPOINT_CORRUPT'
  readonly file: string
  readonly reason: string
  constructor(file: string, reason: string) {
    super(CheckpointCorruptError.code, `checkpoint file ${file} is not usable: ${reason}`)
    this.file = file
    this.reason = reason
  }
}

/**
 * The checkpoints do not belong to this program: another program wrote them,
 * or another version of it that registers other entries. Refused before compute.
 */
export class CheckpointMismatchError extends MolotofError {
  static readonly code = 'E_CHECKPOINT_MISMATCH'
  static override readonly exit: ExitClass = 'bad-input'
  static override readonly restartable: boolean = false
  constructor(message: string) {
    super(CheckpointMismatchError.code, message)
  }
}

/** One difference between the settings stored in a checkpoint and the current ones. */
export interface SettingDifference {
  name: string
  old: unknown
  new: unknown
}

/** Resuming with other settings or another rank count than the checkpoint's. */
export class SettingsMismatchError extends MolotofError {
  static readonly code = 'E_SETTINGS'
  static override readonly exit: ExitClass = 'bad-input'
  static override readonly restartable: boolean = false
  readonly differences: readonly SettingDifference[]
  constructor(differences: readonly SettingDifference[]) {
    const lines = differences.map((d) => `  ${d.name}: ${fmt(d.old)} → ${fmt(d.new)}`)
    super(
      SettingsMismatchError.code,
      `cannot resume: the checkpoint was taken with other settings\n${lines.join('\n')}\n` +
        'Run with the checkpoint\'s settings, or start afresh without --resume.',
    )
    this.differences = differences
  }
}

/** Replayed light code did not rebuild the state the checkpoint recorded: a program error, which a restart would repeat. */
export class ReplayDivergenceError extends MolotofError {
  static readonly code = 'E_DIVERGENCE'
  static override readonly restartable: boolean = false
  readonly value: string
  /** `advice`: what to change, when the divergence has a more precise cause than non-deterministic light code. */
  constructor(value: string, detail: string, advice = 'Light code must be deterministic; keep light state immutable (immer) and out of heavy phases.') {
    super(ReplayDivergenceError.code, `replay diverged: ${value} differs from the value recorded at checkpoint time (${detail}). ${advice}`)
    this.value = value
  }
}

/** Why a rank's attempt ended in failure: it threw, its thread or process exited, was killed by a signal, or stopped beating. */
export type FailureReason = 'error' | 'exit' | 'signal' | 'hang'

/** One failure the supervisor saw and recovered from (or gave up on). */
export interface FailureRecord extends RankLocation {
  attempt: number
  reason: FailureReason
  message: string
  /** From the failure (death, last heartbeat) to its detection, when known (ms). */
  detectionMs: number
}

/** The restart budget is spent; every failure is listed. */
export class RestartBudgetExhaustedError extends MolotofError {
  static readonly code = 'E_RESTARTS'
  static override readonly restartable: boolean = false
  readonly failures: readonly FailureRecord[]
  readonly budget: number
  constructor(failures: readonly FailureRecord[], budget: number) {
    // A rank's failure message starts with its place ("rank 1 failed in skeleton 0, step 4, …"): said once.
    const lines = failures.map((f) =>
      f.message.startsWith(`rank ${f.rank} failed ${whereIs(f)}`)
        ? `  attempt ${f.attempt}: ${f.message}`
        : `  attempt ${f.attempt}: rank ${f.rank} failed ${whereIs(f)}: ${f.message}`,
    )
    const last = failures.slice(-2)
    const same = last.length === 2 && last[0].rank === last[1].rank && last[0].skeleton === last[1].skeleton && last[0].step === last[1].step && last[0].phase === last[1].phase
    super(
      RestartBudgetExhaustedError.code,
      `gave up after ${failures.length} failure(s) (restart budget ${budget}):\n${lines.join('\n')}` +
        (same ? '\nThe last failures happened at the same place: this looks deterministic (a bug or bad input), not a transient fault.' : ''),
    )
    this.failures = failures
    this.budget = budget
  }
}

/** A second stop request (or a rank that died while stopping) ended the run before the ranks could checkpoint. */
export class RunStoppedError extends MolotofError {
  static readonly code = 'E_STOPPED'
  static override readonly restartable: boolean = false
  readonly why: string
  constructor(why: string) {
    super(RunStoppedError.code, `stopped (${why}) before the ranks could checkpoint; resume from the last complete checkpoint with --resume`)
    this.why = why
  }
}

/**
 * Thrown on every rank after the checkpoint a preemption asked for: the run
 * stops cleanly and can be resumed. The rank reports it to the launcher as
 * "preempted", not as a failure.
 */
export class PreemptedError extends MolotofError {
  static readonly code = 'E_PREEMPTED'
  static override readonly exit: ExitClass = 'preempted'
  static override readonly restartable: boolean = false
  /** The checkpoint taken for the preemption (undefined when none could be taken). */
  readonly seq: number | undefined
  constructor(seq: number | undefined) {
    super(PreemptedError.code, 'preempted: checkpoint taken, stopping')
    this.seq = seq
  }
}

/** Thrown on every rank by the `interrupt` setting: the run stopped on purpose after a checkpoint point and can be resumed. */
export class RunInterruptedError extends MolotofError {
  static readonly code = 'E_INTERRUPTED'
  static override readonly exit: ExitClass = 'preempted'
  static override readonly restartable: boolean = false
  readonly skeleton: number
  readonly step: number
  constructor(skeleton: number, step: number) {
    super(RunInterruptedError.code, `run interrupted after skeleton ${skeleton}, step ${step}`)
    this.skeleton = skeleton
    this.step = step
  }
}

/** Ranks could not reach each other: a peer is gone, the communicator is closed, or the ranks could not connect. */
export class CommunicationError extends MolotofError {
  static readonly code = 'E_COMM'
  constructor(message: string) {
    super(CommunicationError.code, message)
  }
}

/** molotof reached a state it should never reach: a bug in molotof, not in the program. */
export class InternalError extends MolotofError {
  static readonly code = 'E_INTERNAL'
  constructor(what: string) {
    super(InternalError.code, `${what} (this is a bug in molotof: please report it with this message)`)
  }
}

/**
 * The program's code differs from the code that wrote the checkpoint a run
 * would resume from: resuming would continue one version's state with
 * another's code. Refused unless the user allows it (`--allow-code-change`).
 */
export class CodeChangedError extends MolotofError {
  static readonly code = 'E_CODE_CHANGED'
  static override readonly exit: ExitClass = 'bad-input'
  static override readonly restartable: boolean = false
  /** The files that differ, were added or removed (as the message shows them). */
  readonly files: readonly string[]
  constructor(message: string, files: readonly string[]) {
    super(CodeChangedError.code, message)
    this.files = files
  }
}

/** Who holds a checkpoint directory's lock. */
export interface LockHolder {
  pid: number
  host: string
  /** ISO time the holder started. */
  startedAt: string
}

/** Another run is using the checkpoint directory (it holds the directory's lock). */
export class DirectoryLockedError extends MolotofError {
  static readonly code = 'E_LOCKED'
  static override readonly exit: ExitClass = 'bad-input'
  static override readonly restartable: boolean = false
  readonly dir: string
  readonly holder: LockHolder
  constructor(dir: string, holder: LockHolder, hint: string) {
    super(
      DirectoryLockedError.code,
      `the checkpoint directory ${dir} is in use by another run: pid ${holder.pid} on ${holder.host}, started ${holder.startedAt}. ${hint}`,
    )
    this.dir = dir
    this.holder = holder
  }
}

/**
 * A run started without --resume found checkpoints of an earlier, unfinished
 * run in its directory: it neither resumes from them nor discards them
 * unasked. The message says how to proceed (--resume, --fresh, another directory).
 */
export class EarlierRunError extends MolotofError {
  static readonly code = 'E_EARLIER_RUN'
  static override readonly exit: ExitClass = 'bad-input'
  static override readonly restartable: boolean = false
  readonly dir: string
  constructor(dir: string, message: string) {
    super(EarlierRunError.code, message)
    this.dir = dir
  }
}

/**
 * A resume the user asked for (`--resume`) that has nothing to resume from:
 * no checkpoint of the run on any level or copy it looked at, or only ones it
 * cannot use (each named with the reason). Refused before compute rather than
 * starting afresh unasked.
 */
export class NothingToResumeError extends MolotofError {
  static readonly code = 'E_NOTHING_TO_RESUME'
  static override readonly exit: ExitClass = 'bad-input'
  static override readonly restartable: boolean = false
  constructor(message: string) {
    super(NothingToResumeError.code, message)
  }
}

/** The checkpoint directory cannot be used (cannot be created or written, read-only file system …), found before any rank starts. */
export class CheckpointDirectoryError extends MolotofError {
  static readonly code = 'E_CHECKPOINT_DIR'
  static override readonly exit: ExitClass = 'bad-input'
  static override readonly restartable: boolean = false
  readonly dir: string
  constructor(dir: string, message: string, options?: { cause?: unknown }) {
    super(CheckpointDirectoryError.code, message, options)
    this.dir = dir
  }
}

/**
 * A node of a cluster run was lost: its supervisor fell silent for longer than
 * `--node-timeout` or its connection broke (or node 0 was lost, seen from
 * another node). The attempt ends on every surviving node; the run resumes
 * when the launcher is started again with --resume.
 */
export class NodeLostError extends MolotofError {
  static readonly code = 'E_NODE_LOST'
  static override readonly exit: ExitClass = 'node-lost'
  static override readonly restartable: boolean = false
  readonly node: number
  constructor(node: number, message: string) {
    super(NodeLostError.code, message)
    this.node = node
  }
}

/** The node supervisors of one cluster run were started differently (program, options, node count); refused at the rendezvous. */
export class NodeMismatchError extends MolotofError {
  static readonly code = 'E_NODE_MISMATCH'
  static override readonly exit: ExitClass = 'bad-input'
  static override readonly restartable: boolean = false
  readonly node: number
  readonly differences: readonly SettingDifference[]
  constructor(node: number, differences: readonly SettingDifference[]) {
    const lines = differences.map((d) => `  ${d.name}: node 0 has ${fmt(d.old)}, node ${node} has ${fmt(d.new)}`)
    super(NodeMismatchError.code, `node ${node} was started differently from node 0, refused:\n${lines.join('\n')}\nStart every node with the same program file and options.`)
    this.node = node
    this.differences = differences
  }
}

/** A catalogue class as the catalogue sees it: its code, exit class and restart rule. */
export type CatalogueClass = (abstract new (...args: never[]) => MolotofError) & {
  readonly code: string
  readonly exit: ExitClass
  readonly restartable: boolean
}

/** Every error class, for rebuilding errors that crossed from a rank (by code). */
export const CATALOGUE: readonly CatalogueClass[] = [
  ConfigError,
  PartitionError,
  ProgramLoadError,
  RankFailedError,
  CheckpointError,
  CheckpointCorruptError,
  CheckpointMismatchError,
  SettingsMismatchError,
  ReplayDivergenceError,
  RestartBudgetExhaustedError,
  RunStoppedError,
  PreemptedError,
  RunInterruptedError,
  CommunicationError,
  InternalError,
  CodeChangedError,
  DirectoryLockedError,
  EarlierRunError,
  CheckpointDirectoryError,
  NothingToResumeError,
  NodeLostError,
  NodeMismatchError,
]

/** An error as plain data: what crosses from a rank to the launcher (any transport) or between ranks. */
export interface ErrorRecord {
  name: string
  /** The catalogue code, for a MolotofError. */
  code: string | undefined
  message: string
  stack: string | undefined
  /** A MolotofError's own fields (`differences`, `rank` …), plain data only. */
  fields?: Record<string, unknown>
}

/**
 * An error as plain data that survives structured cloning (postMessage, IPC,
 * allgather), to be rebuilt with `reviveError`; without its stack when nobody
 * will read it.
 *
 * ```ts
 * control.postMessage({ type: 'error', ...errorRecord(e) })
 * ```
 */
export function errorRecord(e: unknown, withStack = true): ErrorRecord {
  if (!(e instanceof Error)) return { name: 'Error', code: undefined, message: String(e), stack: undefined }
  // Reading `stack` formats it: with Node's source maps on (tsx turns them on), tens of milliseconds the first time.
  const stack = withStack ? e.stack : undefined
  if (!(e instanceof MolotofError)) return { name: e.name, code: undefined, message: e.message, stack }
  const fields: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(e)) if (isPlainData(v)) fields[k] = v
  return { name: e.name, code: e.code, message: e.message, stack, fields }
}

/**
 * The error an `ErrorRecord` describes, as its catalogue class with its fields
 * (rebuilt without running the constructor: the message is already made). An
 * unknown code gives a MolotofError, no code a plain Error.
 *
 * ```ts
 * const e = reviveError(m)  // e instanceof SettingsMismatchError, e.differences as thrown in the rank
 * ```
 */
export function reviveError(r: ErrorRecord): Error {
  const type = r.code === undefined ? undefined : CATALOGUE.find((c) => c.code === r.code)
  const proto: object = type?.prototype ?? (r.code === undefined ? Error.prototype : MolotofError.prototype)
  const e = Object.assign(Object.create(proto) as Error, { name: r.name }, r.fields, r.code === undefined ? {} : { code: r.code })
  Object.defineProperty(e, 'message', { value: r.message, writable: true, configurable: true, enumerable: false })
  Object.defineProperty(e, 'stack', { value: r.stack ?? `${r.name}: ${r.message}`, writable: true, configurable: true, enumerable: false })
  return e
}

function isPlainData(v: unknown): boolean {
  try {
    structuredClone(v)
    return true
  } catch {
    // Not cloneable (a function, a handle): the field stays behind; the message still says what happened.
    return false
  }
}

function whereIs(loc: RankLocation): string {
  return loc.skeleton < 0 ? `outside any skeleton (${loc.phase})` : `in skeleton ${loc.skeleton}, step ${loc.step}, phase ${loc.phase}`
}

function fmt(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v)
  try {
    return String(v)
  } catch {
    // Plain data whose `toString` is not a function (a key named so): its JSON says what it is.
    return JSON.stringify(v)
  }
}
