import { readFileSync } from 'node:fs'
import { detectLauncher } from '../runtime/cluster-env.js'

/** How often the wrapper is looked at: a stop within this long of its death leaves the run's grace period almost whole. */
const WATCH_MS = 250

/**
 * When npm started this process (`npx molotof`, `npm exec`, `npm run`), watch
 * that npm process and call `gone` once it has died. npm forwards SIGINT and
 * SIGTERM only to its direct child, the `sh -c` it runs the command in, which
 * dies of them without passing them on: a signal sent to npm's pid alone
 * (a batch system or a user stopping "the job") would otherwise leave the run
 * going on, orphaned. Processes not started by npm are not watched: being
 * re-parented is then a choice (`nohup … &`, `setsid`), not a death.
 *
 * The watched chain is the parent and, when the parent is a shell, its parent
 * (npm): the death of either is noticed, as a change of parent (Linux /proc;
 * elsewhere only this process's own parent is watched). Returns the function
 * that stops watching, or undefined when there is nothing to watch. `parent`
 * is the parent when the process started (one that died since is noticed at
 * the first look).
 *
 * ```ts
 * const stop = watchWrapper((why) => supervisor.preempt(why))
 * try { await supervisor.run() } finally { stop?.() }
 * ```
 */
export function watchWrapper(gone: (why: string) => void, env: NodeJS.ProcessEnv = process.env, parent = process.ppid): (() => void) | undefined {
  if (env.npm_lifecycle_event === undefined) return undefined
  const parentStat = procStat(parent)
  // npm runs the command through a shell; when the shell is a process of its own, npm is the shell's parent.
  const grandparent = parentStat && SHELLS.has(parentStat.comm) ? parentStat.ppid : undefined
  if (orphanedAtStart(parent, parentStat) || (grandparent !== undefined && orphanedAtStart(grandparent, procStat(grandparent)))) {
    // npm (and its shell) died before they could be watched: this process or its shell was already re-parented.
    const timer = setTimeout(() => gone(`${whatStarted(env)} is gone`), 0)
    return () => clearTimeout(timer)
  }
  const what = whatStarted(env)
  const timer = setInterval(() => {
    const parentGone = process.ppid !== parent
    const npmGone = grandparent !== undefined && procStat(parent)?.ppid !== grandparent
    if (!parentGone && !npmGone) return
    clearInterval(timer)
    gone(`${what} is gone`)
  }, WATCH_MS)
  timer.unref()
  return () => clearInterval(timer)
}

const SHELLS = new Set(['sh', 'dash', 'bash', 'zsh', 'ash', 'ksh'])

function whatStarted(env: NodeJS.ProcessEnv): string {
  return `the npm process that started molotof (${env.npm_lifecycle_event === 'npx' ? 'npx / npm exec' : `npm ${env.npm_command ?? 'run'}`})`
}

/**
 * True when the parent at the start is not the wrapper but the process that
 * adopted this one: init, or a session's systemd (a subreaper). Only these: npm's
 * environment reaches every process below it, some started legitimately by
 * other parents in groups of their own (a test runner, mpirun).
 */
function orphanedAtStart(parent: number, parentStat: ProcStat | undefined): boolean {
  return parent === 1 || (parentStat !== undefined && ADOPTERS.has(parentStat.comm))
}

const ADOPTERS = new Set(['systemd', 'init'])

interface ProcStat {
  comm: string
  ppid: number
}

/** A process's command name and parent from /proc (Linux), or undefined. */
function procStat(pid: number): ProcStat | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // pid (comm) state ppid …: comm may hold spaces and parentheses, the last ')' ends it.
    const close = stat.lastIndexOf(')')
    const comm = stat.slice(stat.indexOf('(') + 1, close)
    const ppid = Number(stat.slice(close + 2).split(' ')[1])
    return { comm, ppid }
  } catch {
    // Gone, or no /proc (not Linux): nothing to read.
    return undefined
  }
}

/**
 * When a cluster launcher started this process (`mpirun`, `srun`, `flux run`:
 * see detectLauncher), watch its parent, the launcher's daemon on this node
 * (Open MPI's prted/orted, Slurm's slurmstepd, or `mpirun` itself on its own
 * node), and call `gone` once it has died: a launcher killed outright (SIGKILL,
 * or a signal it does not pass on) leaves its node supervisors running
 * orphaned otherwise, in process groups of their own. `parent` is the parent
 * when the process started; init as parent at the start is a launcher already
 * gone. Returns the function that stops watching, or undefined when no
 * launcher started this process.
 */
export function watchLauncher(gone: (why: string) => void, env: NodeJS.ProcessEnv = process.env, parent = process.ppid): (() => void) | undefined {
  let launcher: string
  try {
    const place = detectLauncher(env)
    if (!place) return undefined
    launcher = place.launcher
  } catch {
    // Inconsistent launcher variables: the cluster setup refuses them with their names.
    return undefined
  }
  const why = `the launcher process that started this node supervisor (${launcher}: mpirun, its daemon, or srun's slurmstepd) is gone`
  const timer = setInterval(() => {
    if (parent !== 1 && process.ppid === parent) return
    clearInterval(timer)
    gone(why)
  }, WATCH_MS)
  timer.unref()
  return () => clearInterval(timer)
}
