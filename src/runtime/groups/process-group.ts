import { join } from 'node:path'
import type { RankGroup, RankGroupEvents, RankGroupSpec, StartRankGroup } from '../group.js'
import { atLauncherExit } from './launcher-exit.js'
import { startRankHost, type RankHost, type RankHostEvents } from './rank-host.js'
import { createSocketDirectory, removeSocketDirectory } from './socket-dir.js'
import type { RankToLauncher } from '../protocol.js'

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
  const forgetDir = atLauncherExit(() => removeSocketDirectory(dir))
  const endpoints = Array.from({ length: spec.size }, (_, r) => join(dir, `${r}.sock`))
  const ranks = Array.from({ length: spec.size }, (_, rank) => startRank(spec, rank, endpoints, on))
  let terminating: Promise<void> | undefined
  const group: RankGroup = {
    size: spec.size,
    transport: 'processes',
    where: (rank) => ranks[rank].heartbeat.where,
    lastHeartbeat: (rank) => ranks[rank].heartbeat.lastAt,
    pid: (rank) => (ranks[rank].alive ? ranks[rank].child.pid : undefined),
    send: (rank, m) => ranks[rank].send(m),
    kill: (rank, signal) => ranks[rank].kill(signal),
    terminate: () => {
      terminating ??= (async () => {
        for (const r of ranks) r.kill()
        await Promise.all(ranks.map((r) => r.exited))
        removeSocketDirectory(dir)
        forgetDir()
      })()
      return terminating
    },
  }
  return group
}

/** One rank process of a group (a `RankHost` started as a rank). */
export type RankProcess = RankHost

/**
 * Start one rank process. `extra` joins its init (the TCP transport's
 * address and generation, the node index; see process-boot.mjs); `env`
 * replaces the inherited environment (a TCP rank's key, see rank-host.ts).
 */
export function startRank(spec: RankGroupSpec, rank: number, endpoints: string[], on: RankGroupEvents, extra: Record<string, unknown> = {}, env?: NodeJS.ProcessEnv): RankProcess {
  // Everything in the spec reaches the rank (new fields included), but only its own injections.
  const { transport: _transport, ...common } = spec
  const init = { ...common, ...extra, rank, inject: spec.inject.filter((i) => i.rank === rank), injectFired: spec.injectFired ?? [], endpoints }
  const events: RankHostEvents<RankToLauncher> = {
    message: (m) => on.message(m),
    startFailed: (e) => on.message({ type: 'load-error', rank, message: `cannot start the process of rank ${rank}: ${e.message}` }),
    exit: (how) => on.exit(rank, how),
  }
  return startRankHost<RankToLauncher>('process-boot.mjs', init, events, env)
}
