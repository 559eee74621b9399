import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { ConfigError, errorRecord, InternalError, PreemptedError, reviveError, RunInterruptedError, type ErrorRecord } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import { FRAMEWORK_TAGS } from '../../routing/tags.js'
import type { FaultToleranceConfig, ProgramIdentity } from '../config.js'
import type { CheckpointAt, CheckpointControl } from '../control.js'
import type { CheckpointEvent, RecoveryInfo, ResumedFigures } from '../events.js'
import type { DecodedRankFile } from '../format/rank-file.js'
import { codeIdentityOf, type CodeIdentity } from '../identity/code.js'
import { checkResumeCode, newestComplete, newRunId, otherRuns } from '../identity/run.js'
import { parsePolicy } from '../policy/policy.js'
import type { ElasticLine } from '../recovery/elastic/line.js'
import { restoreElastic } from '../recovery/elastic/restore.js'
import { negotiateRecoveryLine, type LevelSource, type RejectedLine } from '../recovery/negotiate.js'
import { restoreFromFile } from '../recovery/restore.js'
import type { RecoveryDecision, RestoreOutcome, ResumeFigures, SkeletonHooks, SkeletonState } from '../skeleton-hooks.js'
import { CheckpointStore, isStoreEntry, type CheckpointSummary } from '../store/checkpoint-store.js'
import { claimMemoryDirectory, memoryDirFor } from '../store/memory-level.js'
import { cleanOwnedDirectory, removeIfUnused } from '../store/owned-dir.js'
import { PartnerRing, partnerDirOf } from '../store/partner.js'
import { CheckpointCommitter } from './commit.js'
import { CheckpointCopies, type CopyTargets } from './copies.js'
import { CheckpointVote, type ClockState } from './vote.js'

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
    readonly recovery: RecoveryInfo | undefined,
    private readonly log: (text: string, once?: string) => void,
    private readonly hooks: CoordinatorHooks,
  ) {}

  /** True when this run resumes from a checkpoint. */
  get recovering(): boolean {
    return this.recovery?.seq !== undefined
  }

  /** Open the checkpoint directory on every rank (collective) and, on `resume`, agree on the recovery line. */
  static async open(
    comm: Communicator,
    cfg: FaultToleranceConfig,
    id: ProgramIdentity,
    log: (text: string, once?: string) => void,
    hooks: CoordinatorHooks = {},
  ): Promise<CheckpointCoordinator> {
    if (!Number.isSafeInteger(cfg.keep) || cfg.keep < 1) throw new ConfigError(`keep must be a positive integer (got ${cfg.keep})`)
    parsePolicy(cfg.policy)
    const memoryPolicy = cfg.memory ? parsePolicy(cfg.memory.policy) : cfg.async ? ({ kind: 'off' } as const) : undefined
    const store = new CheckpointStore(cfg.dir)
    // The memory level writes only in a directory of molotof's own (a sub-directory of a given one holding the user's files).
    const memory = memoryPolicy === undefined ? undefined : new CheckpointStore(claimMemoryDirectory(cfg.memory?.dir ?? memoryDirFor(cfg.dir)), { volatile: true })
    // Copies of the disk checkpoints: the partner's (kept beside this rank's own, on this node) and the shared level's.
    const ring = cfg.partner ? new PartnerRing(comm.size, cfg.partner.ranksPerNode) : undefined
    // Partner copies in these directories are opened also when this run keeps none: a resume reads them (on fewer
    // nodes than the run that wrote them, which is how a run that lost a node goes on), a fresh start discards them
    // (left there, an earlier run's copies could share numbers with this run's checkpoints). Every rank opens the
    // level when any has it.
    const readsPartner = async (dir: string) => ring !== undefined || (await comm.allreduce(existsSync(dir) ? 1 : 0, 'max')) === 1
    const partner = (await readsPartner(partnerDirOf(cfg.dir))) ? new CheckpointStore(partnerDirOf(cfg.dir)) : undefined
    // The partner copies of memory checkpoints live in the holder's memory level (RAM), beside its own.
    const memoryPartner = memory && (await readsPartner(partnerDirOf(memory.dir))) ? new CheckpointStore(partnerDirOf(memory.dir), { volatile: true }) : undefined
    const sharedDir = cfg.shared?.dir ?? (cfg.resume ? cfg.resumeSharedDir : undefined)
    const shared = sharedDir !== undefined ? new CheckpointStore(sharedDir) : undefined
    // A resume also reads what the run may have left elsewhere on this host: the earlier run's memory level, the
    // other `{node}`/`{rank}` directories (a lost node's ranks are renumbered in the relaunch). One that holds another
    // program's checkpoints, or cannot be read, is not this run's: passed over (on this rank alone, no collective).
    const search = cfg.resume ? await searchedLevels(comm, cfg) : []
    for (const l of search) if (!l.absent) await listIfOurs(l, id.fingerprint)
    const levels = [...(memory ? [memory] : []), ...(memoryPartner ? [memoryPartner] : []), store, ...(partner ? [partner] : []), ...(shared ? [shared] : [])]
    // Every rank checks; any refusal is reported by all of them alike.
    const check = await settle(async () => {
      for (const s of levels) await s.assertFingerprint(id.fingerprint)
    })
    const checks = await comm.allgather(check)
    const refused = checks.find((c) => c !== undefined)
    if (refused) throw reviveError(refused)

    // Ranks may have directories of their own (`{node}`, `{rank}`): the lowest rank of each commits there (and in the
    // partner directory inside it).
    const dirs = await comm.allgather([store.dir, memory?.dir ?? ''])
    const writesMarker = { disk: dirs.findIndex((d) => d[0] === store.dir) === comm.rank, memory: dirs.findIndex((d) => d[1] === (memory?.dir ?? '')) === comm.rank }
    // A fresh start discards the copies as the supervisor discarded the directory's own checkpoints (they derive from them).
    if (!cfg.resume) await discardCopies(comm, [writesMarker.disk ? partner : undefined, writesMarker.memory ? memoryPartner : undefined], shared)
    const listed = await store.list()
    const memoryListed = memory ? await memory.list() : []
    const memoryPartnerListed = memoryPartner ? await memoryPartner.list() : []
    const partnerListed = partner ? await partner.list() : []
    const sharedListed = shared ? await shared.list() : []
    // One numbering over every level: a checkpoint keeps its number when it is flushed from memory to disk, or copied.
    const everyLevel = [...memoryListed, ...memoryPartnerListed, ...listed, ...partnerListed, ...sharedListed, ...search.flatMap((l) => l.listed)].sort((a, b) => a.seq - b.seq)
    const seq = await comm.allreduce(everyLevel.reduce((m, s) => Math.max(m, s.seq + 1), 0), 'max')
    // Rank 0 decides the run lineage and hashes the program's code (once per run start); one allgather shares both.
    const decided = (await comm.allgather(comm.rank === 0 ? lineageOf(cfg, id, everyLevel) : undefined))[0]!
    const { code } = decided
    const runId = cfg.adoptLineage ? ((await newestLineage(comm, everyLevel)) ?? decided.runId) : decided.runId
    const vote = new CheckpointVote(comm, cfg.policy, hooks.control, memoryPolicy)
    const stores = { disk: store, memory, memorySeqs: memoryListed.map((s) => s.seq) }
    const targets: CopyTargets = {
      ...(ring && partner ? { partner: { store: partner, ring, writesMarker: writesMarker.disk } } : {}),
      ...(shared && cfg.shared ? { shared: { store: shared, policy: cfg.shared } } : {}),
    }
    // The copies an earlier attempt committed on every partner: the level keeps that checkpoint until newer ones are copied.
    const copiedIn = async (l: readonly CheckpointSummary[]) => {
      const s = ring ? await comm.allreduce(l.filter((c) => c.complete && c.marker?.runId === runId).pop()?.seq ?? -1, 'min') : -1
      return s >= 0 ? s : undefined
    }
    const copies = ring || shared ? new CheckpointCopies(comm, store, targets, cfg.keep, runId, hooks.onCheckpoint, await copiedIn(partnerListed)) : undefined
    // Memory checkpoints are copied to the partner's memory level; it keeps the newest copy only (RAM is dear).
    // Not when memory is only the staging of background disk writes (`async` alone): their disk copies go anyway.
    const memoryTargets: CopyTargets | undefined = ring && memory && memoryPartner && cfg.memory ? { partner: { store: memoryPartner, ring, writesMarker: writesMarker.memory, tag: FRAMEWORK_TAGS.partnerCopyMemory } } : undefined
    const memoryCopies = memoryTargets ? new CheckpointCopies(comm, memory!, memoryTargets, 1, runId, hooks.onCheckpoint, await copiedIn(memoryPartnerListed)) : undefined
    // Memory and disk events carry this rank's votes since the previous one: part of what checkpointing costs a run.
    const onCheckpoint = hooks.onCheckpoint
    const committerHooks = onCheckpoint ? { ...hooks, onCheckpoint: (e: CheckpointEvent) => onCheckpoint({ ...e, ...vote.takeTally() }) } : hooks
    const commits = new CheckpointCommitter(comm, cfg, id, stores, seq, committerHooks, { runId, code }, writesMarker, copies, memoryCopies)
    if (!cfg.resume) {
      const fresh = new CheckpointCoordinator(comm, cfg, store, memory, vote, commits, undefined, log, hooks)
      fresh.cleansMemory = writesMarker.memory
      return fresh
    }

    // Fastest first: this rank's own copies, then the one its partner holds (sent over at restore), then the shared one.
    // The directories found by the search come after the run's own of the same speed.
    const sources: LevelSource[] = [
      ...(memory ? [{ level: 'memory' as const, store: memory, listed: memoryListed }] : []),
      ...(memoryPartner ? [{ level: 'partner' as const, store: memoryPartner, listed: memoryPartnerListed, ...(ring ? { holds: ring.sourceOf(comm.rank) } : {}) }] : []),
      ...search.filter((l) => l.kind === 'memory'),
      { level: 'disk', store, listed },
      ...(partner ? [{ level: 'partner' as const, store: partner, listed: partnerListed, ...(ring ? { holds: ring.sourceOf(comm.rank) } : {}) }] : []),
      ...search.filter((l) => l.kind === 'disk'),
      ...(shared ? [{ level: 'shared' as const, store: shared, listed: sharedListed }] : []),
    ]
    // Only this run's lineage: another run's checkpoints are never a recovery line.
    // A refused resume leaves no memory level it created only to look into.
    const { info, file, elastic, marker: lineMarker } = await negotiateRecoveryLine(comm, sources, id.settings, log, hooks.rejected, otherRuns(everyLevel, runId), cfg.resumeRequest).catch((e: unknown) => {
      if (memory) removeIfUnused(memory.dir)
      throw e
    })
    if (info.seq !== undefined) {
      const marker = lineMarker ?? (await store.readMarker(info.seq))
      // The same inputs on every rank (the code identity comes from rank 0): all refuse alike, or all go on.
      const warning = checkResumeCode(marker.code, code, { seq: info.seq, allow: cfg.allowCodeChange === true, programFile: id.code?.programFile })
      if (warning !== undefined) {
        info.warnings.push(warning)
        if (comm.rank === 0) log(`warning: ${warning}`)
      }
    }
    const coordinator = new CheckpointCoordinator(comm, cfg, store, memory, vote, commits, info, log, hooks)
    coordinator.restoredFile = file
    coordinator.elasticLine = elastic
    coordinator.cleansMemory = writesMarker.memory
    return coordinator
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
    if (preempt) throw new PreemptedError(go ? this.commits.nextSeq - 1 : undefined)
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
          '(a larger --memory-checkpoint every:<steps>, a time such as 2s, or mtbf:<duration>)',
        // Once per run: every restart measures it again, and would say it again.
        'memory-cost',
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

/**
 * A fresh start: the partner directories this rank commits in (`mine`: the
 * lowest rank of each), and rank 0 in the shared one, remove the copies left
 * by an earlier run (collective: every rank calls it, any failure is every
 * rank's).
 */
async function discardCopies(comm: Communicator, mine: readonly (CheckpointStore | undefined)[], shared: CheckpointStore | undefined): Promise<void> {
  const failure = await settle(async () => {
    for (const partner of mine) if (partner) for (const c of await partner.list()) await partner.remove(c.seq)
    if (shared && comm.rank === 0) for (const c of await shared.list()) await shared.remove(c.seq)
  })
  const refused = (await comm.allgather(failure)).find((f) => f !== undefined)
  if (refused) throw reviveError(refused)
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
type SearchedLevel = LevelSource & { kind: 'memory' | 'disk'; listed: CheckpointSummary[] }

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
    for (let i = 0; i < most; i++) {
      const dir = found[kind][i]
      // Never created: a directory name that lists as empty.
      const absent = dir === undefined
      const at = absent ? join(cfg.dir, `.absent-${kind}-${i}`) : dir
      out.push({ kind, level: kind, store: new CheckpointStore(at, { volatile: kind === 'memory' }), listed: [], searched: true, ...(absent ? { absent } : {}) })
      out.push({ kind, level: 'partner', store: new CheckpointStore(partnerDirOf(at), { volatile: kind === 'memory' }), listed: [], searched: true, ...(absent ? { absent } : {}) })
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

/** Run `f`; its error as plain data (for an allgather), or undefined. */
async function settle(f: () => Promise<void>): Promise<ErrorRecord | undefined> {
  try {
    await f()
    return undefined
  } catch (e) {
    return errorRecord(e)
  }
}
