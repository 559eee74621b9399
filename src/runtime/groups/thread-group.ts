import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads'
import { bootUrl } from '../boot-files.js'
import type { RankExit, RankGroup, RankGroupSpec, StartRankGroup } from '../group.js'
import type { RankToLauncher } from '../protocol.js'
import { createStatusBuffer, readStatus } from '../status.js'
import { channelHeaders } from '../transport/threads.js'

const BOOT = bootUrl('rank-boot.mjs')

/**
 * The threads transport: every rank a worker thread of this process, linked
 * by a full mesh of MessageChannels and shared-memory rings (see ThreadCommunicator). Rank status lives in shared memory, so
 * `where` is always current; there are no heartbeats (a thread cannot be
 * stopped from outside without stopping the process).
 */
export const startThreadGroup: StartRankGroup = (spec, on) => {
  const status = createStatusBuffer(spec.size)
  const ports = wire(spec.size)
  const headers = channelHeaders(spec.size)
  const workers: Worker[] = []
  const exited = new Set<number>()
  for (let rank = 0; rank < spec.size; rank++) {
    const init = { mode: 'run', ...threadRankInit(spec, rank, ports, headers, status) }
    const w = new Worker(BOOT, {
      workerData: { programFile: spec.programFile, tsconfig: spec.tsconfig, compiled: spec.compiled, init },
      transferList: ports[rank].filter((p): p is MessagePort => p !== undefined),
    })
    workers.push(w)
    w.on('message', (m: RankToLauncher) => on.message(m))
    w.on('error', (e) => {
      const s = readStatus(status, rank)
      on.message({ type: 'error', rank, skeleton: s.skeleton, step: s.step, phase: s.phase, name: e.name, code: undefined, message: `uncaught ${e.message}`, stack: e.stack })
    })
    w.on('exit', (code) => {
      exited.add(rank)
      on.exit(rank, { code, signal: null } satisfies RankExit)
    })
  }
  const group: RankGroup = {
    size: spec.size,
    transport: 'threads',
    where: (rank) => {
      const s = readStatus(status, rank)
      return { skeleton: s.skeleton, step: s.step, phase: s.phase }
    },
    lastHeartbeat: () => undefined,
    send: (rank, m) => {
      if (!exited.has(rank)) workers[rank].postMessage(m)
    },
    kill: (rank) => {
      void workers[rank].terminate()
    },
    terminate: async () => {
      // Stopping is all that is asked: a terminate() that reports a problem leaves nothing more to do.
      await Promise.all(workers.map((w) => w.terminate())).catch(() => undefined)
    },
  }
  return group
}

/**
 * What rank `rank` of a thread group is started with (its ports, the shared
 * status slots, its injections), for one-shot rank threads and warm spares.
 *
 * ```ts
 * worker.postMessage({ mode: 'run', ...threadRankInit(spec, rank, ports, channelHeaders(spec.size), status) })
 * ```
 */
export function threadRankInit(
  spec: RankGroupSpec,
  rank: number,
  ports: ReadonlyArray<ReadonlyArray<MessagePort | undefined>>,
  headers: ReturnType<typeof channelHeaders>,
  status: Int32Array,
) {
  return {
    rank,
    size: spec.size,
    argv: spec.argv,
    transport: { kind: 'threads' as const, ports: ports[rank], channels: headers[rank] },
    status,
    ft: spec.ft,
    inject: spec.inject.filter((i) => i.rank === rank),
    injectRandom: spec.injectRandom,
    injectFired: spec.injectFired ?? [],
  }
}

/** Full mesh of channels: ports[a][b] is rank a's end of the a–b channel. */
export function wire(size: number): Array<Array<MessagePort | undefined>> {
  const ports: Array<Array<MessagePort | undefined>> = Array.from({ length: size }, () => new Array(size).fill(undefined))
  for (let a = 0; a < size; a++) {
    for (let b = a + 1; b < size; b++) {
      const ch = new MessageChannel()
      ports[a][b] = ch.port1
      ports[b][a] = ch.port2
    }
  }
  return ports
}
