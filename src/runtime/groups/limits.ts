import { formatSize, memoryLimit } from '../../domains/memory.js'
import { ConfigError } from '../../errors.js'
import type { Transport } from '../group.js'

const MiB = 2 ** 20
/**
 * Memory one rank takes before any data: a floor under what was measured on
 * the development VM (Node 20, tsx, Jacobi: about 38 MiB per rank thread and
 * 94 MiB per rank process), so only impossible rank counts are refused.
 */
export const RANK_FLOOR_BYTES: Readonly<Record<Transport, number>> = { threads: 24 * MiB, processes: 48 * MiB, tcp: 48 * MiB }

/**
 * Refuses a rank count this machine cannot start, before starting any:
 * `--ranks 100000` is a typo or a misunderstanding, not a run to attempt
 * until the process runs out of memory.
 *
 * ```ts
 * assertRanksFit(100000, 'threads')   // ConfigError: … need at least 2.29 TiB …
 * ```
 */
export function assertRanksFit(ranks: number, transport: Transport, limit: number = memoryLimit()): void {
  const need = ranks * RANK_FLOOR_BYTES[transport]
  if (need <= limit) return
  const most = Math.floor(limit / RANK_FLOOR_BYTES[transport])
  const [one, many] = transport === 'threads' ? ['rank thread', 'rank threads'] : ['rank process', 'rank processes']
  throw new ConfigError(
    `--ranks ${ranks}: each ${one} needs at least ${formatSize(RANK_FLOOR_BYTES[transport])} before any data, ${ranks} need ${formatSize(need)}, ` +
      `more than this machine's memory (${formatSize(limit)}), where every rank runs: at most about ${most} ${many} fit`,
  )
}

/**
 * A hang timeout must leave room for a late beat: shorter than two heartbeat
 * periods, every rank process would be declared hung between two beats.
 *
 * ```ts
 * assertHangTimeout(200, 100)   // ConfigError
 * ```
 */
export function assertHangTimeout(heartbeatMs: number, hangTimeoutMs: number | undefined): void {
  if (hangTimeoutMs === undefined) return
  if (!Number.isFinite(hangTimeoutMs) || hangTimeoutMs < 2 * heartbeatMs) {
    throw new ConfigError(
      `--hang-timeout ${hangTimeoutMs} ms is shorter than two heartbeat periods (--heartbeat ${heartbeatMs} ms): ` +
        `rank processes would be declared hung between two beats. Give at least ${2 * heartbeatMs} ms, or a shorter --heartbeat`,
    )
  }
}
