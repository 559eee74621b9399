import { readFileSync, renameSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { EXIT } from './exit-codes.js'

/** What a batch script reads in `--status-file` (JSON). */
export interface RunStatus {
  /** `running` from the start of `molotof run`, `ended` once its exit code is known. */
  state: 'running' | 'ended'
  /** The exit code this process ends with (null while running). */
  exitCode: number | null
  /** done, failed, bad-input, preempted, node-lost (null while running). */
  outcome: string | null
  /** True for 75 and 76: run again with `resume`. */
  resumable: boolean
  /** What the code means, as `molotof run --help` says it. */
  meaning: string | null
  /** The command that resumes the run, when it is resumable (under a launcher: run the launcher again with it). */
  resume: string | null
  /** The error message, when the run ended with one. */
  message: string | null
  /** The node that wrote this (under a cluster launcher; 0 otherwise), its host and pid, and when. */
  node: number
  host: string
  pid: number
  time: string
}

const MEANING: Readonly<Record<number, [outcome: string, meaning: string]>> = {
  [EXIT.done]: ['done', 'the run finished'],
  [EXIT.failed]: ['failed', 'the run failed: read the message; once its cause is fixed, resume (when given) continues from the last complete checkpoint'],
  [EXIT.badInput]: ['bad-input', 'bad input, refused before compute: fix the command or the program'],
  [EXIT.preempted]: ['preempted', 'preempted after a checkpoint: run again with --resume'],
  [EXIT.nodeLost]: ['node-lost', 'a node of the cluster run was lost: run the launcher again with --resume'],
}

/** The file holds an outcome another process wrote. */
function endedBy(path: string): { node: number; pid: number; host: string } | undefined {
  try {
    const s = JSON.parse(readFileSync(path, 'utf8')) as Partial<RunStatus>
    return s.state === 'ended' ? { node: s.node ?? -1, pid: s.pid ?? -1, host: s.host ?? '' } : undefined
  } catch {
    // No file, or a half-read one: no outcome to keep.
    return undefined
  }
}

/**
 * The outcome of `molotof run` written to a file a batch script reads: for
 * when the exit code does not reach the script (mpirun reports 137 when a
 * node's processes were killed, though the surviving nodes exit 76; `npx`
 * exits as killed by a signal it forwarded). Written when the run starts
 * (`running`: a file still saying so after the launcher returned means no
 * supervisor lived to write the end) and when it ends. Every node supervisor
 * of a cluster run writes it (they end with the same code); each write
 * replaces the file whole (a temporary file renamed), so a reader never sees
 * half of one. A file that cannot be written is reported once and does not
 * change the exit code.
 *
 * ```ts
 * const status = new StatusFile('/shared/run-status.json', 0, (s) => console.error(s))
 * status.running()
 * status.ended(75, { resume: 'molotof run job.ts --resume' })
 * ```
 */
export class StatusFile {
  private warned = false
  private disowned = false
  private yielding = false

  constructor(
    readonly path: string,
    private readonly node: number,
    private readonly warn: (text: string) => void,
  ) {}

  running(): void {
    this.write({ state: 'running', exitCode: null, outcome: null, resumable: false, meaning: null, resume: null, message: null })
  }

  ended(code: number, more: { resume?: string; message?: string; resumeAfterFix?: boolean } = {}): void {
    const [outcome, meaning] = MEANING[code] ?? ['failed', MEANING[EXIT.failed][1]]
    const resumable = code === EXIT.preempted || code === EXIT.nodeLost
    // A run that gave up after failures is not resumable as it is (it would fail again), but its checkpoints are there.
    const resume = resumable || more.resumeAfterFix === true ? (more.resume ?? null) : null
    this.write({ state: 'ended', exitCode: code, outcome, resumable, meaning, resume, message: more.message ?? null })
  }

  /**
   * From now on this process does not speak for the run: a node that node 0
   * dropped as lost (silent past --node-timeout) and that wakes up later must
   * not replace the outcome the others wrote.
   */
  disown(): void {
    this.disowned = true
  }

  private endedByAnother(): boolean {
    const by = endedBy(this.path)
    return by !== undefined && (by.pid !== process.pid || by.host !== hostname())
  }

  /**
   * From now on this process writes only where no other process wrote an
   * outcome: its side of a partition stopped without a majority, and the
   * other side may go on and write the run's own (it writes last, at its
   * end). When every side stopped, the 76 written here lets a batch loop
   * relaunch.
   */
  yieldToOthers(): void {
    this.yielding = true
  }

  private write(s: Omit<RunStatus, 'node' | 'host' | 'pid' | 'time'>): void {
    if (this.disowned || (this.yielding && this.endedByAnother())) return
    const record: RunStatus = { ...s, node: this.node, host: hostname(), pid: process.pid, time: new Date().toISOString() }
    // One temporary file per writer: nodes sharing the file system write the same path.
    const tmp = `${this.path}.${hostname()}.${process.pid}.tmp`
    try {
      writeFileSync(tmp, JSON.stringify(record, null, 2) + '\n')
      renameSync(tmp, this.path)
    } catch (e) {
      if (this.warned) return
      this.warned = true
      this.warn(`warning: cannot write the status file ${this.path}: ${(e as Error).message}`)
    }
  }
}
