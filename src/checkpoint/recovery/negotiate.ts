import { performance } from 'node:perf_hooks'
import { joinBytes } from '../../domains/dtype.js'
import { CheckpointCorruptError, CheckpointError, NothingToResumeError } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import type { JsonObject } from '../format/json.js'
import type { DecodedRankFile } from '../format/rank-file.js'
import type { CheckpointLevel, CopyLevel, RecoveryInfo, RecoveryWarning } from '../events.js'
import { decodeRankFile } from '../format/rank-file.js'
import { CheckpointStore, type CheckpointSummary } from '../store/checkpoint-store.js'
import type { CommitMarker } from '../store/marker.js'
import { PARTNER_RESTORE_TAG, receiveRankFileChain, sendRankFileChain } from '../store/partner.js'
import { assembleChain } from '../store/delta-chain.js'
import { assertSameSettings, chooseRecoveryLine, localView, mergeLevelViews, type RankView, type RecoveryLine, type SkipReason } from './line.js'
import { recoveryWarningText } from './warnings.js'
import { elasticCoverage, shareOf, type Coverage } from './elastic/coverage.js'
import { assertResliceable, openElasticLine, type ElasticLine } from './elastic/line.js'
import { ServedSource } from './elastic/served.js'
import { DirectorySource, type RankFileSource } from './elastic/source.js'
import type { RankLog } from '../../util/log.js'

/** The recovery line the ranks agreed on, and this rank's file of it, already read and verified. */
export interface NegotiatedLine {
  /** `seq` undefined: no valid checkpoint, the run starts from the beginning. */
  info: RecoveryInfo
  file: DecodedRankFile | undefined
  /** The line's commit marker (the same on every rank, also on one whose own directory is gone). */
  marker?: CommitMarker
  /** A line written by another rank count: its headers, for an elastic restore (`file` is then undefined). */
  elastic?: ElasticLine
}

/** A checkpoint found damaged after negotiation (during an elastic restore), to pass over. */
export interface RejectedLine {
  seq: number
  problems: SkipReason[]
}

/**
 * Where a level's files are, fastest first: `ram` (a RAM directory of the
 * node), `node` (the node's checkpoint directory), `shared` (a directory
 * every node sees). A negotiation reads the levels in this order.
 */
export type LevelMedium = 'ram' | 'node' | 'shared'
export const MEDIUMS: readonly LevelMedium[] = ['ram', 'node', 'shared']

/** How a recovery names the levels its ranks read the line from when they differ (`memory+disk`). */
const LEVEL_NAME_ORDER: readonly (CheckpointLevel | CopyLevel)[] = ['memory', 'disk', 'partner', 'shared']

/** One level's store and what it held when the run opened it. */
export interface LevelSource {
  name: CheckpointLevel | CopyLevel
  medium: LevelMedium
  store: CheckpointStore
  listed: readonly CheckpointSummary[]
  /**
   * The store holds another rank's files (this rank is that rank's partner):
   * its copies count for rank `holds`, and are sent to it over the
   * communicator when it has no copy of its own. Every rank gives the same
   * levels in the same order.
   */
  holds?: number
  /**
   * A directory a resume's search found (another rank's or node's, see
   * FaultToleranceConfig.resumeSearch): it counts for this rank only where it
   * holds this rank's file, or files of another rank count.
   */
  searched?: boolean
  /** A level standing in for one another rank found (the levels line up across ranks): never there. */
  absent?: boolean
}

/**
 * Agree with the other ranks on the checkpoint to resume from (collective:
 * every rank calls it), over every level at once (`levels` fastest first).
 * The steps:
 * 1. refuse checkpoints of other settings outright (another rank count is
 *    resumed elastically, see elastic/restore.ts, unless it holds an array
 *    that cannot be re-sliced, which is refused naming it);
 * 2. find what each rank can use on each level from headers and sizes
 *    (cheap), exchange that once, and refuse when some ranks find nothing
 *    at all (a lost node's directory);
 * 3. choose the newest checkpoint some level holds for every rank; each
 *    rank reads and verifies its own file of it from the fastest level that
 *    has it, falling back to the next level when that copy is damaged; a
 *    rank that finds no good copy moves the line back and the ranks agree
 *    again;
 * 4. with no line: refuse (when asked to resume) or start afresh; with one,
 *    agree on its commit marker.
 * Skipped checkpoints are logged (rank 0) and listed in `info.warnings`;
 * `info.level` says where the line was read. Checkpoints in `foreign`
 * (another run's, see identity/run.ts) are neither candidates nor worth a
 * warning.
 *
 * ```ts
 * const { info, file } = await negotiateRecoveryLine(comm, [{ name: 'memory', medium: 'ram', store: mem, listed: await mem.list() }, { name: 'disk', medium: 'node', store, listed }], settings, log)
 * ```
 */
export async function negotiateRecoveryLine(
  comm: Communicator,
  levels: readonly LevelSource[],
  settings: JsonObject,
  log: RankLog,
  rejected: readonly RejectedLine[] = [],
  foreign: ReadonlySet<number> = new Set(),
  request?: 'required' | 'or-start',
): Promise<NegotiatedLine> {
  const { rank, size } = comm
  const t0 = performance.now()
  refuseOtherSettings(levels, foreign, settings, size)
  const found = await gatherViews(comm, levels, foreign)
  // A rank that finds nothing on any level (a lost node's directory, and no copy elsewhere) is refused by name.
  const diskAt = levels.findIndex((l) => l.name === 'disk')
  const disk = diskAt >= 0 ? diskAt : levels.length - 1
  refuseLostDirectories(
    found.dirs.map((d) => d[disk]),
    found.views,
    levels.some((l) => l.holds !== undefined || l.medium === 'shared'),
  )
  // What this run and the later checkpoints found wrong, in the order found.
  const late: RecoveryWarning[] = []
  for (const r of rejected) {
    dropSeq(found, r.seq)
    late.push(skippedWarning(r.seq, r.problems))
  }
  const negotiateMs = performance.now() - t0
  const tLoad = performance.now()
  const read = await readLine(comm, levels, found, late)
  const loadMs = performance.now() - tLoad
  const { line, from, elastic } = read
  const warnings = [...line.skipped.filter((s) => !late.some((w) => w.kind === 'skipped' && w.seq === s.seq)).map((s) => skippedWarning(s.seq, s.problems)), ...late]
  if (line.seq === undefined || (from === undefined && elastic === undefined)) {
    const info: RecoveryInfo = { seq: undefined, skeleton: -1, step: -1, negotiateMs, loadMs, warnings }
    startWithoutLine(comm, found, info, log, request)
    return { info, file: undefined }
  }
  const marker = await agreeOnMarker(comm, line.seq, read)
  assertSameSettings({ settings: marker.settings, size }, { settings, size })
  if (elastic) assertResliceable(elastic, size)
  logWarnings(rank, warnings, log)
  if (elastic && rank === 0) log(`resuming a checkpoint of ${marker.size} ranks on ${size} (checkpoint ${line.seq}): each rank reads the parts of the old rank files its boxes need`)
  const { usedLevels } = read
  const level = usedLevels.length === 1 ? usedLevels[0] : LEVEL_NAME_ORDER.filter((l) => usedLevels.includes(l)).join('+')
  return {
    info: { seq: line.seq, skeleton: marker.skeleton, step: marker.step, negotiateMs, loadMs, level, warnings, ...(elastic ? { fromRanks: marker.size } : {}) },
    file: read.file,
    marker,
    ...(elastic ? { elastic } : {}),
  }
}

/**
 * Settings and rank count first: checkpoints of another configuration are
 * refused outright, not passed over as "invalid" for a silent fresh start.
 * The rank count is no refusal by itself: another one means an elastic restore.
 */
function refuseOtherSettings(levels: readonly LevelSource[], foreign: ReadonlySet<number>, settings: JsonObject, size: number): void {
  const newest = levels
    .flatMap((l) => l.listed.filter((c) => c.complete && c.marker && !foreign.has(c.seq)))
    .sort((a, b) => a.seq - b.seq)
    .pop()
  if (newest?.marker) assertSameSettings({ settings: newest.marker.settings, size }, { settings, size })
}

/** What the ranks found on the levels, exchanged once (the same on every rank but `mine`). */
interface FoundViews {
  /** Each rank's directory of each level ('' for a level not worth naming). */
  dirs: string[][]
  /** This rank's view of each level. */
  mine: RankView[]
  /** Every rank's views of every level (a partner's view of its store counts for the rank whose files it holds). */
  everyView: RankView[][]
  /** Each rank's views merged over the levels, with the checkpoints of another rank count settled. */
  views: RankView[]
  coverage: Coverage[]
}

/** Each rank's view of each level from headers and sizes (cheap), exchanged (collective). */
async function gatherViews(comm: Communicator, levels: readonly LevelSource[], foreign: ReadonlySet<number>): Promise<FoundViews> {
  const { rank, size } = comm
  // Each level's directory on every rank: ranks sharing one split the old files of another rank count between them.
  // A searched directory's partner folder that holds nothing is not worth naming among the places looked at.
  const dirs = await comm.allgather(levels.map((l) => (l.absent || (l.searched && l.name === 'partner' && l.listed.length === 0) ? '' : l.store.dir)))
  const mine: RankView[] = []
  for (const [i, l] of levels.entries()) {
    const peers = dirs.flatMap((d, q) => (d[i] === l.store.dir ? [q] : []))
    // Another rank's directory: only what this rank can use there (its own file, or old files of another rank count).
    const listed = l.searched ? l.listed.filter((c) => c.files.some((f) => f.rank === rank) || (c.marker !== undefined && c.marker.size !== size)) : l.listed
    mine.push(withoutForeign([await localView(l.store, l.holds ?? rank, size, { checksums: false, elasticShare: shareOf(peers, rank), listed })], foreign)[0])
  }
  const everyView = await comm.allgather(mine)
  const merged = Array.from({ length: size }, (_, r) => mergeLevelViews(everyView.flatMap((vs) => vs.filter((v) => v.rank === r))))
  // A checkpoint of another rank count is valid for every rank when the ranks together hold every old file.
  const coverage = elasticCoverage(everyView)
  return { dirs, mine, everyView, views: withCoverage(merged, coverage, dirs), coverage }
}

/** Checkpoint `seq` is no longer a candidate on any rank. */
function dropSeq(found: FoundViews, seq: number): void {
  found.views = withoutSeq(found.views, seq)
  for (const v of found.mine) v.valid = v.valid.filter((q) => q !== seq)
}

/** The line the ranks read, or none (`line.seq` undefined), and where they read it. */
interface ReadLine {
  line: RecoveryLine
  file?: DecodedRankFile
  elastic?: ElasticLine
  /** The level this rank read its file from (for an elastic line: the level of the old file it serves, if any). */
  from?: LevelSource
  usedLevels: (CheckpointLevel | CopyLevel)[]
  /** A rank that reads the line's marker from a store of its own. */
  reader: number
}

/** One rank's attempt at reading checkpoint `seq`. */
interface Attempt {
  file?: DecodedRankFile
  elastic?: ElasticLine
  from?: LevelSource
  elasticLevels?: (CheckpointLevel | CopyLevel)[]
  /** The copies found damaged on the way. */
  tried: SkipReason[]
}

/**
 * Choose the newest line every rank has and read it (collective); a rank
 * that finds no good copy moves the line back and the ranks choose again.
 * Damaged copies passed over and skipped checkpoints go to `late`.
 */
async function readLine(comm: Communicator, levels: readonly LevelSource[], found: FoundViews, late: RecoveryWarning[]): Promise<ReadLine> {
  const { rank, size } = comm
  let line = chooseRecoveryLine(found.views)
  while (line.seq !== undefined) {
    const seq: number = line.seq
    // From the coverage, which every rank has alike: a rank may list nothing of this checkpoint (a new rank's empty
    // directory), and a branch taken on its own listing would leave it in other collectives than the rest.
    const cover = found.coverage.find((c) => c.seq === seq)
    const attempt = cover !== undefined && cover.oldSize !== size ? await readElastic(comm, levels, found.dirs, cover, seq) : await readOwnFile(comm, levels, found, seq)
    const { from, elastic, tried } = attempt
    const ok = elastic !== undefined || from !== undefined
    const problem = ok ? undefined : (tried[0] ?? { seq, rank, file: '', reason: 'no level holds this rank file' })
    // A damaged copy on a fast level that a slower level replaced is worth a warning too.
    const fallbacks: RecoveryWarning[] = from === undefined ? [] : tried.map((t) => ({ kind: 'fallback', seq, rank: t.rank, file: t.file, reason: t.reason, level: from.name }))
    // `own`: the rank reads the line's marker from a store of its own (an elastic line's: the store of a file it serves).
    const outcomes = await comm.allgather({ problem, level: from?.name, own: from !== undefined && (elastic !== undefined || from.holds === undefined), fallbacks })
    for (const o of outcomes) late.push(...o.fallbacks)
    const problems = outcomes.map((o) => o.problem).filter((p): p is SkipReason => p !== undefined)
    if (problems.length === 0) {
      const usedLevels = attempt.elasticLevels ?? [...new Set(outcomes.map((o) => o.level!))]
      return { line, file: attempt.file, elastic, from, usedLevels, reader: outcomes.findIndex((o) => o.own) }
    }
    late.push(skippedWarning(seq, problems))
    dropSeq(found, seq)
    line = chooseRecoveryLine(found.views)
  }
  return { line, usedLevels: [], reader: -1 }
}

/**
 * This rank's own file of checkpoint `seq`, from the fastest level whose copy
 * is valid (collective: every rank takes part in each partner level's
 * transfers, whether it sends, receives or neither).
 */
async function readOwnFile(comm: Communicator, levels: readonly LevelSource[], found: FoundViews, seq: number): Promise<Attempt> {
  const { rank } = comm
  const tried: SkipReason[] = []
  let file: DecodedRankFile | undefined
  let from: LevelSource | undefined
  for (let i = 0; i < levels.length; i++) {
    const l = levels[i]
    if (l.holds !== undefined) {
      const got = await fetchFromPartner(comm, l, i, seq, found.everyView, file === undefined)
      if (got.file) {
        file = got.file
        from = l
      } else if (got.problem) tried.push(got.problem)
      continue
    }
    if (from !== undefined || !found.mine[i].valid.includes(seq)) continue
    try {
      file = await l.store.loadRankFile(seq, rank, comm.allocator)
      from = l
    } catch (e) {
      const reason = e instanceof CheckpointCorruptError ? e.reason : (e as Error).message
      tried.push({ seq, rank, file: l.store.fileOf(seq, rank), reason })
    }
  }
  return { file, from, tried }
}

/**
 * A checkpoint of another rank count (collective): every old header now
 * (each read by the rank serving its file, then exchanged), the payload
 * ranges at restore, each old file from the fastest level some rank holds it
 * on. The same on every rank: a line for all, or none (the rank that found
 * the damage has the problem).
 */
async function readElastic(comm: Communicator, levels: readonly LevelSource[], dirs: readonly string[][], cover: Coverage, seq: number): Promise<Attempt> {
  const opened = await openElasticLine(servedSource(cover, levels, dirs, comm), seq, cover.oldSize, comm)
  if (!opened.line) return { tried: opened.problem ? [opened.problem] : [] }
  const elasticLevels = [...new Set(cover.servers.map((s) => s!.level))].sort((a, b) => a - b).map((i) => levels[i].name)
  const served = cover.servers.find((s) => s!.rank === comm.rank)
  return { elastic: opened.line, elasticLevels, tried: [], ...(served ? { from: levels[served.level] } : {}) }
}

/**
 * No line: refuse when asked to resume and something of the run was found
 * (or `--resume` found nothing at all); otherwise start from the beginning,
 * saying so (the same data on every rank: all refuse alike).
 */
function startWithoutLine(comm: Communicator, found: FoundViews, info: RecoveryInfo, log: RankLog, request: 'required' | 'or-start' | undefined): void {
  const { coverage, dirs, everyView } = found
  refuseUnreachable(coverage, comm.size, dirs)
  const places = [...new Set(dirs.flat().filter((d) => d !== ''))]
  const { warnings } = info
  if (request !== undefined) {
    // Asked to resume: never a silent start from the beginning.
    const any = warnings.length > 0 || everyView.some((vs) => vs.some((v) => v.valid.length > 0 || v.problems.length > 0 || (v.elastic?.length ?? 0) > 0))
    if (any) throw new NothingToResumeError(unusableMessage(places, warnings))
    if (request === 'required') throw new NothingToResumeError(nothingMessage(places))
    if (comm.rank === 0) log(`--resume-or-start: no checkpoint of this run in ${places.join(', ')}: starting afresh`, undefined, 'notice')
    return
  }
  warnings.push({ kind: 'fresh-start', places })
  logWarnings(comm.rank, warnings, log)
}

/**
 * The line's commit marker, from a rank that read its file from a store of
 * its own (one whose node was lost has none to read); its level's listing
 * has it already (read when the run opened the level). Every rank gets the
 * marker, or the same refusal (no rank may wait alone in a later collective).
 */
async function agreeOnMarker(comm: Communicator, seq: number, read: ReadLine): Promise<CommitMarker> {
  const from = read.from
  const mine = comm.rank === read.reader ? (from!.listed.find((c) => c.seq === seq)?.marker ?? (await from!.store.readMarker(seq).catch((e: Error) => e.message))) : undefined
  const marker = (await comm.allgather(mine))[read.reader]
  if (marker === undefined || typeof marker === 'string') throw new CheckpointError(`checkpoint ${seq}: its commit marker cannot be read${marker ? ` (${marker})` : ''}`)
  return marker
}

/** A checkpoint passed over, with every rank's reasons. */
function skippedWarning(seq: number, problems: readonly SkipReason[]): RecoveryWarning {
  return { kind: 'skipped', seq, problems: problems.map((p) => ({ rank: p.rank, file: p.file, reason: p.reason })) }
}

/** Rank 0 logs each warning. */
function logWarnings(rank: number, warnings: readonly RecoveryWarning[], log: RankLog): void {
  if (rank === 0) for (const w of warnings) log(`warning: ${recoveryWarningText(w)}`, undefined, 'warning')
}

/**
 * The partner level at restore (collective): a rank still without its file
 * (`need`) gets it from the rank holding its copy, when that rank's view
 * says the copy is valid; the bytes are checked against the commit marker's
 * record and fully decoded (every checksum). Each side knows from
 * `everyView` whether the transfer happens, so no rank waits in vain.
 */
async function fetchFromPartner(
  comm: Communicator,
  level: LevelSource,
  index: number,
  seq: number,
  everyView: readonly RankView[][],
  need: boolean,
): Promise<{ file?: DecodedRankFile; problem?: SkipReason }> {
  const { rank } = comm
  const needs = await comm.allgather(need)
  const source = level.holds!
  const transfers: Promise<unknown>[] = []
  // Holder side: send the copy this rank keeps for `source` when it needs it.
  // A delta goes with the earlier files of its chain, which the holder keeps too (pruning keeps what a kept delta needs).
  if (needs[source] && everyView[rank][index].valid.includes(seq)) transfers.push(sendRankFileChain(comm, source, PARTNER_RESTORE_TAG, seq, (s) => level.store.fileOf(s, source)))
  let result: { file?: DecodedRankFile; problem?: SkipReason } = {}
  const holder = everyView.findIndex((vs) => vs[index].rank === rank)
  if (need && holder >= 0 && everyView[holder][index].valid.includes(seq)) {
    const record = level.listed.find((c) => c.seq === seq)?.marker?.ranks[rank]
    const name = `rank ${holder}'s partner copy ${level.store.fileOf(seq, rank).replace(level.store.dir, '…')} of rank ${rank}`
    transfers.push(
      (async () => {
        try {
          // The holder checked size and header against its marker; every payload checksum is checked here.
          const { file: parts, chain } = await receiveRankFileChain(comm, holder, PARTNER_RESTORE_TAG, record, name)
          const file = decodeRankFile(joinBytes(parts), name)
          if (file.header.rank !== rank) throw new CheckpointCorruptError(name, `the file holds rank ${file.header.rank}'s data`)
          // A delta: assembled from the earlier files of its chain the holder sent after it (every checksum checked).
          const needs = file.header.delta?.needs ?? []
          const earlier = new Map(needs.map((s, i) => [s, chain[i]]))
          const load = async (s: number) => {
            const got = earlier.get(s)
            const at = `rank ${holder}'s partner copy ${level.store.fileOf(s, rank).replace(level.store.dir, '…')} of rank ${rank}`
            if (got === undefined || got instanceof Error) throw new CheckpointCorruptError(at, got?.message ?? 'the holder sent no such file')
            return decodeRankFile(joinBytes(got), at)
          }
          result = { file: await assembleChain(file, name, load, comm.allocator) }
        } catch (e) {
          result = { problem: { seq, rank, file: name, reason: e instanceof CheckpointCorruptError ? e.reason : (e as Error).message } }
        }
      })(),
    )
  }
  await Promise.all(transfers)
  return result
}


/** The views with checkpoint `seq` no longer valid anywhere. */
function withoutSeq(views: RankView[], seq: number): RankView[] {
  return views.map((v) => ({ ...v, valid: v.valid.filter((q) => q !== seq) }))
}

/** Views without the checkpoints in `foreign`. */
function withoutForeign(views: readonly RankView[], foreign: ReadonlySet<number>): RankView[] {
  if (foreign.size === 0) return [...views]
  return views.map((v) => ({
    ...v,
    valid: v.valid.filter((s) => !foreign.has(s)),
    problems: v.problems.filter((p) => !foreign.has(p.seq)),
    ...(v.elastic ? { elastic: v.elastic.filter((h) => !foreign.has(h.seq)) } : {}),
  }))
}

/**
 * The merged views with every checkpoint of another rank count settled: valid
 * for every rank when the ranks together hold each old file valid somewhere
 * (its damaged copies then need no mention); otherwise its damaged files are
 * already among the problems, and each file found nowhere is named where the
 * checkpoint's other files are (the same on every rank: said once).
 */
function withCoverage(views: readonly RankView[], coverage: readonly Coverage[], dirs: readonly string[][]): RankView[] {
  if (coverage.length === 0) return [...views]
  const covered = new Set(coverage.filter((c) => c.missing.length === 0).map((c) => c.seq))
  const absent = coverage.flatMap((c) => {
    const beside = c.servers.find((s) => s !== undefined)
    const where = beside ? new CheckpointStore(dirs[beside.rank][beside.level]) : undefined
    return c.absent.map((r) => ({ seq: c.seq, file: where?.fileOf(c.seq, r) ?? `rank-${r}.mlf`, reason: 'the file is missing, and no rank of this run holds a copy of it' }))
  })
  return views.map((v) => ({
    ...v,
    valid: [...v.valid, ...covered].sort((a, b) => b - a),
    problems: [...v.problems.filter((p) => !covered.has(p.seq)), ...absent.map((a) => ({ ...a, rank: v.rank }))],
  }))
}

/**
 * The source of an elastic line: each old file read by its server (see
 * elasticCoverage) and by every rank whose store at that level is the same
 * directory; the others ask the server for their byte ranges.
 */
function servedSource(cover: Coverage, levels: readonly LevelSource[], dirs: readonly string[][], comm: Communicator): RankFileSource {
  const { rank } = comm
  const servers = cover.servers.map((s) => s!)
  const byLevel = new Map<number, DirectorySource>()
  const sourceAt = (i: number) => byLevel.get(i) ?? byLevel.set(i, new DirectorySource(levels[i].store)).get(i)!
  const local = servers.map((s) => (dirs[s.rank][s.level] === dirs[rank][s.level] ? sourceAt(s.level) : undefined))
  const names = servers.map((s, r) => new CheckpointStore(dirs[s.rank][s.level]).fileOf(cover.seq, r))
  return new ServedSource(comm, servers, local, names, [...new Set(servers.map((s) => dirs[s.rank][s.level]))].join(', '))
}

/** `--resume` found checkpoints of the run, but none it can use: where it looked, and each checkpoint with why. */
function unusableMessage(places: readonly string[], skipped: readonly RecoveryWarning[]): string {
  return (
    `--resume found checkpoints of this run but none it can use; it looked in ${places.join(', ')}:\n` +
    skipped.map((w) => `  ${recoveryWarningText(w)}`).join('\n') +
    '\nPut a good copy of the files named back, or start afresh: --fresh discards these checkpoints.'
  )
}

/** `--resume` found no checkpoint of the run at all. */
function nothingMessage(places: readonly string[]): string {
  return (
    `--resume found no checkpoint of this run to resume; it looked in ${places.join(', ')}. ` +
    'Check --checkpoint-dir (and --memory-dir, --shared-dir) against the run to continue; to start afresh, run without --resume, ' +
    'or give --resume-or-start (resume when there is something to resume, else start afresh).'
  )
}

/**
 * No recovery line, while a checkpoint of another rank count has old files
 * that no rank of this run finds at all (not even damaged): they are on
 * directories this run does not reach, so refuse rather than start afresh.
 * The same on every rank (collective data).
 */
function refuseUnreachable(coverage: readonly Coverage[], size: number, dirs: readonly string[][]): void {
  const c = coverage.find((x) => x.absent.length > 0)
  if (!c) return
  const many = c.absent.length > 1
  throw new NothingToResumeError(
    `cannot resume checkpoint ${c.seq}, taken on ${c.oldSize} ranks, on ${size}: the file${many ? 's' : ''} of old rank${many ? 's' : ''} ${c.absent.join(', ')} ` +
      `${many ? 'are' : 'is'} in no directory of this run's ranks (${[...new Set(dirs.flat())].join(', ')}), neither as ${many ? 'their' : 'its'} own nor as a partner copy. ` +
      'Resume on ranks that reach them (the nodes that wrote them), put the files back, or start afresh without --resume.',
  )
}

/**
 * Ranks with directories of their own (`{node}`, `{rank}`): when some ranks
 * hold valid checkpoints and others find no trace of any (their directory is
 * empty or gone, as a lost node's disk), refuse, naming the missing files,
 * instead of quietly starting afresh. `dirs`: every rank's disk directory.
 * Every rank sees the same views, so all refuse alike.
 */
function refuseLostDirectories(dirs: readonly string[], views: readonly RankView[], copies: boolean): void {
  const holders = views.filter((v) => v.valid.length > 0)
  const blind = views.filter((v) => v.valid.length === 0 && v.problems.length === 0)
  if (holders.length === 0 || blind.length === 0) return
  const seq = Math.max(...holders.map((v) => v.valid[0]))
  const missing = blind.map((v) => new CheckpointStore(dirs[v.rank]).fileOf(seq, v.rank))
  const who = (vs: readonly RankView[], many = 'hold', one = 'holds') =>
    vs.length > 1 ? `ranks ${vs.map((v) => v.rank).join(', ')} ${many}` : `rank ${vs[0].rank} ${one}`
  throw new NothingToResumeError(
    `cannot resume: ${who(holders)} checkpoint ${seq}, but ${who(blind, 'find', 'finds')} no checkpoint at all (a lost node's directory?); ` +
      `missing: ${missing.join(', ')}${copies ? ' (and no partner or shared copy of them was found)' : ''}. ` +
      'Put those files back (from a copy), or start afresh without --resume.',
  )
}
