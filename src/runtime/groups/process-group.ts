import { spawn, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import { serialize } from 'node:v8'
import { bootPath } from '../boot-files.js'
import type { RankExit, RankGroup, RankGroupEvents, RankGroupSpec, StartRankGroup } from '../group.js'
import { HeartbeatMonitor } from './heartbeat.js'
import { createSocketDirectory, removeSocketDirectory } from './socket-dir.js'
import type { RankToLauncher } from '../protocol.js'

const BOOT = bootPath('process-boot.mjs')
/** fd of the heartbeat pipe in the child (0–2 inherited, 3 IPC). */
const HEARTBEAT_FD = 4
/** After a child exits, wait at most this long for its pipes to drain before reporting the exit. */
const DRAIN_MS = 200

/**
 * The processes transport: every rank a child process running
 * process-boot.mjs, linked by Unix domain sockets in a private temp dir.
 * Results and control messages go over IPC (advanced serialization, so typed
 * arrays survive); each child's heartbeat thread reports its status slot over
 * a pipe, which keeps `where` and `lastHeartbeat` current even while the rank
 * is busy computing.
 *
 * ```ts
 * const group = startProcessGroup(spec, { message: (m) => ..., exit: (rank, how) => ... })
 * group.kill(1, 'SIGSTOP'); await group.terminate()
 * ```
 */
export const startProcessGroup: StartRankGroup = (spec, on) => {
  const dir = createSocketDirectory(spec.size)
  track({ dir })
  const endpoints = Array.from({ length: spec.size }, (_, r) => join(dir, `${r}.sock`))
  const ranks = Array.from({ length: spec.size }, (_, rank) => startRank(spec, rank, endpoints, on))
  let terminating: Promise<void> | undefined
  const group: RankGroup = {
    size: spec.size,
    transport: 'processes',
    where: (rank) => ranks[rank].heartbeat.where,
    lastHeartbeat: (rank) => ranks[rank].heartbeat.lastAt,
    pid: (rank) => (ranks[rank].alive ? ranks[rank].child.pid : undefined),
    send: (rank, m) => {
      const { child } = ranks[rank]
      // A dying child may refuse: its exit is reported on its own.
      if (child.connected) child.send(m, () => {})
    },
    kill: (rank, signal = 'SIGKILL') => {
      const r = ranks[rank]
      if (r.alive) r.child.kill(signal)
    },
    terminate: () => {
      terminating ??= (async () => {
        for (const r of ranks) if (r.alive) r.child.kill('SIGKILL')
        await Promise.all(ranks.map((r) => r.exited))
        removeSocketDirectory(dir)
        untrack({ dir })
      })()
      return terminating
    },
  }
  return group
}

export interface RankProcess {
  child: ChildProcess
  heartbeat: HeartbeatMonitor
  alive: boolean
  /** Resolves when the process has exited. */
  exited: Promise<void>
}

/**
 * Start one rank process. `extra` joins its init (the TCP transport's
 * address and generation, the node index; see process-boot.mjs).
 */
export function startRank(spec: RankGroupSpec, rank: number, endpoints: string[], on: RankGroupEvents, extra: Record<string, unknown> = {}): RankProcess {
  // Everything in the spec reaches the rank (new fields included), but only its own injections.
  const { transport: _transport, ...common } = spec
  const init = { ...common, ...extra, rank, inject: spec.inject.filter((i) => i.rank === rank), injectFired: spec.injectFired ?? [], endpoints }
  const child = spawn(process.execPath, [BOOT, serialize(init).toString('base64')], {
    stdio: ['inherit', 'inherit', 'inherit', 'ipc', 'pipe'],
    serialization: 'advanced',
  })
  const r: RankProcess = { child, heartbeat: new HeartbeatMonitor(performance.now()), alive: true, exited: Promise.resolve() }
  let markExited = () => {}
  r.exited = new Promise<void>((resolve) => (markExited = resolve))
  track({ child })

  let reported = false
  const report = (how: RankExit) => {
    if (reported) return
    reported = true
    on.exit(rank, how)
  }
  const pipe = child.stdio[HEARTBEAT_FD] as Readable
  pipe.on('data', (chunk: Buffer) => r.heartbeat.push(chunk))
  pipe.on('error', () => {})
  child.on('message', (m: RankToLauncher) => on.message(m))
  child.on('error', (e) => {
    if (child.pid !== undefined) return // a failed send to a dying child; its exit is reported
    r.alive = false
    untrack({ child })
    markExited()
    on.message({ type: 'load-error', rank, message: `cannot start the process of rank ${rank}: ${e.message}` })
  })
  child.on('exit', (code, signal) => {
    r.alive = false
    untrack({ child })
    markExited()
    // 'close' comes once the last IPC message and heartbeat are read, so the
    // launcher sees a result before the exit and knows where a killed rank
    // was; unless some grandchild holds the pipes open.
    setTimeout(() => report({ code, signal }), DRAIN_MS).unref()
  })
  child.on('close', (code: number | null, signal: NodeJS.Signals | null) => report({ code, signal }))
  return r
}

// Children must never outlive the launcher: kill whatever is left when it
// exits (a launcher killed outright is noticed by the children themselves,
// see process-boot.mjs, and its socket directories by the next run's sweep),
// and remove the socket directories.
const liveChildren = new Set<ChildProcess>()
const liveDirs = new Set<string>()
let hooked = false

function track(what: { child?: ChildProcess; dir?: string }): void {
  if (what.child) liveChildren.add(what.child)
  if (what.dir) liveDirs.add(what.dir)
  if (hooked) return
  hooked = true
  process.on('exit', () => {
    for (const c of liveChildren) c.kill('SIGKILL')
    for (const d of liveDirs) removeSocketDirectory(d)
  })
}

function untrack(what: { child?: ChildProcess; dir?: string }): void {
  if (what.child) liveChildren.delete(what.child)
  if (what.dir) liveDirs.delete(what.dir)
}
