import { spawn, type ChildProcess } from 'node:child_process'
import type { Readable } from 'node:stream'
import { serialize } from 'node:v8'
import { bootPath } from '../boot-files.js'
import type { RankExit } from '../group.js'
import { HeartbeatMonitor } from './heartbeat.js'
import { atLauncherExit } from './launcher-exit.js'

/** fd of the heartbeat pipe in a rank process (0–2 inherited, 3 IPC); process-host.mjs writes it. */
const HEARTBEAT_FD = 4
/** After a process exits, wait at most this long for its pipes to drain before reporting the exit. */
const DRAIN_MS = 200

/** How a rank process starts: as a rank (process-boot.mjs) or as a warm spare waiting for one (spare-boot.mjs). */
export type RankHostBoot = 'process-boot.mjs' | 'spare-boot.mjs'

/** What a rank process tells its owner. */
export interface RankHostEvents<M> {
  /** An IPC message of the process. */
  message(m: M): void
  /**
   * The process could not be started (no pid): it will not exit on its own.
   * `reportExit` reports an exit for it all the same, when the owner wants one.
   */
  startFailed(e: Error, reportExit: (how: RankExit) => void): void
  /** The process exited; its last messages and heartbeats may still be on their way. */
  exited?(): void
  /** The exit, once its last messages and heartbeats are read (at most DRAIN_MS after it); reported once. */
  exit(how: RankExit): void
}

/** One rank process, started as a rank or as a spare, its heartbeat pipe read and its exit watched. */
export interface RankHost {
  readonly child: ChildProcess
  /** The heartbeat records of its status slot (boot/boot-heartbeat.mjs). */
  readonly heartbeat: HeartbeatMonitor
  /** False once it exited or could not start. */
  alive: boolean
  /** Resolves when the process has exited (or could not start). */
  readonly exited: Promise<void>
  /** Send over IPC; a dying process may refuse (its exit is reported on its own). */
  send(m: unknown): void
  /** Signal it while it lives. */
  kill(signal?: NodeJS.Signals): void
}

/**
 * Start a rank process from boot file `boot` with `init` (v8-serialized on its
 * command line), read its heartbeat pipe, forward its IPC messages, and report
 * its exit once. The process is killed if the launcher exits first
 * (launcher-exit.ts). `env` replaces the inherited environment (a TCP rank's
 * key goes there: the command line is readable by every user of the host).
 *
 * ```ts
 * const host = startRankHost('process-boot.mjs', init, { message, startFailed, exit })
 * host.send({ type: 'abort' }); host.kill(); await host.exited
 * ```
 */
export function startRankHost<M>(boot: RankHostBoot, init: Record<string, unknown>, on: RankHostEvents<M>, env?: NodeJS.ProcessEnv): RankHost {
  const child = spawn(process.execPath, [bootPath(boot), serialize(init).toString('base64')], {
    env,
    stdio: ['inherit', 'inherit', 'inherit', 'ipc', 'pipe'],
    serialization: 'advanced',
  })
  let markExited = () => {}
  const exited = new Promise<void>((resolve) => (markExited = resolve))
  const host: RankHost = {
    child,
    heartbeat: new HeartbeatMonitor(performance.now()),
    alive: true,
    exited,
    send: (m) => {
      if (child.connected) child.send(m as Parameters<ChildProcess['send']>[0], () => {})
    },
    kill: (signal = 'SIGKILL') => {
      if (host.alive) child.kill(signal)
    },
  }
  const forget = atLauncherExit(() => child.kill('SIGKILL'))

  let reported = false
  const report = (how: RankExit) => {
    if (reported) return
    reported = true
    on.exit(how)
  }
  const pipe = child.stdio[HEARTBEAT_FD] as Readable
  pipe.on('data', (chunk: Buffer) => host.heartbeat.push(chunk))
  pipe.on('error', () => {})
  child.on('message', (m: M) => on.message(m))
  child.on('error', (e) => {
    if (child.pid !== undefined) return // a failed send to a dying child; its exit is reported
    host.alive = false
    forget()
    markExited()
    on.startFailed(e, report)
  })
  child.on('exit', (code, signal) => {
    host.alive = false
    forget()
    markExited()
    on.exited?.()
    // 'close' comes once the last IPC message and heartbeat are read, so the
    // launcher sees a result before the exit and knows where a killed rank
    // was; unless some grandchild holds the pipes open.
    setTimeout(() => report({ code, signal }), DRAIN_MS).unref()
  })
  child.on('close', (code: number | null, signal: NodeJS.Signals | null) => report({ code, signal }))
  return host
}
