import { performance } from 'node:perf_hooks'
import { CheckpointCorruptError, CheckpointError } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import type { JsonObject } from '../format/json.js'
import type { DecodedRankFile } from '../format/rank-file.js'
import type { CheckpointLevel, RecoveryInfo } from '../events.js'
import { CheckpointStore, type CheckpointSummary } from '../store/checkpoint-store.js'
import { assertSameSettings, chooseRecoveryLine, localView, mergeLevelViews, type RankView, type SkipReason } from './line.js'
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

/** One level's store and what it held when the run opened it. */
export interface LevelSource {
  level: CheckpointLevel
  store: CheckpointStore
  listed: readonly CheckpointSummary[]
}

/**
 * Agree with the other ranks on the checkpoint to resume from (collective:
 * every rank calls it), over every level at once (`levels` fastest first).
 * Checkpoints of other settings are refused outright; one of another rank
 * count is resumed elastically (its files are read at restore time, see
 * elastic/restore.ts) unless it holds an array that cannot be re-sliced,
 * which is refused naming it. Each rank finds what it can use on each level
 * from headers and sizes (cheap); the ranks exchange that once and choose
 * the newest checkpoint some level holds for every rank. Each rank then
 * reads and verifies its own file of it from the fastest level that has it,
 * falling back to the next level when that copy is damaged; a rank that
 * finds no good copy moves the line back and the ranks agree again. Skipped
 * checkpoints are logged (rank 0) and listed in `info.warnings`;
 * `info.level` says where the line was read. Checkpoints in `foreign`
 * (another run's, see identity/run.ts) are neither candidates nor worth a
 * warning.
 *
 * ```ts
 * const { info, file } = await negotiateRecoveryLine(comm, [{ level: 'memory', store: mem, listed: await mem.list() }, { level: 'disk', store, listed }], settings, log)
 * ```
 */
export async function negotiateRecoveryLine(
  comm: Communicator,
  levels: readonly LevelSource[],
  settings: JsonObject,
  log: (text: string) => void,
  rejected: readonly RejectedLine[] = [],
  foreign: ReadonlySet<number> = new Set(),
): Promise<NegotiatedLine> {
  const { rank, size } = comm
  const t0 = performance.now()
  // Settings and rank count first: checkpoints of another configuration are
  // refused outright, not passed over as "invalid" for a silent fresh start.
  const newest = levels
    .flatMap((l) => l.listed.filter((c) => c.complete && c.marker && !foreign.has(c.seq)))
    .sort((a, b) => a.seq - b.seq)
    .pop()
  // The rank count is no refusal by itself: another one means an elastic restore.
  if (newest?.marker) assertSameSettings({ settings: newest.marker.settings, size }, { settings, size })
  // Agree on headers and sizes (cheap), then each rank reads and verifies its
  // own file of the chosen line once — the same read restore uses. A file
  // that fails there moves the line back and the ranks agree again.
  // Checkpoints of other runs (`foreign`) are neither candidates nor worth a warning.
  const late: string[] = []
  const mine: RankView[] = []
  for (const l of levels) mine.push(withoutForeign([await localView(l.store, rank, size, { checksums: false })], foreign)[0])
  let views = await comm.allgather(mergeLevelViews(mine))
  // The slowest level is the durable one: a rank that finds nothing there (a lost node's directory) is refused by name.
  await refuseLostDirectories(comm, levels[levels.length - 1].store, views)
  for (const r of rejected) {
    views = withoutSeq(views, r.seq)
    for (const v of mine) v.valid = v.valid.filter((q) => q !== r.seq)
    late.push(`checkpoint ${r.seq} skipped: ${r.problems.map((p) => `${p.file}: ${p.reason}`).join('; ')}`)
  }
  let line = chooseRecoveryLine(views)
  const negotiateMs = performance.now() - t0
  const tLoad = performance.now()
  let file: DecodedRankFile | undefined
  let elastic: ElasticLine | undefined
  let from: LevelSource | undefined
  let usedLevels: string[] = []
  while (line.seq !== undefined) {
    const seqNow: number = line.seq
    const oldSize = levels.flatMap((l) => l.listed).find((c) => c.seq === seqNow && c.marker)?.marker?.size ?? size
    const tried: SkipReason[] = []
    from = undefined
    if (oldSize === size) {
      for (let i = 0; i < levels.length && from === undefined; i++) {
        if (!mine[i].valid.includes(seqNow)) continue
        const l = levels[i]
        try {
          file = await l.store.loadRankFile(seqNow, rank)
          from = l
        } catch (e) {
          const reason = e instanceof CheckpointCorruptError ? e.reason : (e as Error).message
          tried.push({ seq: seqNow, rank, file: l.store.fileOf(seqNow, rank), reason })
        }
      }
    } else {
      // Another rank count: every old header now (each read by one rank, then exchanged), the payload ranges at
      // restore. Collective, so the level is one the ranks agree on: the fastest that holds the line for all of them.
      for (let i = 0; i < levels.length && from === undefined; i++) {
        if ((await comm.allreduce(mine[i].valid.includes(seqNow) ? 1 : 0, 'min')) === 0) continue
        const opened = await openElasticLine(new DirectorySource(levels[i].store), seqNow, oldSize, comm)
        // The same on every rank: a line for all, or none (the rank that found the damage has the problem).
        if (opened.line) {
          elastic = opened.line
          from = levels[i]
        } else if (opened.problem) tried.push(opened.problem)
      }
    }
    const problem = from === undefined ? (tried[0] ?? { seq: seqNow, rank, file: '', reason: 'no level holds this rank file' }) : undefined
    // A damaged copy on a fast level that a slower level replaced is worth a warning too.
    const fallbacks = from === undefined ? [] : tried.map((t) => `checkpoint ${seqNow}: ${t.file}: ${t.reason}; read from the ${from!.level} level instead`)
    const outcomes = await comm.allgather({ problem, level: from?.level, fallbacks })
    for (const o of outcomes) late.push(...o.fallbacks)
    const problems = outcomes.map((o) => o.problem).filter((p): p is SkipReason => p !== undefined)
    if (problems.length === 0) {
      usedLevels = [...new Set(outcomes.map((o) => o.level!))]
      break
    }
    late.push(`checkpoint ${seqNow} skipped: ${problems.map((p) => `${p.file}: ${p.reason}`).join('; ')}`)
    views = withoutSeq(views, seqNow)
    for (const v of mine) v.valid = v.valid.filter((q) => q !== seqNow)
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
  if (line.seq === undefined || from === undefined) {
    warnings.push(`no valid checkpoint in ${levels.map((l) => l.store.dir).join(' or ')}: starting from the beginning`)
    warnings.forEach((w) => rank === 0 && log(`warning: ${w}`))
    return { info: { seq: undefined, skeleton: -1, step: -1, negotiateMs, loadMs, warnings }, file: undefined }
  }
  const marker = await from.store.readMarker(line.seq)
  assertSameSettings({ settings: marker.settings, size }, { settings, size })
  if (elastic) assertResliceable(elastic, size)
  warnings.forEach((w) => rank === 0 && log(`warning: ${w}`))
  if (elastic && rank === 0) log(`resuming a checkpoint of ${marker.size} ranks on ${size} (checkpoint ${line.seq}): each rank reads the parts of the old rank files its boxes need`)
  const level = usedLevels.length === 1 ? usedLevels[0] : levels.map((l) => l.level).filter((l) => usedLevels.includes(l)).join('+')
  return {
    info: { seq: line.seq, skeleton: marker.skeleton, step: marker.step, negotiateMs, loadMs, level, warnings, ...(elastic ? { fromRanks: marker.size } : {}) },
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
