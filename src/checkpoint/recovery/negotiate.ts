import { performance } from 'node:perf_hooks'
import { CheckpointCorruptError, CheckpointError } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import type { JsonObject } from '../format/json.js'
import type { DecodedRankFile } from '../format/rank-file.js'
import type { RecoveryInfo } from '../events.js'
import { CheckpointStore, type CheckpointSummary } from '../store/checkpoint-store.js'
import { assertSameSettings, chooseRecoveryLine, localView, type RankView, type SkipReason } from './line.js'

/** The recovery line the ranks agreed on, and this rank's file of it, already read and verified. */
export interface NegotiatedLine {
  /** `seq` undefined: no valid checkpoint, the run starts from the beginning. */
  info: RecoveryInfo
  file: DecodedRankFile | undefined
}

/**
 * Agree with the other ranks on the checkpoint to resume from (collective:
 * every rank calls it). Checkpoints of other settings or another rank count
 * are refused outright. The ranks exchange what they find valid from headers
 * and sizes (cheap), choose the newest checkpoint valid everywhere, and each
 * reads and verifies its own file of it once — the same read restore uses; a
 * file that fails there moves the line back and the ranks agree again.
 * Skipped checkpoints are logged (rank 0) and listed in `info.warnings`.
 *
 * ```ts
 * const { info, file } = await negotiateRecoveryLine(comm, store, settings, await store.list(), log)
 * ```
 */
export async function negotiateRecoveryLine(
  comm: Communicator,
  store: CheckpointStore,
  settings: JsonObject,
  listed: readonly CheckpointSummary[],
  log: (text: string) => void,
): Promise<NegotiatedLine> {
  const { rank, size } = comm
  const t0 = performance.now()
  // Settings and rank count first: checkpoints of another configuration are
  // refused outright, not passed over as "invalid" for a silent fresh start.
  const newest = listed.filter((c) => c.complete && c.marker).pop()
  if (newest?.marker) {
    assertSameSettings({ settings: newest.marker.settings, size: newest.marker.size }, { settings, size })
  }
  // Agree on headers and sizes (cheap), then each rank reads and verifies its
  // own file of the chosen line once — the same read restore uses. A file
  // that fails there moves the line back and the ranks agree again.
  let views = await comm.allgather(await localView(store, rank, size, { checksums: false }))
  await refuseLostDirectories(comm, store, views)
  let line = chooseRecoveryLine(views)
  const negotiateMs = performance.now() - t0
  const tLoad = performance.now()
  let file: DecodedRankFile | undefined
  const late: string[] = []
  while (line.seq !== undefined) {
    const seqNow: number = line.seq
    let problem: SkipReason | undefined
    try {
      file = await store.loadRankFile(seqNow, rank)
    } catch (e) {
      const reason = e instanceof CheckpointCorruptError ? e.reason : (e as Error).message
      problem = { seq: seqNow, rank, file: store.fileOf(seqNow, rank), reason }
    }
    const problems = (await comm.allgather(problem)).filter((p): p is SkipReason => p !== undefined)
    if (problems.length === 0) break
    late.push(`checkpoint ${seqNow} skipped: ${problems.map((p) => `${p.file}: ${p.reason}`).join('; ')}`)
    views = views.map((v) => ({ ...v, valid: v.valid.filter((q) => q !== seqNow) }))
    line = chooseRecoveryLine(views)
    file = undefined
  }
  const loadMs = performance.now() - tLoad
  const warnings = [
    ...line.skipped
      .filter((s) => !late.some((l) => l.startsWith(`checkpoint ${s.seq} `)))
      .map((s) => `checkpoint ${s.seq} skipped: ${s.problems.map((p) => (p.file ? `${p.file}: ${p.reason}` : p.reason)).join('; ')}`),
    ...late,
  ]
  if (line.seq === undefined) {
    warnings.push(`no valid checkpoint in ${store.dir}: starting from the beginning`)
    warnings.forEach((w) => rank === 0 && log(`warning: ${w}`))
    return { info: { seq: undefined, skeleton: -1, step: -1, negotiateMs, loadMs, warnings }, file: undefined }
  }
  const marker = await store.readMarker(line.seq)
  assertSameSettings({ settings: marker.settings, size: marker.size }, { settings, size })
  warnings.forEach((w) => rank === 0 && log(`warning: ${w}`))
  return { info: { seq: line.seq, skeleton: marker.skeleton, step: marker.step, negotiateMs, loadMs, warnings }, file }
}

/**
 * Ranks with directories of their own (`{node}`, `{rank}`): when some ranks
 * hold valid checkpoints and others find no trace of any (their directory is
 * empty or gone, as a lost node's disk), refuse, naming the missing files,
 * instead of quietly starting afresh. Collective; every rank sees the same views.
 */
async function refuseLostDirectories(comm: Communicator, store: CheckpointStore, views: readonly RankView[]): Promise<void> {
  const holders = views.filter((v) => v.valid.length > 0)
  const blind = views.filter((v) => v.valid.length === 0 && v.problems.length === 0)
  if (holders.length === 0 || blind.length === 0) return
  const dirs = await comm.allgather(store.dir)
  const seq = Math.max(...holders.map((v) => v.valid[0]))
  const missing = blind.map((v) => new CheckpointStore(dirs[v.rank]).fileOf(seq, v.rank))
  const who = (vs: readonly RankView[], many = 'hold', one = 'holds') =>
    vs.length > 1 ? `ranks ${vs.map((v) => v.rank).join(', ')} ${many}` : `rank ${vs[0].rank} ${one}`
  throw new CheckpointError(
    `cannot resume: ${who(holders)} checkpoint ${seq}, but ${who(blind, 'find', 'finds')} no checkpoint at all (a lost node's directory?); ` +
      `missing: ${missing.join(', ')}. ` +
      'Put those files back (from a copy), or start afresh without --resume.',
  )
}
