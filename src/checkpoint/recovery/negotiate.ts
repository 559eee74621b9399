import { performance } from 'node:perf_hooks'
import { CheckpointCorruptError } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import type { JsonObject } from '../format/json.js'
import type { DecodedRankFile } from '../format/rank-file.js'
import type { RecoveryInfo } from '../events.js'
import type { CheckpointStore, CheckpointSummary } from '../store/checkpoint-store.js'
import { assertSameSettings, chooseRecoveryLine, localView, type RankView, type SkipReason } from './line.js'
import { assertResliceable, openElasticLine, type ElasticLine } from './elastic/line.js'
import { DirectorySource } from './elastic/source.js'

/** The recovery line the ranks agreed on, and this rank's file of it, already read and verified. */
export interface NegotiatedLine {
  /** `seq` undefined: no valid checkpoint, the run starts from the beginning. */
  info: RecoveryInfo
  file: DecodedRankFile | undefined
  /** A line written by another rank count: its headers, for an elastic restore (`file` is then undefined). */
  elastic?: ElasticLine
}

/** A checkpoint found damaged after negotiation (during an elastic restore), to pass over. */
export interface RejectedLine {
  seq: number
  problems: SkipReason[]
}

/**
 * Agree with the other ranks on the checkpoint to resume from (collective:
 * every rank calls it). Checkpoints of other settings are refused outright;
 * one of another rank count is resumed elastically (its files are read at
 * restore time, see elastic/restore.ts) unless it holds an array that cannot
 * be re-sliced, which is refused naming it. The ranks exchange what they find valid from headers
 * and sizes (cheap), choose the newest checkpoint valid everywhere, and each
 * reads and verifies its own file of it once — the same read restore uses; a
 * file that fails there moves the line back and the ranks agree again.
 * Skipped checkpoints are logged (rank 0) and listed in `info.warnings`.
 * Checkpoints in `foreign` (another run's, see identity/run.ts) are neither
 * candidates nor worth a warning.
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
  rejected: readonly RejectedLine[] = [],
  foreign: ReadonlySet<number> = new Set(),
): Promise<NegotiatedLine> {
  const { rank, size } = comm
  const t0 = performance.now()
  // Settings and rank count first: checkpoints of another configuration are
  // refused outright, not passed over as "invalid" for a silent fresh start.
  const newest = listed.filter((c) => c.complete && c.marker && !foreign.has(c.seq)).pop()
  // The rank count is no refusal by itself: another one means an elastic restore.
  if (newest?.marker) assertSameSettings({ settings: newest.marker.settings, size }, { settings, size })
  // Agree on headers and sizes (cheap), then each rank reads and verifies its
  // own file of the chosen line once — the same read restore uses. A file
  // that fails there moves the line back and the ranks agree again.
  // Checkpoints of other runs (`foreign`) are neither candidates nor worth a warning.
  const late: string[] = []
  let views = withoutForeign(await comm.allgather(await localView(store, rank, size, { checksums: false })), foreign)
  for (const r of rejected) {
    views = withoutSeq(views, r.seq)
    late.push(`checkpoint ${r.seq} skipped: ${r.problems.map((p) => `${p.file}: ${p.reason}`).join('; ')}`)
  }
  let line = chooseRecoveryLine(views)
  const negotiateMs = performance.now() - t0
  const tLoad = performance.now()
  let file: DecodedRankFile | undefined
  let elastic: ElasticLine | undefined
  while (line.seq !== undefined) {
    const seqNow: number = line.seq
    const oldSize = listed.find((c) => c.seq === seqNow)?.marker?.size ?? size
    let problem: SkipReason | undefined
    if (oldSize === size) {
      try {
        file = await store.loadRankFile(seqNow, rank)
      } catch (e) {
        const reason = e instanceof CheckpointCorruptError ? e.reason : (e as Error).message
        problem = { seq: seqNow, rank, file: store.fileOf(seqNow, rank), reason }
      }
    } else {
      // Another rank count: every old header now (each read by one rank, then exchanged), the payload ranges at restore.
      const opened = await openElasticLine(new DirectorySource(store), seqNow, oldSize, comm)
      elastic = opened.line
      problem = opened.problem
    }
    const problems = (await comm.allgather(problem)).filter((p): p is SkipReason => p !== undefined)
    if (problems.length === 0) break
    late.push(`checkpoint ${seqNow} skipped: ${problems.map((p) => `${p.file}: ${p.reason}`).join('; ')}`)
    views = withoutSeq(views, seqNow)
    line = chooseRecoveryLine(views)
    file = undefined
    elastic = undefined
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
  assertSameSettings({ settings: marker.settings, size }, { settings, size })
  if (elastic) assertResliceable(elastic, size)
  warnings.forEach((w) => rank === 0 && log(`warning: ${w}`))
  if (elastic && rank === 0) log(`resuming a checkpoint of ${marker.size} ranks on ${size} (checkpoint ${line.seq}): each rank reads the parts of the old rank files its boxes need`)
  return {
    info: { seq: line.seq, skeleton: marker.skeleton, step: marker.step, negotiateMs, loadMs, warnings, ...(elastic ? { fromRanks: marker.size } : {}) },
    file,
    ...(elastic ? { elastic } : {}),
  }
}

/** The views with checkpoint `seq` no longer valid anywhere. */
function withoutSeq(views: RankView[], seq: number): RankView[] {
  return views.map((v) => ({ ...v, valid: v.valid.filter((q) => q !== seq) }))
}

/** Views without the checkpoints in `foreign`. */
function withoutForeign(views: readonly RankView[], foreign: ReadonlySet<number>): RankView[] {
  if (foreign.size === 0) return [...views]
  return views.map((v) => ({ ...v, valid: v.valid.filter((s) => !foreign.has(s)), problems: v.problems.filter((p) => !foreign.has(p.seq)) }))
}
