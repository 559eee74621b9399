import { performance } from 'node:perf_hooks'
import { DomainDesc } from '../domains/desc.js'
import { forEachRun, type Domain } from '../domains/domain.js'
import { bytesOf, dtypeOf } from '../domains/dtype.js'
import { CheckpointCorruptError, CheckpointError, ConfigError, ReplayDivergenceError } from '../errors.js'
import type { Communicator } from '../runtime/communicator.js'
import type { RecoveryDecision, RestoreOutcome, ResumeFigures, SkeletonHooks } from '../skeletons/runtime.js'
import type { ResumedFigures, SessionControl } from '../runtime/rank-session.js'
import type { SkeletonState } from '../skeletons/skeleton.js'
import { encodeRankFile, type DecodedEntry, type DecodedRankFile, type EntryInput } from './format.js'
import type { JsonObject } from './json.js'
import { decodeLight, diffLight, digestOf, encodeLight } from './light.js'
import type { RankFileRecord } from './marker.js'
import { entryArray } from './payload.js'
import { parsePolicy, type CheckpointPolicy } from './policy.js'
import { checkpointAtStep } from './policy-steps.js'
import { PolicyClock } from './policy-clock.js'
import { assertSameSettings, chooseRecoveryLine, localView, type SkipReason } from './recovery-line.js'
import { domainPayload, StagingBuffers } from './staging.js'
import { CheckpointStore } from './store.js'

/** How a run checkpoints and whether it resumes. Plain data: it crosses to every rank. */
export interface FaultToleranceConfig {
  /** Checkpoint directory (created on first use). */
  dir: string
  /** The run's default policy; a skeleton may override it. */
  policy: CheckpointPolicy
  /** Complete checkpoints kept (older ones are deleted once a newer one is complete). */
  keep: number
  /** Start from the recovery line when there is one. */
  resume: boolean
  /**
   * `program` (default): what the program registers. `default`: the framework
   * defaults whatever the program unregistered (both domains and the
   * iterator), to measure what minimal registration saves.
   */
  contents?: 'program' | 'default'
  /**
   * Write checkpoints in the background: at the checkpoint point the data is
   * copied to a staging buffer and the write and fsync run while the next
   * supersteps compute; the checkpoint is committed (and becomes the recovery
   * line) once every rank's file is durable: at a later vote when the run
   * votes (time-based policy or supervised run), otherwise asked with one
   * allreduce at each checkpoint point while the write is in flight.
   */
  async?: boolean
  /** Stop every rank right after this checkpoint point (tests and demonstrations). */
  interrupt?: { skeleton: number; step: number }
}

/** Who is checkpointing: the program and the settings its checkpoints must match. */
export interface ProgramIdentity {
  fingerprint: string
  settings: JsonObject
}

/** Figures of one committed checkpoint, for progress lines, events and benchmarks. */
export interface CheckpointEvent {
  seq: number
  skeleton: number
  step: number
  /** Bytes of this rank's file. */
  bytes: number
  /** Bytes over all ranks. */
  totalBytes: number
  /** Wall time from the checkpoint point to the commit, slowest rank. */
  ms: number
}

/** What recovery found, for logs and events. */
export interface RecoveryInfo {
  seq: number | undefined
  skeleton: number
  step: number
  /** Time to agree on the line from headers and sizes (ms). */
  negotiateMs: number
  /** Time to read and verify this rank's file of the line (ms). */
  loadMs: number
  /** Fast-forward of the recovery skeleton (ms), once done. */
  replayMs?: number
  /** Load, restore and re-route (ms), once done. */
  restoreMs?: number
  warnings: string[]
}

/** Callbacks and outside requests the service reports to or honours. */
export interface ServiceHooks {
  onCheckpoint?: (e: CheckpointEvent) => void
  onResumed?: (r: ResumedFigures) => void
  control?: SessionControl
}

/** Thrown on every rank after the checkpoint a preemption asked for: the run stops cleanly. */
export class Preempted extends Error {
  override readonly name = 'Preempted'
  constructor(
    /** The checkpoint taken for the preemption. */
    readonly seq: number | undefined,
  ) {
    super('preempted: checkpoint taken, stopping')
  }
}

/** Thrown on every rank by `interrupt`: the run stopped on purpose after a checkpoint point. */
export class RunInterrupted extends Error {
  constructor(
    readonly skeleton: number,
    readonly step: number,
  ) {
    super(`run interrupted after skeleton ${skeleton}, step ${step}`)
  }
}

interface PendingCheckpoint {
  seq: number
  skeleton: number
  step: number
  clock: ClockState
  started: number
  durable: Promise<{ written?: RankFileRecord; failure?: string }>
  /** This rank's write has finished (successfully or not). */
  done: boolean
}

interface ClockState {
  clock: PolicyClock
  lastAt: number
  costs: number[]
  /** Next superstep at which the ranks vote (time-based policies, preemption). */
  voteStep: number
  lastVote: { step: number; at: number }
}

/** Ranks vote about this often (ms of supersteps): often enough to react, rare enough to cost nothing. */
const VOTE_PERIOD_MS = 100

/**
 * The checkpoint side of a rank: it decides at each checkpoint point whether
 * to save (policy), writes this rank's file and commits collectively, and on a
 * resumed run negotiates the recovery line and restores registered data.
 *
 * ```ts
 * const ft = await CheckpointService.open(comm, config, { fingerprint, settings }, log)
 * rt.hooks = ft     // skeletons call recoveryFor / restore / checkpointPoint
 * ```
 */
export class CheckpointService implements SkeletonHooks {
  private readonly clocks = new Map<number, ClockState>()
  private restoredFile: DecodedRankFile | undefined
  /** A checkpoint written in the background, not committed yet. */
  private pending: PendingCheckpoint | undefined
  private readonly staging = new StagingBuffers()
  private requested = false

  private constructor(
    private readonly comm: Communicator,
    private readonly cfg: FaultToleranceConfig,
    private readonly id: ProgramIdentity,
    private readonly store: CheckpointStore,
    private seq: number,
    readonly recovery: RecoveryInfo | undefined,
    private readonly log: (text: string) => void,
    private readonly hooks: ServiceHooks = {},
  ) {}

  /** True when this run resumes from a checkpoint. */
  get recovering(): boolean {
    return this.recovery?.seq !== undefined
  }

  static async open(
    comm: Communicator,
    cfg: FaultToleranceConfig,
    id: ProgramIdentity,
    log: (text: string) => void,
    hooks: ServiceHooks = {},
  ): Promise<CheckpointService> {
    if (!Number.isSafeInteger(cfg.keep) || cfg.keep < 1) throw new ConfigError(`keep must be a positive integer (got ${cfg.keep})`)
    parsePolicy(cfg.policy)
    const store = new CheckpointStore(cfg.dir)
    const { rank, size } = comm
    // Every rank checks; any refusal is reported by all of them alike.
    const check = await settle(() => store.assertFingerprint(id.fingerprint))
    const checks = await comm.allgather(check)
    const refused = checks.find((c) => c !== undefined)
    if (refused) throw new CheckpointError(refused)

    const listed = await store.list().catch(() => [])
    const nextSeq = listed.reduce((m, s) => Math.max(m, s.seq + 1), 0)
    const seq = await comm.allreduce(nextSeq, 'max')
    if (!cfg.resume) return new CheckpointService(comm, cfg, id, store, seq, undefined, log, hooks)

    const t0 = performance.now()
    // Settings and rank count first: checkpoints of another configuration are
    // refused outright, not passed over as "invalid" for a silent fresh start.
    const newest = listed.filter((c) => c.complete && c.marker).pop()
    if (newest?.marker) {
      assertSameSettings({ settings: newest.marker.settings, size: newest.marker.size }, { settings: id.settings, size })
    }
    // Agree on headers and sizes (cheap), then each rank reads and verifies its
    // own file of the chosen line once — the same read restore uses. A file
    // that fails there moves the line back and the ranks agree again.
    let views = await comm.allgather(await localView(store, rank, size, { checksums: false }))
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
      return new CheckpointService(comm, cfg, id, store, seq, { seq: undefined, skeleton: -1, step: -1, negotiateMs, loadMs, warnings }, log, hooks)
    }
    const marker = await store.readMarker(line.seq)
    assertSameSettings({ settings: marker.settings, size: marker.size }, { settings: id.settings, size })
    warnings.forEach((w) => rank === 0 && log(`warning: ${w}`))
    const info: RecoveryInfo = { seq: line.seq, skeleton: marker.skeleton, step: marker.step, negotiateMs, loadMs, warnings }
    const service = new CheckpointService(comm, cfg, id, store, seq, info, log, hooks)
    service.restoredFile = file
    return service
  }

  recoveryFor(index: number): RecoveryDecision {
    const r = this.recovery
    if (!r || r.seq === undefined || index > r.skeleton) return { kind: 'normal' }
    if (index < r.skeleton) return { kind: 'skip' }
    return { kind: 'resume', step: r.step }
  }

  async restore(state: SkeletonState): Promise<RestoreOutcome> {
    const r = this.recovery
    if (!r || r.seq === undefined) throw new CheckpointError('restore called without a recovery line')
    const file = this.restoredFile ?? (await this.store.loadRankFile(r.seq, this.comm.rank))
    this.restoredFile = undefined
    const h = file.header
    if (h.skeleton !== state.index || h.step !== state.step) {
      throw new CheckpointError(`checkpoint ${r.seq} holds skeleton ${h.skeleton} step ${h.step}, but replay reached skeleton ${state.index} step ${state.step}`)
    }
    this.checkReplay(state, file)

    // A domain left out of the checkpoint is the kernel's to rebuild (`rebuild`). The
    // next step reads `read`: a program that registers it needs it in the file.
    const read = state.registry.includes('read') ? requireEntry(file, 'read', r.seq) : file.entries.get('read')
    if (read) restoreDomain(state.write, read)
    const write = file.entries.get('write')
    if (write) restoreDomain(state.read, write)

    for (const reg of state.registry.heavy.values()) {
      const e = requireEntry(file, reg.name, r.seq)
      const saved = entryArray(e)
      if (saved.constructor !== reg.array.constructor || saved.length !== reg.array.length) {
        throw new CheckpointError(
          `checkpoint entry "${reg.name}" holds ${saved.length} ${e.dtype} values; the registered array has ${reg.array.length} of another shape or type`,
        )
      }
      reg.array.set(saved as never)
    }
    for (const reg of state.registry.light.values()) {
      reg.cell.value = decodeLight(requireEntry(file, reg.name, r.seq).bytes, reg.serializer)
    }
    const clock = this.clockFor(state)
    clock.lastAt = performance.now()
    return { reroute: state.mode === 'border', read: read !== undefined, write: write !== undefined }
  }

  resumed(f: ResumeFigures): void {
    const r = this.recovery
    if (r) Object.assign(r, { replayMs: f.replayMs, restoreMs: f.restoreMs })
    if (r && r.seq !== undefined) {
      this.hooks.onResumed?.({ seq: r.seq, skeleton: r.skeleton, step: r.step, negotiateMs: r.negotiateMs, loadMs: r.loadMs, replayMs: f.replayMs, restoreMs: f.restoreMs })
    }
    if (this.comm.rank === 0) {
      this.log(`replayed ${f.step} supersteps of skeleton ${f.skeleton} in ${f.replayMs.toFixed(1)} ms, restored in ${f.restoreMs.toFixed(1)} ms`)
    }
  }

  async checkpointPoint(state: SkeletonState, last: boolean): Promise<void> {
    const clock = this.clockFor(state)
    const now = performance.now()
    const control = this.hooks.control
    const input = { step: state.step, now, lastCheckpointAt: clock.lastAt, measuredCostMs: clock.costs }
    const requested = this.requested || control?.checkpointRequested === true
    // Step-based policies give every rank the same answer; time-based ones are decided by vote.
    let go = !clock.clock.timeBased && clock.clock.shouldCheckpoint(input)
    let preempt = false
    if (clock.clock.timeBased || control?.preemptible) {
      // Clock votes, requests and preemption need agreement, which costs a
      // collective: vote only every `voteStep`, spaced ~VOTE_PERIOD_MS apart.
      if (state.step >= clock.voteStep) {
        const stepMs = (now - clock.lastVote.at) / Math.max(1, state.step - clock.lastVote.step)
        const every = Math.min(1000, Math.max(1, Math.ceil(VOTE_PERIOD_MS / Math.max(stepMs, 1e-3))))
        const vote = control?.preemptRequested ? 2 : requested || (clock.clock.timeBased && clock.clock.shouldCheckpoint(input)) ? 1 : 0
        // One allreduce carries both: the vote (2 = preempt, 1 = checkpoint) and the spacing (min over ranks).
        const agreed = await this.comm.allreduce(vote * 4096 - every, 'max')
        const decided = Math.ceil(agreed / 4096)
        preempt = decided === 2
        go = go || decided >= 1
        clock.voteStep = state.step + (decided * 4096 - agreed)
        clock.lastVote = { step: state.step, at: now }
        if (decided >= 1) this.clearRequests()
        // A background checkpoint is committed at the first vote where every rank's write is done.
        await this.commitIfAllDurable()
      }
    } else {
      if (requested) {
        // No votes in this run: a request comes from requestCheckpoint(), which every rank calls (SPMD).
        go = true
        this.clearRequests()
      }
      // Without votes, a background checkpoint is polled at every checkpoint point until all ranks are done.
      await this.commitIfAllDurable()
    }
    const background = this.cfg.async === true && !preempt && !last
    if (go) await this.write(state, clock, now, background)
    const stop = this.cfg.interrupt
    const stopping = stop !== undefined && stop.skeleton === state.index && stop.step === state.step
    // The end of a skeleton, a preemption or an interruption commit what is still in flight.
    if (last || preempt || stopping) await this.finishPending()
    const dying = control?.dieMidCheckpoint
    if (dying && dying.skeleton === state.index && dying.step === state.step) dying.die()
    if (preempt) throw new Preempted(go ? this.seq - 1 : undefined)
    if (stopping) throw new RunInterrupted(state.index, state.step)
  }

  /**
   * Checkpoint at the next checkpoint point (policy `request`, or sooner than
   * the policy would). Under a supervisor one rank asking is enough; in a run
   * without votes, call it on every rank.
   */
  request(): void {
    this.requested = true
  }

  private clearRequests(): void {
    this.requested = false
    if (this.hooks.control) this.hooks.control.checkpointRequested = false
  }

  /** Commit the background checkpoint if every rank's write is done (collective: one allreduce while one is in flight). */
  private async commitIfAllDurable(): Promise<void> {
    if (this.pending && (await this.comm.allreduce(this.pending.done ? 0 : 1, 'max')) === 0) await this.finishPending()
  }

  /** Commit the background checkpoint, if any (collective: all ranks reach it together). */
  private async finishPending(): Promise<void> {
    const p = this.pending
    if (!p) return
    this.pending = undefined
    await this.commit(p)
  }

  private async write(state: SkeletonState, clock: ClockState, started: number, background: boolean): Promise<void> {
    const { rank, size } = this.comm
    await this.finishPending()
    const seq = this.seq++
    const entries = this.entries(state, background)
    const digests = this.digests(state)
    const durable = (async (): Promise<{ written?: RankFileRecord; failure?: string }> => {
      try {
        const parts = encodeRankFile(
          { fingerprint: this.id.fingerprint, skeleton: state.index, step: state.step, rank, size, settings: this.id.settings, digests },
          entries,
        )
        const dying = this.hooks.control?.dieMidCheckpoint
        if (dying && dying.skeleton === state.index && dying.step === state.step) await tornWrite(this.store, seq, rank, parts, dying.die)
        const w = await this.store.writeRankFile(seq, rank, parts)
        return { written: { rank, file: w.file, bytes: w.bytes, headerChecksum: w.headerChecksum } }
      } catch (e) {
        return { failure: (e as Error).message }
      }
    })()
    const pending: PendingCheckpoint = { seq, skeleton: state.index, step: state.step, clock, started, durable, done: false }
    void durable.then(() => (pending.done = true))
    if (background) this.pending = pending
    else await this.commit(pending)
  }

  /** Commit a checkpoint whose write was started: collective, every rank calls it at the same point. */
  private async commit(p: PendingCheckpoint): Promise<void> {
    const { rank, size } = this.comm
    const { seq, clock, started } = p
    const { written, failure } = await p.durable
    // Commit only when every rank's file is durable; any failure fails every rank alike.
    const all = await this.comm.allgather({ written, failure })
    const failed = all.map((a, r) => (a.failure ? `rank ${r}: ${a.failure}` : '')).filter(Boolean)
    if (failed.length > 0) {
      throw new CheckpointError(`checkpoint ${seq} could not be written (the previous checkpoint is intact):\n  ${failed.join('\n  ')}`)
    }
    let commitFailure: string | undefined
    if (rank === 0) {
      try {
        await this.store.commit(seq, {
          seq,
          skeleton: p.skeleton,
          step: p.step,
          size,
          fingerprint: this.id.fingerprint,
          settings: this.id.settings,
          ranks: all.map((a) => a.written!),
          createdAt: new Date().toISOString(),
        })
        await this.store.prune(this.cfg.keep)
      } catch (e) {
        commitFailure = (e as Error).message
      }
    }
    const ms = await this.comm.allreduce(commitFailure ? Infinity : performance.now() - started, 'max')
    if (!Number.isFinite(ms)) {
      const why = (await this.comm.allgather(commitFailure)).find((x) => x !== undefined) ?? 'rank 0 could not commit'
      throw new CheckpointError(`checkpoint ${seq} could not be committed (the previous checkpoint is intact): ${why}`)
    }
    clock.costs.push(ms)
    clock.lastAt = performance.now()
    const totalBytes = all.reduce((s, a) => s + (a.written?.bytes ?? 0), 0)
    const event: CheckpointEvent = { seq, skeleton: p.skeleton, step: p.step, bytes: written!.bytes, totalBytes, ms }
    this.hooks.onCheckpoint?.(event)
  }

  /** The payloads of a checkpoint; `copy` detaches them from memory the next supersteps overwrite. */
  private entries(state: SkeletonState, copy: boolean): EntryInput[] {
    const { rank } = this.comm
    const reg = state.registry
    const all = this.cfg.contents === 'default'
    const includes = (name: 'read' | 'write' | 'iterator') => all || reg.includes(name)
    const out: EntryInput[] = []
    if (includes('read')) {
      // In circulation the blocks have already moved: save what this rank now holds for the next step.
      const box = state.mode === 'circulation' && state.next ? state.next.needed[rank] : state.partition.possessed[rank]
      out.push(this.domainEntry('read', state.write, box))
    }
    if (includes('write')) out.push(this.domainEntry('write', state.read, state.partition.possessed[rank].intersect(state.read.box)))
    if (includes('iterator')) out.push({ name: 'iterator', kind: 'light', bytes: encodeLight(state.it, undefined, 'iterator') })
    for (const h of reg.heavy.values()) out.push({ name: h.name, kind: 'heavy', dtype: dtypeOf(h.array), bytes: bytesOf(h.array) })
    for (const l of reg.light.values()) out.push({ name: l.name, kind: 'light', bytes: encodeLight(l.cell.value, l.serializer, l.name) })
    return copy ? out.map((e) => (e.kind === 'heavy' ? { ...e, bytes: this.staging.copy(e.name, e.bytes) } : e)) : out
  }

  /** A domain's cells in `box` as a payload written from the domain's memory (see domainPayload). */
  private domainEntry(name: string, d: Domain, box: DomainDesc): EntryInput {
    const record = { lower: [...box.lower], upper: [...box.upper] }
    return { name, kind: 'heavy', dtype: d.dtype, box: record, bytes: domainPayload(d, box, this.staging, name) }
  }

  private digests(state: SkeletonState): Record<string, string> {
    const d: Record<string, string> = { iterator: digestOf(state.it, undefined, 'iterator') }
    for (const w of state.registry.watched.values()) d[`watch:${w.name}`] = digestOf(w.get(), w.serializer, w.name)
    return d
  }

  /** Replay must have rebuilt the iterator and every watched value exactly. */
  private checkReplay(state: SkeletonState, file: DecodedRankFile): void {
    const stored = file.header.digests
    if (stored.iterator !== undefined && stored.iterator !== digestOf(state.it, undefined, 'iterator')) {
      const saved = file.entries.get('iterator')
      const detail = saved ? (diffLight(decodeLight(saved.bytes), state.it) ?? 'digest differs') : 'digest differs'
      throw new ReplayDivergenceError('the iterator', detail)
    }
    for (const w of state.registry.watched.values()) {
      const want = stored[`watch:${w.name}`]
      if (want !== undefined && want !== digestOf(w.get(), w.serializer, w.name)) {
        throw new ReplayDivergenceError(`watched value "${w.name}"`, 'its digest differs after replay')
      }
    }
  }

  private clockFor(state: SkeletonState): ClockState {
    let c = this.clocks.get(state.index)
    if (!c) {
      const now = performance.now()
      const policy = state.policy ?? this.cfg.policy
      c = { clock: new PolicyClock(policy), lastAt: now, costs: [], voteStep: state.step, lastVote: { step: state.step, at: now } }
      this.clocks.set(state.index, c)
      refuseUselessInjection(this.hooks.control?.dieMidCheckpoint, state, policy, this.comm.rank)
    }
    return c
  }
}

function restoreDomain(d: Domain, e: DecodedEntry): void {
  if (!e.box) throw new CheckpointError(`checkpoint entry "${e.name}" has no box`)
  const box = DomainDesc.of(e.box.lower, e.box.upper)
  if (!d.box.contains(box)) throw new CheckpointError(`checkpoint entry "${e.name}" covers ${box}, outside this rank's domain ${d.box}`)
  const saved = entryArray(e, d.dtype)
  if (saved.length !== box.volume) throw new CheckpointError(`checkpoint entry "${e.name}" has ${saved.length} values for ${box.volume} cells`)
  let pos = 0
  forEachRun(d.strides, d.offset, box, d.order, (s, len) => {
    d.data.set(saved.subarray(pos, pos + len) as never, s)
    pos += len
  })
}

function requireEntry(file: DecodedRankFile, name: string, seq: number): DecodedEntry {
  const e = file.entries.get(name)
  if (!e) throw new CheckpointError(`checkpoint ${seq} has no entry "${name}", which this program registers; it was written by another version of the program`)
  return e
}

/**
 * `--inject …,phase=checkpoint` kills a rank while it writes a checkpoint: at a
 * step where the skeleton's policy writes none it would kill the rank at an
 * empty checkpoint point, which is not what was asked. Refused, with the
 * nearest checkpoint steps.
 */
function refuseUselessInjection(at: { skeleton: number; step: number; asked?: boolean } | undefined, state: SkeletonState, policy: CheckpointPolicy, rank: number): void {
  if (!at || at.asked === false || at.skeleton !== state.index) return
  const c = checkpointAtStep(policy, at.step)
  if (c.kind === 'yes' || c.kind === 'unknown') return
  const what = `--inject rank=${rank},step=${at.step},phase=checkpoint`
  if (c.kind === 'never') throw new ConfigError(`${what}: no checkpoint is written in ${state.name} (${c.why}); inject in phase calculate or route instead`)
  const nearest = c.before === undefined ? `step ${c.after}` : `steps ${c.before} and ${c.after}`
  throw new ConfigError(`${what}: no checkpoint is written at step ${at.step} of ${state.name} (${c.why}); the nearest are ${nearest}`)
}

/** Failure injection: leave half a rank file under a temporary name, then die. */
async function tornWrite(store: CheckpointStore, seq: number, rank: number, parts: Uint8Array[], die: () => never): Promise<never> {
  const { mkdir, writeFile } = await import('node:fs/promises')
  await mkdir(store.pathOf(seq), { recursive: true })
  const whole = Buffer.concat(parts)
  await writeFile(`${store.fileOf(seq, rank)}.tmp-${process.pid}-torn`, whole.subarray(0, whole.length >> 1))
  return die()
}

async function settle(f: () => Promise<void>): Promise<string | undefined> {
  try {
    await f()
    return undefined
  } catch (e) {
    return (e as Error).message
  }
}
