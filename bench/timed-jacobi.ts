// One Jacobi run of examples/jacobi for the benchmarks of checkpoint levels and copies
// (bench:levels, bench:partner): its wall time and every checkpoint event.
import { performance } from 'node:perf_hooks'
import type { FaultToleranceConfig } from '../src/checkpoint/config.js'
import type { CheckpointEvent } from '../src/checkpoint/events.js'
import type { ProgressSample } from '../src/bench/local-excess.js'
import { launch } from '../src/index.js'
import type { Transport } from '../src/runtime/group.js'

export interface TimedJacobi {
  ranks: number
  transport: Transport
  n: number
  iterations: number
  checkpoint: FaultToleranceConfig | undefined
}

/**
 * Runs Jacobi once: the wall time from its first superstep to the end of the
 * run (start-up excluded, the end included), the checkpoint events (rank 0's
 * view of each commit), and the steady rate: supersteps per second between
 * rank 0's progress reports (about every 250 ms) from 1 s after the first
 * superstep to 0.5 s before the last report, which leaves out one-time costs
 * at either end (the first checkpoint's buffers and helper thread, the final
 * commit). `progress` is every report: when rank 0 reached which superstep.
 *
 * ```ts
 * const { ms, events, steady } = await timedJacobi({ ranks: 2, transport: 'processes', n: 2048, iterations: 400, checkpoint })
 * ```
 */
export async function timedJacobi(o: TimedJacobi): Promise<{ ms: number; events: CheckpointEvent[]; steady: number | undefined; progress: ProgressSample[] }> {
  const events: CheckpointEvent[] = []
  const progress: ProgressSample[] = []
  let first: number | undefined
  await launch('examples/jacobi/jacobi.ts', {
    ranks: o.ranks,
    transport: o.transport,
    argv: ['--n', String(o.n), '--iterations', String(o.iterations)],
    checkpoint: o.checkpoint,
    // A loaded machine can starve a rank's heartbeat for seconds: a benchmark is not the place to detect hangs.
    hangTimeoutMs: 60_000,
    onLog: () => {},
    onCheckpoint: (e) => events.push(e),
    onProgress: (_skeleton, step) => {
      const at = performance.now()
      first ??= at
      progress.push({ at, step })
    },
  })
  return { ms: performance.now() - (first ?? performance.now()), events, steady: steadyRate(progress), progress }
}

/** Supersteps per second from 1 s after the first progress report to 0.5 s before the last. */
function steadyRate(progress: readonly ProgressSample[]): number | undefined {
  if (progress.length < 2) return undefined
  const start = progress[0].at + 1000
  const end = progress[progress.length - 1].at - 500
  const inside = progress.filter((p) => p.at >= start && p.at <= end)
  if (inside.length < 2) return undefined
  const a = inside[0]
  const b = inside[inside.length - 1]
  return ((b.step - a.step) * 1000) / (b.at - a.at)
}
