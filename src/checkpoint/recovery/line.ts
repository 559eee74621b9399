import { ConfigError, SettingsMismatchError, type SettingDifference } from '../../errors.js'
import { childPath, isPlainObject } from '../format/json.js'
import { validRanks, type CheckpointStore, type CheckpointSummary } from '../store/checkpoint-store.js'

/** Why one checkpoint cannot be used, as seen by one rank. */
export interface SkipReason {
  seq: number
  rank: number
  /** The unusable file; empty when the rank did not see the checkpoint at all. */
  file: string
  reason: string
  /** The checkpoint was never committed here (see CheckpointSummary.uncommitted): no loss to warn about, unless another rank has it. */
  uncommitted?: boolean
}

/**
 * What one rank finds usable in the checkpoint directory. Plain data, so the
 * lead can exchange views over the communicator before choosing the line.
 */
export interface RankView {
  rank: number
  /** Checkpoints complete and valid for this rank, newest first. */
  valid: number[]
  /** Checkpoints this rank cannot use, and why. */
  problems: SkipReason[]
  /**
   * Checkpoints of another rank count (an elastic restore): the old rank
   * files this rank checked in this store and found valid. Such a checkpoint
   * is in neither `valid` nor `problems` (damaged files are): it is usable
   * when the ranks together hold every old file (elastic/coverage.ts).
   */
  elastic?: ElasticHolding[]
}

/** Old rank files of checkpoint `seq` (taken on `oldSize` ranks) checked in one store. */
export interface ElasticHolding {
  seq: number
  oldSize: number
  /** Found valid. */
  ranks: number[]
  /** Present but not valid (the reasons are in the view's problems). */
  damaged: number[]
}

/** The chosen recovery line and what was passed over to reach it. */
export interface RecoveryLine {
  /** The newest checkpoint valid on every rank, or undefined: start afresh. */
  seq: number | undefined
  /** Checkpoints newer than `seq` that were skipped, newest first, with every rank's reasons. */
  skipped: { seq: number; problems: SkipReason[] }[]
}

/**
 * Chooses the recovery line from every rank's view: the newest checkpoint that
 * all ranks find valid. Newer checkpoints are returned in `skipped` with the
 * reasons (file and why) so the caller can warn; duplicate reports (every rank
 * seeing the same missing marker) are merged.
 *
 * ```ts
 * const views = await comm.allGather(await localView(store, rank, size))
 * const line = chooseRecoveryLine(views)
 * for (const s of line.skipped) log.warn(`checkpoint ${s.seq} skipped: ${s.problems.map((p) => `${p.file}: ${p.reason}`).join('; ')}`)
 * ```
 */
export function chooseRecoveryLine(views: readonly RankView[]): RecoveryLine {
  if (views.length === 0) throw new ConfigError('chooseRecoveryLine needs the view of at least one rank')
  let common: Set<number> = new Set(views[0].valid)
  for (const v of views.slice(1)) common = new Set(v.valid.filter((s) => common.has(s)))
  const seq = common.size === 0 ? undefined : Math.max(...common)
  const floor = seq ?? -1

  const newer = new Set<number>()
  for (const v of views) {
    for (const s of v.valid) if (s > floor) newer.add(s)
    // A checkpoint no rank has committed was being written when its run stopped: nothing is skipped (when another
    // rank has it, valid or damaged, it is listed with this rank's reason).
    for (const p of v.problems) if (p.seq > floor && !p.uncommitted) newer.add(p.seq)
  }
  const skipped = [...newer]
    .sort((a, b) => b - a)
    .map((s) => {
      const problems: SkipReason[] = []
      const seen = new Set<string>()
      for (const v of views) {
        const mine = v.problems.filter((p) => p.seq === s)
        if (mine.length === 0 && !v.valid.includes(s)) {
          mine.push({ seq: s, rank: v.rank, file: '', reason: `rank ${v.rank} did not find this checkpoint` })
        }
        for (const p of mine) {
          // The same file and reason reported by several ranks (a shared COMMIT) is said once.
          const key = `${p.file}\0${p.reason}`
          if (seen.has(key)) continue
          seen.add(key)
          problems.push(p)
        }
      }
      return { seq: s, problems }
    })
  return { seq, skipped }
}

/**
 * One rank's view over several levels (each from localView, fastest level
 * first) as one view: a checkpoint is valid for the rank when any level holds
 * a valid copy of its file — the same bytes, so which level does not change
 * the line, only how fast it is read. Problems are kept only for checkpoints
 * no level can provide.
 *
 * ```ts
 * const view = mergeLevelViews([await localView(memory, rank, size), await localView(disk, rank, size)])
 * ```
 */
export function mergeLevelViews(levels: readonly RankView[]): RankView {
  if (levels.length === 0) throw new ConfigError('mergeLevelViews needs the view of at least one level')
  const valid = new Set<number>()
  for (const v of levels) for (const s of v.valid) valid.add(s)
  const problems: SkipReason[] = []
  for (const v of levels) for (const p of v.problems) if (!valid.has(p.seq)) problems.push(p)
  return { rank: levels[0].rank, valid: [...valid].sort((a, b) => b - a), problems }
}

export interface LocalViewOptions {
  /**
   * Verify every payload checksum (default true): a corrupt payload found only
   * after the ranks agreed on a line would cost another restart.
   */
  checksums?: boolean
  /**
   * For a checkpoint of another rank count: which of the old rank files
   * present in this store this rank checks (default: old rank r by new rank
   * r mod size, right when every rank sees one directory). Ranks sharing a
   * directory split its files between them.
   */
  elasticShare?: (present: readonly number[]) => number[]
  /** The store's listing when the caller has it already (`store.list()`, oldest first): not listed again. */
  listed?: readonly CheckpointSummary[]
}

/**
 * This rank's view of the store: every checkpoint, newest first, sorted into
 * valid for this rank (marker intact, own file present, right size, header and,
 * by default, payload checksums correct) and not (with the reason). A
 * checkpoint of another rank count goes to `elastic` instead: the old rank
 * files of this rank's share (`elasticShare`) found valid here.
 *
 * ```ts
 * const view = await localView(store, rank, size)
 * ```
 */
export async function localView(store: CheckpointStore, rank: number, size: number, options: LocalViewOptions = {}): Promise<RankView> {
  const view: RankView = { rank, valid: [], problems: [] }
  const all = options.listed ? [...options.listed] : await store.list()
  for (const s of all.reverse()) {
    // A user's folder named like a checkpoint is no checkpoint of any run: not a problem of one (the start notes it).
    if (s.foreign) continue
    if (!s.complete) {
      view.problems.push({ seq: s.seq, rank, file: s.problemPath ?? store.markerOf(s.seq), reason: s.problem ?? 'no usable commit marker', ...(s.uncommitted ? { uncommitted: true } : {}) })
      continue
    }
    const oldSize = s.marker?.size ?? size
    if (oldSize !== size) {
      // Another rank count (an elastic restore) needs every old file somewhere: this rank checks its share of
      // the files present here and says which are valid; whether the ranks hold them all is decided together.
      const present = s.files.map((f) => f.rank).filter((r) => r < oldSize)
      const ranks = (options.elasticShare ?? ((p) => p.filter((r) => r % size === rank)))(present)
      const report = await store.validate(s.seq, oldSize, { ranks, checksums: options.checksums ?? true })
      const ok = validRanks(report, ranks)
      ;(view.elastic ??= []).push({ seq: s.seq, oldSize, ranks: ok, damaged: ranks.filter((r) => !ok.includes(r)) })
      for (const p of report.problems) view.problems.push({ seq: s.seq, rank, file: p.file, reason: p.reason })
      continue
    }
    const report = await store.validate(s.seq, oldSize, { ranks: [rank], checksums: options.checksums ?? true })
    if (report.ok) view.valid.push(s.seq)
    else for (const p of report.problems) view.problems.push({ seq: s.seq, rank, file: p.file, reason: p.reason })
  }
  return view
}

/** The settings of a run, or of the run that wrote a checkpoint (commit markers and rank headers fit). */
export interface SettingsSnapshot {
  settings: Readonly<Record<string, unknown>>
  /** Rank count. */
  size: number
}

/**
 * Every difference between the settings a checkpoint was taken with and the
 * current ones, the rank count first (as `ranks`), then each differing
 * setting by its path (`grid.n`, `tiles[2]`). A key that is missing on one side
 * and `undefined` on the other is no difference.
 *
 * ```ts
 * compareSettings(marker, { settings, size })
 * // [{ name: 'ranks', old: 4, new: 8 }, { name: 'grid.n', old: 512, new: 1024 }]
 * ```
 */
export function compareSettings(stored: SettingsSnapshot, current: SettingsSnapshot): SettingDifference[] {
  const out: SettingDifference[] = []
  if (stored.size !== current.size) out.push({ name: 'ranks', old: stored.size, new: current.size })
  diffInto(stored.settings, current.settings, '', out)
  return out
}

/**
 * Throws SettingsMismatchError listing every difference, when there is any.
 *
 * ```ts
 * assertSameSettings(await store.readMarker(line.seq), { settings, size })
 * ```
 */
export function assertSameSettings(stored: SettingsSnapshot, current: SettingsSnapshot): void {
  const differences = compareSettings(stored, current)
  if (differences.length > 0) throw new SettingsMismatchError(differences)
}

function diffInto(a: unknown, b: unknown, path: string, out: SettingDifference[]): void {
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = [...Object.keys(a), ...Object.keys(b).filter((k) => !Object.prototype.hasOwnProperty.call(a, k))]
    for (const k of keys) diffInto(a[k], b[k], path === '' ? k : childPath(path, k), out)
    return
  }
  if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    for (let i = 0; i < a.length; i++) diffInto(a[i], b[i], `${path}[${i}]`, out)
    return
  }
  if (!sameLeaf(a, b)) out.push({ name: path === '' ? 'settings' : path, old: a, new: b })
}

function sameLeaf(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true
  // Arrays of different lengths, or an object against a leaf: compare as JSON for a stable answer.
  return JSON.stringify(a) === JSON.stringify(b) && typeof a === typeof b && a !== undefined
}
