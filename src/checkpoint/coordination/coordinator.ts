import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { ConfigError, errorRecord, InternalError, NothingToResumeError, PreemptedError, reviveError, RunInterruptedError, type ErrorRecord } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import type { FaultToleranceConfig, ProgramIdentity } from '../config.js'
import type { CheckpointAt, CheckpointControl } from '../control.js'
import type { CheckpointEvent, RecoveryInfo, RecoveryWarning, ResumedFigures } from '../events.js'
import type { DecodedRankFile } from '../format/rank-file.js'
import { codeIdentityOf, type CodeIdentity } from '../identity/code.js'
import { checkResumeCode, newestComplete, newRunId, otherRuns } from '../identity/run.js'
import { parsePolicy, type CheckpointPolicy } from '../policy/policy.js'
import type { ElasticLine } from '../recovery/elastic/line.js'
import { restoreElastic } from '../recovery/elastic/restore.js'
import { MEDIUMS, negotiateRecoveryLine, type LevelSource, type RejectedLine } from '../recovery/negotiate.js'
import { recoveryWarningText } from '../recovery/warnings.js'
import { restoreFromFile } from '../recovery/restore.js'
import type { RecoveryDecision, RestoreOutcome, ResumeFigures, SkeletonHooks, SkeletonState } from '../skeleton-hooks.js'
import { CheckpointStore, isStoreEntry, type CheckpointSummary } from '../store/checkpoint-store.js'
import { cleanOwnedDirectory, removeIfUnused } from '../store/owned-dir.js'
import { CheckpointNumbers, numberingOf } from '../store/numbering.js'
import type { MembershipRecord } from '../store/marker.js'
import { partnerDirOf } from '../store/partner.js'
import { CheckpointCommitter } from './commit.js'
import { CheckpointCopies } from './copies.js'
import { copyTargetsOf, openLevels, ownLevel, parityLevelsOf, type Level } from './levels.js'
import { rebuildLostFiles, type RebuildOutcome } from '../redundancy/rebuild.js'
import { CheckpointVote, type ClockState } from './vote.js'
import type { RankLog } from '../../util/log.js'

/** A memory checkpoint whose stall exceeds this share of the compute between two of them draws a warning. */
const MEMORY_COST_SHARE = 0.1

/** Callbacks and outside requests the coordinator reports to or honours. */
export interface CoordinatorHooks {
  onCheckpoint?: (e: CheckpointEvent) => void
  onResumed?: (r: ResumedFigures) => void
  control?: CheckpointControl
  /** Checkpoints found damaged by an earlier elastic restore of this session: passed over. */
  rejected?: readonly RejectedLine[]
}

/**
 * The checkpoint side of a rank, as the skeletons' hooks: on a resumed run it
 * negotiates the recovery line (recovery/negotiate.ts) and restores registered
 * data (recovery/restore.ts); at each checkpoint point it asks the vote
 * whether to save or stop (vote.ts) and has the committer write and commit
 * (commit.ts). It only ties these together.
 *
 * ```ts
 * const ft = await CheckpointCoordinator.open(comm, config, { fingerprint, settings }, log)
 * rt.hooks = ft     // skeletons call recoveryFor / restore / checkpointPoint
 * ```
 */
export class CheckpointCoordinator implements SkeletonHooks {
  /** This rank's file of the recovery line, read and verified during negotiation. */
  private restoredFile: DecodedRankFile | undefined
  /** The recovery line when it was written by another rank count. */
  private elasticLine: ElasticLine | undefined
  private recoveryInfo: RecoveryInfo | undefined
  private memoryWarned = false
  /** This rank is the lowest of those sharing its memory level's directory: it cleans it when the program is done. */
  private cleansMemory = false

  private constructor(
    private readonly comm: Communicator,
    private readonly cfg: FaultToleranceConfig,
    private readonly store: CheckpointStore,
    private readonly memory: CheckpointStore | undefined,
    private readonly vote: CheckpointVote,
    private readonly commits: CheckpointCommitter,
    private readonly log: RankLog,
    private readonly hooks: CoordinatorHooks,
  ) {}

  /** What the resume found (undefined on a fresh start). */
  get recovery(): RecoveryInfo | undefined {
    return this.recoveryInfo
  }

  /** True when this run resumes from a checkpoint. */
  get recovering(): boolean {
    return this.recovery?.seq !== undefined
  }

  /**
   * Open the run's levels on every rank (collective) and, on `resume`, agree
   * on the recovery line. The steps: open the levels (levels.ts) and, on a
   * resume, the directories its search found; refuse another program's
   * checkpoints; a fresh start discards the copies an earlier run left; list
   * every level; number the next checkpoint and settle the lineage; then the
   * committer, and on a resume the negotiation and the code check.
   */
  static async open(
    comm: Communicator,
    cfg: FaultToleranceConfig,
    id: ProgramIdentity,
    log: RankLog,
    hooks: CoordinatorHooks = {},
  ): Promise<CheckpointCoordinator> {
    const policies = checkedPolicies(cfg)
    const levels = await openLevels(comm, cfg, policies)
    // A resume also reads what the run may have left elsewhere on this host: the earlier run's memory level, the
    // other `{node}`/`{rank}` directories (a lost node's ranks are renumbered in the relaunch). One that holds another
    // program's checkpoints, or cannot be read, is not this run's: passed over (on this rank alone, no collective).
    const search = cfg.resume ? await searchedLevels(comm, cfg) : []
    for (const l of search) if (!l.absent) await listIfOurs(l, id.fingerprint)
    await refuseOtherPrograms(comm, levels, id.fingerprint)
    // A fresh start discards the copies as the supervisor discarded the directory's own checkpoints (they derive from them).
    if (!cfg.resume) await discardCopies(comm, levels)
    for (const l of levels) l.listed = await l.store.list()
    // A lost node's files are rebuilt from their XOR sets first: the negotiation then finds them as the ranks' own.
    const rebuilds = cfg.resume ? await rebuildFromParity(comm, levels, log) : []
    // One numbering over every level: a checkpoint keeps its number when it is flushed from memory to disk, or copied.
    const everyLevel = [...levels, ...search].flatMap((l) => l.listed).sort((a, b) => a.seq - b.seq)
    // From molotof's own checkpoints only: a number a user's folder has is skipped on every rank, never written into.
    const mine = numberingOf(everyLevel, (await Promise.all(levels.map((l) => l.store.numbersInUse()))).flat())
    const seq = new CheckpointNumbers(await comm.allreduce(mine.first, 'max'), (await comm.allgather(mine.taken)).flat())
    const { runId, code } = await agreeOnLineage(comm, cfg, id, everyLevel)
    const vote = new CheckpointVote(comm, cfg.policy, hooks.control, policies.memory)
    const commits = await openCommitter(comm, cfg, id, levels, seq, vote, hooks, { runId, code, membership: cfg.membership })
    const memory = ownLevel(levels, 'memory')
    const coordinator = new CheckpointCoordinator(comm, cfg, ownLevel(levels, 'disk')!.store, memory?.store, vote, commits, log, hooks)
    coordinator.cleansMemory = memory?.writesMarker === true
    if (cfg.resume) await coordinator.resumeLine(levels, search, id, code, otherRuns(everyLevel, runId), rebuilds)
    commits.startIoThread()
    return coordinator
  }

  /**
   * A resume: agree on the recovery line over every level and the searched
   * directories (fastest first; a searched directory after the run's own of
   * the same medium), then check the program's code against the line's.
   * Only this run's lineage counts (`foreign`: another run's checkpoints).
   */
  private async resumeLine(
    levels: readonly Level[],
    search: readonly SearchedLevel[],
    id: ProgramIdentity,
    code: CodeIdentity | undefined,
    foreign: ReadonlySet<number>,
    rebuilds: readonly RebuildOutcome[] = [],
  ): Promise<void> {
    const { comm, cfg, log } = this
    // Parity slices are no rank's file: they were used above, to rebuild lost files.
    const sources = [...levels.filter((l) => l.name !== 'xor'), ...search].sort((a, b) => MEDIUMS.indexOf(a.medium) - MEDIUMS.indexOf(b.medium))
    // A refused resume leaves no memory level it created only to look into.
    const memoryDir = levels.find((l) => l.name === 'memory')?.store.dir
    const { info, file, elastic, marker: lineMarker } = await negotiateRecoveryLine(comm, sources, id.settings, log, this.hooks.rejected, foreign, cfg.resumeRequest).catch(
      (e: unknown) => {
        if (memoryDir !== undefined) removeIfUnused(memoryDir)
        throw withParityReasons(e, rebuilds)
      },
    )
    if (info.seq !== undefined) {
      const marker = lineMarker ?? (await this.store.readMarker(info.seq))
      // The same inputs on every rank (the code identity comes from rank 0): all refuse alike, or all go on.
      const reason = checkResumeCode(marker.code, code, { seq: info.seq, allow: cfg.allowCodeChange === true, programFile: id.code?.programFile })
      if (reason !== undefined) {
        const warning: RecoveryWarning = { kind: 'code-changed', seq: info.seq, reason }
        info.warnings.push(warning)
        if (comm.rank === 0) log(`warning: ${recoveryWarningText(warning)}`, undefined, 'warning')
      }
    }
    this.recoveryInfo = info
    this.restoredFile = file
    this.elasticLine = elastic
  }

  recoveryFor(index: number): RecoveryDecision {
    const r = this.recovery
    if (!r || r.seq === undefined || index > r.skeleton) return { kind: 'normal' }
    if (index < r.skeleton) return { kind: 'skip' }
    return { kind: 'resume', step: r.step }
  }

  async restore(state: SkeletonState): Promise<RestoreOutcome> {
    const r = this.recovery
    if (!r || r.seq === undefined) throw new InternalError('restore called without a recovery line')
    if (this.elasticLine) return this.restoreElastic(state, this.elasticLine)
    const file = this.restoredFile ?? (await this.store.loadRankFile(r.seq, this.comm.rank, this.comm.allocator))
    this.restoredFile = undefined
    const restored = restoreFromFile(state, file, r.seq)
    const clock = this.vote.clockFor(state)
    clock.lastAt = performance.now()
    if (clock.memory) clock.memory.lastAt = clock.lastAt
    return restored
  }

  /** A line of another rank count: read the parts of the old files this rank needs (collective). */
  private async restoreElastic(state: SkeletonState, line: ElasticLine): Promise<RestoreOutcome> {
    this.elasticLine = undefined
    const { outcome, figures } = await restoreElastic(state, line, this.comm)
    const all = await this.comm.allgather([figures.bytesRead, figures.bytesNeeded, figures.headerBytes, figures.verifyBytes])
    const sum = (k: number) => all.reduce((n, f) => n + f[k], 0)
    const total = { bytesRead: sum(0), bytesNeeded: sum(1), headerBytes: sum(2), verifyBytes: sum(3) }
    if (this.recovery) this.recovery.elastic = total
    if (this.comm.rank === 0) {
      this.log(
        `elastic restore from ${line.oldSize} ranks: read ${total.bytesRead} payload bytes for ${total.bytesNeeded} needed ` +
          `(×${(total.bytesRead / Math.max(1, total.bytesNeeded)).toFixed(3)}), ${total.headerBytes} header bytes, ${total.verifyBytes} bytes read only to verify checksums`,
      )
    }
    const clock = this.vote.clockFor(state)
    clock.lastAt = performance.now()
    if (clock.memory) clock.memory.lastAt = clock.lastAt
    return outcome
  }

  resumed(f: ResumeFigures): void {
    const r = this.recovery
    if (r) Object.assign(r, { replayMs: f.replayMs, restoreMs: f.restoreMs })
    if (r && r.seq !== undefined) {
      const { seq, skeleton, step, negotiateMs, loadMs } = r
      this.hooks.onResumed?.({ seq, skeleton, step, negotiateMs, loadMs, replayMs: f.replayMs, restoreMs: f.restoreMs, level: r.level ?? 'disk' })
    }
    if (this.comm.rank === 0) {
      this.log(`replayed ${f.step} supersteps of skeleton ${f.skeleton} in ${f.replayMs.toFixed(1)} ms, restored in ${f.restoreMs.toFixed(1)} ms`)
    }
  }

  /**
   * Most checkpoint points have nothing to do (no checkpoint due by a step
   * policy, no vote due, nothing in flight, not the last superstep): those
   * return undefined at once, without a promise or any other allocation, so
   * a superstep with a policy that never fires allocates nothing.
   */
  checkpointPoint(state: SkeletonState, last: boolean): Promise<void> | undefined {
    const clock = this.vote.clockFor(state)
    const stop = this.cfg.interrupt
    if (!last && !this.commits.inFlight && this.vote.quiet(state, clock) && !(stop !== undefined && stop.skeleton === state.index && stop.step === state.step)) {
      const faults = this.hooks.control?.faults
      if (faults) {
        const at = this.quietAt
        at.skeleton = state.index
        at.step = state.step
        faults.checkpointPointDone(at)
      }
      return undefined
    }
    return this.checkpointPointAsync(state, last, clock)
  }

  /** Where the last quiet checkpoint point was (one object, reused: the faults hook only reads it). */
  private readonly quietAt: CheckpointAt = { skeleton: 0, step: 0 }

  private async checkpointPointAsync(state: SkeletonState, last: boolean, clock: ClockState): Promise<void> {
    const now = performance.now()
    const { go, level, preempt, pollCommit } = await this.vote.decide(state, clock, now, this.commits.inFlight)
    if (pollCommit) await this.commits.commitIfAllDurable()
    const stop = this.cfg.interrupt
    const stopping = stop !== undefined && stop.skeleton === state.index && stop.step === state.step
    if (go) {
      const since = clock.memory ? now - clock.memory.lastAt : 0
      await this.commits.write(state, clock, now, level, last || preempt || stopping)
      if (clock.memory) this.warnIfMemoryTooFrequent(clock.memory.costs, since)
    }
    // The end of a skeleton, a preemption or an interruption commit what is still in flight.
    if (last || preempt || stopping) await this.commits.finishPending(true)
    // A checkpoint written in the background reaches the failure-injection hook (tornWrite) from there,
    // during the memory write or the disk flush; a point that wrote in the foreground or nothing is over here.
    if (!(go && this.memory)) this.hooks.control?.faults?.checkpointPointDone({ skeleton: state.index, step: state.step })
    if (preempt) throw new PreemptedError(go ? this.commits.lastSeq : undefined)
    if (stopping) throw new RunInterruptedError(state.index, state.step)
  }

  /**
   * Wait for this rank's background checkpoint work to end and free its I/O
   * thread (see CheckpointCommitter.settle): nothing of this run touches a
   * file afterwards.
   */
  async settle(): Promise<void> {
    await this.commits.settle()
  }

  /**
   * The program is done on this rank (its last checkpoint point, collective,
   * is behind every rank): the lowest rank of each memory level directory
   * frees its RAM, deleting only the files the level wrote there (and the
   * directory, when molotof created it and nothing else is in it). Disk
   * checkpoints stay, as always.
   */
  async finish(): Promise<void> {
    if (this.cleansMemory && this.memory) cleanOwnedDirectory(this.memory.dir, isStoreEntry)
  }

  /**
   * A memory policy more frequent than its own cost allows: warn once (rank
   * 0) when a memory checkpoint's stall, measured, is more than 10 % of the
   * compute time between two of them.
   */
  private warnIfMemoryTooFrequent(costs: readonly number[], intervalMs: number): void {
    if (this.memoryWarned || costs.length < 2 || intervalMs <= 0) return
    const cost = costs[costs.length - 1]
    if (cost <= MEMORY_COST_SHARE * intervalMs) return
    this.memoryWarned = true
    if (this.comm.rank === 0) {
      this.log(
        `warning: a memory checkpoint costs ${cost.toFixed(1)} ms and they are ${intervalMs.toFixed(1)} ms of compute apart ` +
          `(${((100 * cost) / (cost + intervalMs)).toFixed(0)} % of the run); space them at least ${(cost / MEMORY_COST_SHARE).toFixed(0)} ms apart ` +
          // With --async-checkpoints the memory level has no policy of its own: every disk checkpoint goes through it.
          (this.cfg.memory?.policy !== undefined && 'kind' in this.cfg.memory.policy && this.cfg.memory.policy.kind === 'off'
            ? '(disk checkpoints go through memory with --async-checkpoints: a larger --checkpoint every:<steps>, a time such as 2s, or mtbf:<duration>)'
            : '(a larger --memory-checkpoint every:<steps>, a time such as 2s, or mtbf:<duration>)'),
        // Once per run: every restart measures it again, and would say it again.
        'memory-cost',
        'warning',
      )
    }
  }

  /**
   * Checkpoint at the next checkpoint point (policy `request`, or sooner than
   * the policy would). Under a supervisor one rank asking is enough; in a run
   * without votes, call it on every rank.
   */
  request(): void {
    this.vote.request()
  }
}

/**
 * The lineage the ranks write and resume: the configured run id (a supervised
 * run passes its own), else, resuming, the newest complete checkpoint's, else
 * a new one; and the program's code identity when it was loaded from a file.
 */
function lineageOf(cfg: FaultToleranceConfig, id: ProgramIdentity, listed: Parameters<typeof newestComplete>[0]): { runId: string; code: CodeIdentity | undefined } {
  const newest = cfg.resume ? newestComplete(listed)?.marker : undefined
  const runId = cfg.runId ?? (newest !== undefined ? (newest.runId ?? '') : newRunId())
  return { runId, code: id.code ? (id.code.identity ?? codeIdentityOf(id.code.programFile, id.code.modules)) : undefined }
}

/** The level policies, checked (`keep` too): the disk level's, and the memory level's when the run has one. */
function checkedPolicies(cfg: FaultToleranceConfig): { disk: CheckpointPolicy; memory?: CheckpointPolicy } {
  if (!Number.isSafeInteger(cfg.keep) || cfg.keep < 1) throw new ConfigError(`keep must be a positive integer (got ${cfg.keep})`)
  const disk = parsePolicy(cfg.policy)
  // `async` alone: a memory level that only stages the background disk writes (its own policy never fires).
  const memory = cfg.memory ? parsePolicy(cfg.memory.policy) : cfg.async ? ({ kind: 'off' } as const) : undefined
  return { disk, ...(memory ? { memory } : {}) }
}

/** Every rank checks every level holds this program's checkpoints only; any refusal is reported by all of them alike (collective). */
async function refuseOtherPrograms(comm: Communicator, levels: readonly Level[], fingerprint: string): Promise<void> {
  const check = await settle(async () => {
    for (const l of levels) await l.store.assertFingerprint(fingerprint)
  })
  const refused = (await comm.allgather(check)).find((c) => c !== undefined)
  if (refused) throw reviveError(refused)
}

/**
 * A fresh start: the lowest rank of each directory of a copy level (partner,
 * shared) removes the copies an earlier run left there (collective: every
 * rank calls it, any failure is every rank's).
 */
async function discardCopies(comm: Communicator, levels: readonly Level[]): Promise<void> {
  const failure = await settle(async () => {
    for (const l of levels) if (l.copy && l.writesMarker) for (const c of await l.store.list()) await l.store.remove(c.seq)
  })
  const refused = (await comm.allgather(failure)).find((f) => f !== undefined)
  if (refused) throw reviveError(refused)
}

/**
 * Rank 0 decides the run lineage and hashes the program's code (once per run
 * start); one allgather shares both. A supervised resume whose node-0
 * directory was lost adopts the newest lineage any rank holds.
 */
async function agreeOnLineage(
  comm: Communicator,
  cfg: FaultToleranceConfig,
  id: ProgramIdentity,
  everyLevel: Parameters<typeof newestComplete>[0],
): Promise<{ runId: string; code: CodeIdentity | undefined }> {
  const decided = (await comm.allgather(comm.rank === 0 ? lineageOf(cfg, id, everyLevel) : undefined))[0]!
  const runId = cfg.adoptLineage ? ((await newestLineage(comm, everyLevel)) ?? decided.runId) : decided.runId
  return { runId, code: decided.code }
}

/**
 * The committer, with the copies of each level that feeds a copy level
 * (disk's first, then memory's: see CheckpointCommitter.copies). An earlier
 * attempt's copies committed on every partner are kept until newer ones
 * are copied (collective).
 */
async function openCommitter(
  comm: Communicator,
  cfg: FaultToleranceConfig,
  id: ProgramIdentity,
  levels: readonly Level[],
  seq: CheckpointNumbers,
  vote: CheckpointVote,
  hooks: CoordinatorHooks,
  stamp: { runId: string; code: CodeIdentity | undefined; membership: MembershipRecord | undefined },
): Promise<CheckpointCommitter> {
  const copies: CheckpointCopies[] = []
  for (const from of ['disk', 'memory'] as const) {
    const source = ownLevel(levels, from)
    const t = source && copyTargetsOf(levels, from)
    if (!source || !t) continue
    const copiedIn = t.partner ? await comm.allreduce(t.partner.listed.filter((c) => c.complete && c.marker?.runId === stamp.runId).pop()?.seq ?? -1, 'min') : -1
    copies.push(new CheckpointCopies(comm, source.store, t.targets, t.keep, stamp.runId, hooks.onCheckpoint, copiedIn >= 0 ? copiedIn : undefined, from))
  }
  // Memory and disk events carry this rank's votes since the previous one: part of what checkpointing costs a run.
  const onCheckpoint = hooks.onCheckpoint
  const committerHooks = onCheckpoint ? { ...hooks, onCheckpoint: (e: CheckpointEvent) => onCheckpoint({ ...e, ...vote.takeTally() }) } : hooks
  return new CheckpointCommitter(comm, cfg, id, levels, seq, committerHooks, stamp, copies)
}

/**
 * The lineage of the newest complete checkpoint any rank holds on any of its
 * levels (collective), or undefined when there is none: what a resume
 * continues when node 0's own directory was lost with its node.
 */
async function newestLineage(comm: Communicator, everyLevel: Parameters<typeof newestComplete>[0]): Promise<string | undefined> {
  const m = newestComplete(everyLevel)
  const all = await comm.allgather(m?.marker ? { seq: m.seq, runId: m.marker.runId ?? '' } : undefined)
  return all.reduce<{ seq: number; runId: string } | undefined>((best, x) => (x !== undefined && (best === undefined || x.seq > best.seq) ? x : best), undefined)?.runId
}

/** A level a resume's search found (or an absent one standing in for a level another rank found). */
type SearchedLevel = LevelSource & { listed: CheckpointSummary[] }

/**
 * The levels of `cfg.resumeSearch` (collective): each directory found and the
 * partner copies inside it, memory directories first. Every rank gets as
 * many levels of each kind as the rank that found most, absent ones filling
 * in, so that the levels line up across ranks in the negotiation.
 */
async function searchedLevels(comm: Communicator, cfg: FaultToleranceConfig): Promise<SearchedLevel[]> {
  const found = { memory: cfg.resumeSearch?.memory ?? [], disk: cfg.resumeSearch?.disk ?? [] }
  const counts = await comm.allgather([found.memory.length, found.disk.length])
  const out: SearchedLevel[] = []
  for (const [k, kind] of (['memory', 'disk'] as const).entries()) {
    const most = Math.max(...counts.map((c) => c[k]))
    const medium = kind === 'memory' ? 'ram' : 'node'
    const volatile = kind === 'memory'
    for (let i = 0; i < most; i++) {
      const dir = found[kind][i]
      // Never created: a directory name that lists as empty.
      const absent = dir === undefined
      const at = absent ? join(cfg.dir, `.absent-${kind}-${i}`) : dir
      out.push({ name: kind, medium, store: new CheckpointStore(at, { volatile }), listed: [], searched: true, ...(absent ? { absent } : {}) })
      out.push({ name: 'partner', medium, store: new CheckpointStore(partnerDirOf(at), { volatile }), listed: [], searched: true, ...(absent ? { absent } : {}) })
    }
  }
  return out
}

/** Lists a searched level, or marks it absent when it holds another program's checkpoints or cannot be read. */
async function listIfOurs(l: SearchedLevel, fingerprint: string): Promise<void> {
  try {
    await l.store.assertFingerprint(fingerprint)
    l.listed = await l.store.list()
  } catch {
    // Another program's or unreadable: passed over on this rank alone (the refusal names what was searched).
    l.absent = true
    l.listed = []
  }
}

/**
 * A resume: each XOR level rebuilds the files ranks lost (a lost node's)
 * into the level it protects, memory's first (collective); the levels it
 * wrote to are listed again.
 */
async function rebuildFromParity(comm: Communicator, levels: readonly Level[], log: (text: string) => void): Promise<RebuildOutcome[]> {
  const own = levels.filter((l) => !l.copy)
  const out: RebuildOutcome[] = []
  for (const { parity, protects } of parityLevelsOf(levels)) {
    const r = await rebuildLostFiles(comm, parity, own, protects.store, log)
    if (r.rebuilt.length > 0) protects.listed = await protects.store.list()
    out.push(r)
  }
  return out
}

/** A refused resume also says why the XOR sets could not rebuild what was lost (two members of a set, a damaged slice). */
function withParityReasons(e: unknown, rebuilds: readonly RebuildOutcome[]): unknown {
  const reasons = rebuilds.flatMap((r) => r.passedOver.flatMap((p) => p.reasons))
  if (!(e instanceof NothingToResumeError) || reasons.length === 0) return e
  return new NothingToResumeError(`${e.message}\nXOR redundancy could not rebuild the lost files:\n  ${[...new Set(reasons)].join('\n  ')}`)
}

/** Run `f`; its error as plain data (for an allgather), or undefined. */
async function settle(f: () => Promise<void>): Promise<ErrorRecord | undefined> {
  try {
    await f()
    return undefined
  } catch (e) {
    return errorRecord(e)
  }
}
