import { performance } from 'node:perf_hooks'
import { CheckpointCorruptError } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import type { JsonObject } from '../format/json.js'
import type { DecodedRankFile } from '../format/rank-file.js'
import type { CheckpointLevel, RecoveryInfo } from '../events.js'
import type { CheckpointStore, CheckpointSummary } from '../store/checkpoint-store.js'
import { assertSameSettings, chooseRecoveryLine, localView, mergeLevelViews, type SkipReason } from './line.js'

/** The recovery line the ranks agreed on, and this rank's file of it, already read and verified. */
export interface NegotiatedLine {
  /** `seq` undefined: no valid checkpoint, the run starts from the beginning. */
  info: RecoveryInfo
  file: DecodedRankFile | undefined
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
 * Checkpoints of other settings or another rank count are refused outright.
 * Each rank finds what it can use on each level from headers and sizes
 * (cheap); the ranks exchange that once and choose the newest checkpoint
 * some level holds for every rank. Each rank then reads and verifies its own
 * file of it from the fastest level that has it, falling back to the next
 * level when that copy is damaged; a rank that finds no good copy moves the
 * line back and the ranks agree again. Skipped checkpoints are logged (rank
 * 0) and listed in `info.warnings`; `info.level` says where the line was read.
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
): Promise<NegotiatedLine> {
  const { rank, size } = comm
  const t0 = performance.now()
  // Settings and rank count first: checkpoints of another configuration are
  // refused outright, not passed over as "invalid" for a silent fresh start.
  const newest = levels
    .flatMap((l) => l.listed.filter((c) => c.complete && c.marker))
    .sort((a, b) => a.seq - b.seq)
    .pop()
  if (newest?.marker) {
    assertSameSettings({ settings: newest.marker.settings, size: newest.marker.size }, { settings, size })
  }
  // Agree on headers and sizes (cheap), then each rank reads and verifies its
  // own file of the chosen line once — the same read restore uses. A file
  // that fails there moves the line back and the ranks agree again.
  const mine = []
  for (const l of levels) mine.push(await localView(l.store, rank, size, { checksums: false }))
  let views = await comm.allgather(mergeLevelViews(mine))
  let line = chooseRecoveryLine(views)
  const negotiateMs = performance.now() - t0
  const tLoad = performance.now()
  let file: DecodedRankFile | undefined
  let from: LevelSource | undefined
  let usedLevels: string[] = []
  const late: string[] = []
  while (line.seq !== undefined) {
    const seqNow: number = line.seq
    const tried: SkipReason[] = []
    from = undefined
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
    views = views.map((v) => ({ ...v, valid: v.valid.filter((q) => q !== seqNow) }))
    for (const v of mine) v.valid = v.valid.filter((q) => q !== seqNow)
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
  if (line.seq === undefined || from === undefined) {
    warnings.push(`no valid checkpoint in ${levels.map((l) => l.store.dir).join(' or ')}: starting from the beginning`)
    warnings.forEach((w) => rank === 0 && log(`warning: ${w}`))
    return { info: { seq: undefined, skeleton: -1, step: -1, negotiateMs, loadMs, warnings }, file: undefined }
  }
  const marker = await from.store.readMarker(line.seq)
  assertSameSettings({ settings: marker.settings, size: marker.size }, { settings, size })
  warnings.forEach((w) => rank === 0 && log(`warning: ${w}`))
  const level = usedLevels.length === 1 ? usedLevels[0] : levels.map((l) => l.level).filter((l) => usedLevels.includes(l)).join('+')
  return { info: { seq: line.seq, skeleton: marker.skeleton, step: marker.step, negotiateMs, loadMs, level, warnings }, file }
}
