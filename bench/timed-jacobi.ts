// One Jacobi run of examples/jacobi for the benchmarks of checkpoint levels and copies
// (bench:levels, bench:partner): its wall time and every checkpoint event.
import { performance } from 'node:perf_hooks'
import type { FaultToleranceConfig } from '../src/checkpoint/config.js'
import type { CheckpointEvent } from '../src/checkpoint/events.js'
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
 * Runs Jacobi once: the wall time from its first to its last superstep (start-up
 * excluded) and the checkpoint events (rank 0's view of each commit).
 *
 * ```ts
 * const { ms, events } = await timedJacobi({ ranks: 2, transport: 'processes', n: 2048, iterations: 400, checkpoint })
 * ```
 */
export async function timedJacobi(o: TimedJacobi): Promise<{ ms: number; events: CheckpointEvent[] }> {
  const events: CheckpointEvent[] = []
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
    onProgress: () => (first ??= performance.now()),
  })
  return { ms: performance.now() - (first ?? performance.now()), events }
}
