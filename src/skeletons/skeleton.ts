import type { DomainDesc } from '../domains/desc.js'
import type { Domain } from '../domains/domain.js'
import { ConfigError } from '../errors.js'
import { PartitionTracker, type Partition } from '../routing/partition.js'
import { DTYPES } from '../domains/dtype.js'
import { assertDomainsFit } from '../domains/memory.js'
import type { RoutingMode } from '../routing/plan.js'
import { Router, validateSchedule, type Schedule } from '../routing/router.js'
import { CheckpointRegistry } from '../checkpoint/registry.js'
import { parsePolicy, type CheckpointPolicy } from '../checkpoint/policy/policy.js'
import type { RecoveryDecision, RestoreOutcome, SkeletonState } from '../checkpoint/skeleton-hooks.js'
import { checkRefilledRead } from '../checkpoint/recovery/replay-check.js'
import { CalcKernel, type StepContext } from './kernel.js'
import type { RankRuntime } from './runtime.js'
import { SparseClock } from './sparse-clock.js'
import { DONE, WOULD_WAIT, type Stepper } from './step-scheduler.js'
import type { Message } from '../routing/communicator.js'

/** Options of `ctx.skeleton(kernel, domains, options)`. */
export interface SkeletonOptions {
  /** `border` (halo exchange, the default) or `circulation` (blocks move between ranks). */
  routing?: RoutingMode
  /** Message schedule; all at once by default. */
  schedule?: Schedule
  /** A name for messages and checkpoints; `skeleton<index>` by default. */
  name?: string
  /** When this skeleton checkpoints, overriding the run's policy (`{ every: 50 }`, `'30s'`, `{ mtbf: '6h' }`…). */
  checkpoint?: CheckpointPolicy | string
  /** When this skeleton writes memory-level checkpoints, overriding the run's memory policy (used only when the run has a memory level). */
  memoryCheckpoint?: CheckpointPolicy | string
}

/** The superstep whose tag the route before step 0 borrows: the last of a tag cycle (see Skeleton.tag). */
const INITIAL_ROUTE = 0xfffff

/** The longest a skeleton keeps the event loop waiting (give or take the SparseClock's 20 ms). */
export const YIELD_EVERY_MS = 50

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

// Where the superstep loop stands (Skeleton.advance).
const BEGIN = 0
const SETTLE = 1
const CALCULATE = 2
const AGREED = 3
const ROUTE = 4
const RECEIVE = 5
const RECEIVED = 6
const POINT = 7
const SWAP = 8
const NEXT = 9

/** What a superstep's state machine waits for (see Skeleton.advance): the loop's end, a park with the StepScheduler, or a promise. */
type Pending = typeof DONE | typeof WOULD_WAIT | Promise<unknown>

/**
 * The GReLoSSS main loop of one skeleton. Each superstep: calculate → route
 * (when the kernel says so, agreed by all ranks) → checkpoint point → swap
 * (a pointer swap). The skeleton owns the loop; the kernel owns the numbers.
 *
 * ```ts
 * const sk = ctx.skeleton(new Relax(ctx.options.iterations), [new Plate(n), new Plate(n)])
 * const result = await sk.run()   // the domain holding the last values
 * ```
 *
 * In recovery mode a skeleton before the recovery line is skipped whole; the
 * skeleton of the line walks its iterator (no calculate, no routing) to the
 * recovery step, restores its registered data and continues normally.
 */
export class Skeleton<It, D extends Domain> {
  readonly name: string
  readonly mode: RoutingMode
  /** What this skeleton's checkpoints contain (see CheckpointRegistry). */
  readonly checkpoint: CheckpointRegistry
  private readonly policy: CheckpointPolicy | undefined
  private readonly memoryPolicy: CheckpointPolicy | undefined
  private readonly router: Router
  private readonly customRoute: boolean
  private readonly total: number | undefined
  private finished = false
  private parts: PartitionTracker | undefined
  private readonly yieldClock: SparseClock
  private current: Mutable<SkeletonState<It, D>> | undefined
  private wb: { part: Partition; next: Partition | undefined; box: DomainDesc } | undefined
  // The superstep loop's state between calls of advance(), beside `current` (the step, its iterator,
  // domains and partitions, which the checkpoint hooks see).
  private at = BEGIN
  private nextIt!: It
  private last = false
  /** The value of what advance() last returned a promise of. */
  private resumed: unknown = undefined
  /** This loop as the StepScheduler sees it (made once: no closure per superstep). */
  private readonly stepper: Stepper = {
    advance: (driven) => this.advance(driven),
    awaitedSource: () => this.router.awaitedPeer(),
    awaitedTag: () => this.router.awaitedTag(),
  }

  constructor(
    private readonly rt: RankRuntime,
    readonly index: number,
    readonly kernel: CalcKernel<It, D>,
    private readonly domains: readonly [D, D],
    options: SkeletonOptions = {},
  ) {
    if (!(kernel instanceof CalcKernel)) throw new ConfigError('a skeleton needs a CalcKernel subclass instance')
    if (domains.length !== 2 || domains[0] === domains[1]) {
      throw new ConfigError('a skeleton needs two distinct domains (read and write are swapped after each superstep)')
    }
    if (domains[0].dims !== domains[1].dims || domains[0].dtype !== domains[1].dtype || domains[0].order !== domains[1].order || domains[0].components !== domains[1].components || domains[0].periodic.join() !== domains[1].periodic.join()) {
      throw new ConfigError('both domains of a skeleton must have the same dimensions, dtype, storage order, components per cell and periodic axes')
    }
    this.name = options.name ?? `skeleton${index}`
    this.mode = options.routing ?? 'border'
    if (this.mode !== 'border' && this.mode !== 'circulation') {
      throw new ConfigError(`unknown routing mode "${String(this.mode)}" (border or circulation)`)
    }
    this.router = new Router(rt.comm, this.mode, validateSchedule(options.schedule ?? { kind: 'all' }), this.name)
    this.yieldClock = rt.yieldClock ?? new SparseClock(YIELD_EVERY_MS)
    this.customRoute = kernel.shouldRoute !== CalcKernel.prototype.shouldRoute
    this.checkpoint = new CheckpointRegistry(this.name)
    this.total = kernel.totalSteps()
    this.policy = options.checkpoint === undefined ? undefined : parsePolicy(options.checkpoint)
    this.memoryPolicy = options.memoryCheckpoint === undefined ? undefined : parsePolicy(options.memoryCheckpoint)
  }

  /** Number of routing plans built so far (a plan is reused while the partition is unchanged). */
  get plansBuilt(): number {
    return this.router.plansBuilt
  }

  /** Number of partitions taken in so far (one per partition epoch met, see `Domain.partitionEpoch`). */
  get partitionsBuilt(): number {
    return this.parts?.built ?? 0
  }

  /** Of `partitionsBuilt`, those this rank evaluated itself; the others came from a rank of the same thread (`runLocal` shares them). */
  get partitionsEvaluated(): number {
    return this.parts?.evaluated ?? 0
  }

  /** Run the loop to the end; resolves with the domain that holds the final values. */
  async run(): Promise<D> {
    if (this.finished) throw new ConfigError(`${this.name} has already run`)
    this.finished = true
    this.checkRegistration()
    const recovery = this.open()
    if (recovery.kind === 'skip') {
      this.rt.status.set(this.index, -1, 'replay')
      return this.domains[0]
    }
    this.rt.status.set(this.index, 0, 'init')
    const s = this.initialize()
    if (s === undefined) return this.domains[0]
    if (recovery.kind === 'normal') {
      await this.routeInitial(s)
      this.at = BEGIN
    } else {
      await this.resume(s, recovery.step)
      if (this.last) return this.finish(s.read, s.partition, s.step)
      // The loop goes on with the superstep after the recovery step.
      this.at = NEXT
    }
    await this.loop()
    return this.finish(s.read, s.partition, s.step)
  }

  /** The domains on the rank's allocator, the partitions tracked, and what a recovery makes of this skeleton. */
  private open(): RecoveryDecision {
    const { rt } = this
    const { rank, size } = rt.comm
    const [read, write] = this.domains
    read.allocator = write.allocator = rt.comm.allocator
    this.parts = new PartitionTracker(this.domains[0], rank, size, this.name, rt.partitions?.slot(this.index, this.name))
    rt.onSkeletonStart?.(this.index, this.total, this.name)
    return rt.hooks.recoveryFor(this.index)
  }

  /**
   * Step 0: its partition, the domains' boxes and the kernel's initialize;
   * the state the loop and the checkpoint hooks share from here on.
   * Undefined when the loop has no step.
   */
  private initialize(): Mutable<SkeletonState<It, D>> | undefined {
    const { kernel: k } = this
    const { rank, size } = this.rt.comm
    const owner = this.domains[0]
    const [read, write] = this.domains
    const it = k.begin()
    if (k.end(it)) return undefined
    this.nextIt = k.next(it)
    this.last = k.end(this.nextIt)
    const part = this.parts!.at(0)
    const partNext = this.last ? undefined : this.parts!.at(1)
    assertDomainsFit(part.needed[rank].hull(part.possessed[rank]).volume, DTYPES[owner.dtype].BYTES_PER_ELEMENT * owner.components, this.name, rank)
    read.resize(part.needed[rank])
    write.resize(this.writeBox(part, partNext, rank))
    read.setPossessedBox(part.possessed[rank])
    write.setPossessedBox(part.possessed[rank])
    const initCtx: StepContext = { rank, size, step: 0 }
    k.initialize(read, write, initCtx)
    return this.state(0, it, read, write, part, partNext)
  }

  /**
   * Step 0 reads what its possessors initialized, as every later step reads
   * what they computed: `initialize` fills possessed cells only, the
   * framework routes the rest of needed(0) (halos in border mode, the blocks
   * a rank needs beyond its own in circulation). A resume routes after its
   * restore instead.
   */
  private async routeInitial(s: SkeletonState<It, D>): Promise<void> {
    const { router } = this
    this.rt.status.phase('route')
    const routed = router.route(router.plan(s.partition, s.partition), s.read, s.read, this.tag(INITIAL_ROUTE))
    if (routed) await routed
    // A circulation kernel may change its block in `read` at step 0: no peer may still be reading it.
    const settled = router.settle(s.read)
    if (settled) await settled
  }

  /**
   * The skeleton of the recovery line: replay the iterator to the recovery
   * step, restore the checkpoint there, have the kernel rebuild what it left
   * out and route what the next superstep needs; then swap, as the end of
   * that superstep did.
   */
  private async resume(s: Mutable<SkeletonState<It, D>>, recoveryStep: number): Promise<void> {
    const { rt } = this
    const { rank } = rt.comm
    rt.status.set(this.index, 0, 'replay')
    const replayStart = performance.now()
    this.replayTo(s, recoveryStep)
    const replayMs = performance.now() - replayStart
    rt.status.set(this.index, s.step, 'restore')
    const restoreStart = performance.now()
    const restored = await rt.hooks.restore(s)
    await this.refill(s, restored)
    // What the failure-free run's next step read, where the checkpoint recorded its digest (a domain left out of it).
    if (restored.readDigest !== undefined) checkRefilledRead(s, rank, restored.readDigest)
    rt.hooks.resumed({ skeleton: this.index, step: s.step, replayMs, restoreMs: performance.now() - restoreStart })
    const was = s.read
    s.read = s.write
    s.write = was
  }

  /** Fast-forward: walk the iterator only (no calculate, no routing) up to `recoveryStep`, and size the domains as that step had them. */
  private replayTo(s: Mutable<SkeletonState<It, D>>, recoveryStep: number): void {
    const { kernel: k } = this
    const { rank } = this.rt.comm
    while (s.step < recoveryStep) {
      if (this.last) throw new ConfigError(`${this.name}: the recovery step ${recoveryStep} is past the end of the loop (${s.step})`)
      s.it = this.nextIt
      s.step++
      this.nextIt = k.next(s.it)
      this.last = k.end(this.nextIt)
    }
    const parts = this.parts!
    s.partition = parts.at(s.step)
    s.next = this.last ? undefined : parts.at(s.step + 1)
    // The step's read box is the write box of the step before it.
    const before = s.step === 0 ? undefined : parts.at(s.step - 1)
    s.read.resize(before ? this.writeBox(before, s.partition, rank) : s.partition.needed[rank])
    s.write.resize(this.writeBox(s.partition, s.next, rank))
  }

  /**
   * After a restore: a domain the program left out of the checkpoint is the
   * kernel's to rebuild, seen as the next superstep will (the one the next
   * step reads: its possessed cells; initialize's values stand otherwise),
   * and the next superstep's needed cells come from their possessors.
   */
  private async refill(s: SkeletonState<It, D>, restored: RestoreOutcome): Promise<void> {
    const { rt, kernel: k, router } = this
    const { rank, size } = rt.comm
    const { read, write, partition: part, next: partNext } = s
    const refilled = !restored.read
    if (!restored.read || !restored.write) {
      const box = (partNext ?? part).possessed[rank]
      write.setPossessedBox(box)
      read.setPossessedBox(box)
      k.rebuild(write, read, { rank, size, step: s.step + 1, it: this.nextIt, restored: { read: restored.read, write: restored.write } })
    }
    if (partNext && (restored.reroute || refilled) && (!this.customRoute || (await this.agreeRoute(s.it, s.step)))) {
      rt.status.phase('route')
      if (refilled) {
        await router.route(router.plan(partNext, partNext), write, write, this.tag(s.step))
        // As before step 0: a circulation kernel may change its block while a peer still reads it.
        const settled = router.settle(write)
        if (settled) await settled
      } else {
        await router.route(router.plan(part, partNext), this.mode === 'border' ? write : read, write, this.tag(s.step))
      }
    }
  }

  /**
   * Run the supersteps: `advance` does the work, this awaits what it must
   * wait for. In a thread of several ranks (`runLocal`) a superstep waiting
   * for a neighbour's message goes to the StepScheduler instead.
   */
  private async loop(): Promise<void> {
    const scheduler = this.rt.scheduler
    for (;;) {
      let r = this.advance(false)
      if (r === WOULD_WAIT) r = scheduler!.park(this.rt.comm.rank, this.stepper)
      if (r === DONE) return
      const value = await r
      if (value === DONE) return
      this.resumed = value
    }
  }

  /**
   * The per-superstep path as a state machine (see Stepper): one
   * superstep is calculate → route (when the kernel says so, agreed by all
   * ranks) → checkpoint point → swap. Each state is a step method below,
   * which returns what to wait for, or undefined to go on. No closures, no
   * new objects; a promise only when something is really pending (an await
   * costs a few hundred bytes). `driven`: run by the StepScheduler, which
   * yields to the event loop itself.
   */
  private advance(driven: boolean): Pending {
    const s = this.current!
    for (;;) {
      let pending: Pending | undefined
      switch (this.at) {
        case BEGIN:
          pending = this.stepBegin(s)
          break
        case SETTLE:
          pending = this.stepSettle(s)
          break
        case CALCULATE:
          pending = this.stepCalculate(s)
          break
        case AGREED:
          this.stepAgreed()
          break
        case ROUTE:
          pending = this.stepRoute(s)
          break
        case RECEIVE:
          pending = this.stepReceive()
          break
        case RECEIVED:
          this.stepReceived()
          break
        case POINT:
          pending = this.stepPoint(s)
          break
        case SWAP:
          pending = this.stepSwap(s, driven)
          break
        case NEXT:
          this.stepNext(s)
          break
      }
      if (pending !== undefined) return pending
    }
  }

  /** The memory checkpoint of the point before last may still be copying the domain about to be written (read-only since): wait for it. */
  private stepBegin(s: SkeletonState<It, D>): Pending | undefined {
    this.rt.status.set(this.index, s.step, 'calculate')
    this.at = SETTLE
    return s.write.lent ? s.write.returned() : undefined
  }

  /** Sends of the previous superstep may still read the domain about to be written: wait for them. */
  private stepSettle(s: SkeletonState<It, D>): Pending | undefined {
    this.at = CALCULATE
    return this.router.settle(s.write)
  }

  /** The kernel computes this rank's possessed cells; then routing (agreed first when the kernel decides it) or the checkpoint point. */
  private stepCalculate(s: SkeletonState<It, D>): Pending | undefined {
    const rank = this.rt.comm.rank
    const { read, write, partition: part, next: partNext } = s
    write.resize(this.writeBox(part, partNext, rank))
    const mine = part.possessed[rank]
    read.setPossessedBox(mine)
    write.setPossessedBox(mine)
    this.kernel.calculate(read, write, s.it, s.step)
    if (!partNext) {
      this.at = POINT
    } else if (this.customRoute) {
      this.at = AGREED
      return this.agreeRoute(s.it, s.step)
    } else {
      this.at = ROUTE
    }
    return undefined
  }

  /** The ranks agreed whether to route this superstep (the value of agreeRoute). */
  private stepAgreed(): void {
    this.at = this.resumed === true ? ROUTE : POINT
    this.resumed = undefined
  }

  /** Send what the next superstep needs; receive at once what is there, otherwise wait for messages. */
  private stepRoute(s: SkeletonState<It, D>): Pending | undefined {
    this.rt.status.phase('route')
    const { read, write } = s
    const router = this.router
    const begun = router.begin(router.plan(s.partition, s.next!), this.mode === 'border' ? write : read, write, this.tag(s.step))
    if (begun === true) {
      this.at = POINT
    } else if (begun === false) {
      this.at = RECEIVE
    } else {
      this.at = POINT
      return begun
    }
    return undefined
  }

  /** Every message arrived: the checkpoint point; otherwise wait for the next one (or let the StepScheduler park this rank). */
  private stepReceive(): Pending | undefined {
    if (this.router.takeArrived()) {
      this.at = POINT
      return undefined
    }
    if (this.rt.scheduler) return WOULD_WAIT
    this.at = RECEIVED
    return this.router.nextMessage()
  }

  /** A message came (the value of nextMessage): take it in, then look for the rest. */
  private stepReceived(): void {
    const m = this.resumed as Message
    this.resumed = undefined
    this.at = RECEIVE
    this.router.accept(m)
  }

  /** The checkpoint point: the hooks return a promise only when they have something to do. */
  private stepPoint(s: SkeletonState<It, D>): Pending | undefined {
    this.rt.status.phase('checkpoint')
    this.at = SWAP
    return this.rt.hooks.checkpointPoint(s, this.last)
  }

  /** The domains swap (a pointer swap); the last superstep ends the loop; now and then the event loop runs. */
  private stepSwap(s: Mutable<SkeletonState<It, D>>, driven: boolean): Pending | undefined {
    this.rt.status.phase('swap')
    const was = s.read
    s.read = s.write
    s.write = was
    this.rt.onStep?.(this.index, s.step, this.total)
    if (this.last) return DONE
    this.at = NEXT
    if (!driven && this.yieldClock.due()) return this.yieldToEventLoop()
    return undefined
  }

  /** The next superstep: its iterator, step number and partitions. */
  private stepNext(s: Mutable<SkeletonState<It, D>>): void {
    s.it = this.nextIt
    s.step++
    s.partition = s.next!
    this.nextIt = this.kernel.next(s.it)
    this.last = this.kernel.end(this.nextIt)
    s.next = this.last ? undefined : this.parts!.at(s.step + 1)
    this.at = BEGIN
  }

  /**
   * Registration is complete when the loop starts: a checkpoint that would
   * restore nothing (both domains unregistered, no array or value registered,
   * no `rebuild`) is a configuration error now, not an empty file later; so
   * is leaving out the domain the next step reads with nothing to refill it
   * (a recovery would go on silently wrong).
   */
  private checkRegistration(): void {
    const reg = this.checkpoint
    const rebuilds = this.kernel.rebuild !== CalcKernel.prototype.rebuild
    if (!reg.includes('read') && !reg.includes('write') && reg.heavy.size === 0 && reg.light.size === 0 && !rebuilds) {
      throw new ConfigError(
        `${this.name}: its checkpoints would restore nothing (both domains unregistered, nothing registered): ` +
          `register the state replay cannot rebuild (sk.checkpoint.register / value), keep a domain, or give the kernel a rebuild() that refills the domains`,
      )
    }
    // After a recovery the next step would read what initialize left there: right only for a constant domain.
    if (!reg.includes('read') && !rebuilds && !reg.readRebuiltByInitialize) {
      throw new ConfigError(
        `${this.name}: the domain the next step reads is left out of checkpoints (sk.checkpoint.unregister('read')) and nothing refills it after a recovery, ` +
          `which would then go on from initialize's values: give the kernel a rebuild(read, write, ctx) that fills read's possessed cells when !ctx.restored.read, ` +
          `or keep 'read' in checkpoints; if initialize's values are what every step reads (a constant domain, or one the kernel does not read), ` +
          `declare it: sk.checkpoint.unregister('read', { rebuiltBy: 'initialize' })`,
      )
    }
  }

  /**
   * Supersteps whose messages are all there never reach the event loop (the
   * halos come through shared memory or at once): now and then let it run
   * timers, control messages and the errors they raise.
   */
  private async yieldToEventLoop(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve))
    this.yieldClock.reset()
  }

  /**
   * The end of the loop. In border mode the returned domain's needed cells get
   * the neighbours' final values (one more halo exchange): code after `run()`
   * that reads them (a residual, a stencil diagnostic) sees the final grid,
   * the same whether the last superstep was computed or restored from a
   * checkpoint (which saves possessed cells only).
   */
  private async finish(read: D, part: Partition, step: number): Promise<D> {
    await this.router.settleAll()
    // The caller may change the domains once run() returns: no checkpoint copy may still read them.
    for (const d of this.domains) if (d.lent) await d.returned()
    if (this.mode === 'border') {
      this.rt.status.phase('route')
      const routed = this.router.route(this.router.plan(part, part), read, read, this.tag(step + 1))
      if (routed) await routed
      // Its sends may still read `read` (views of the domain): the caller may change it once run() returns.
      await this.router.settleAll()
    }
    this.rt.status.phase('light')
    return read
  }

  /** The state handed to checkpoint hooks: one object per skeleton, updated in place each superstep. */
  private state(step: number, it: It, read: D, write: D, partition: Partition, next: Partition | undefined): SkeletonState<It, D> {
    const s = this.current
    if (!s) {
      const { index, name, mode, checkpoint: registry, policy, memoryPolicy } = this
      return (this.current = { index, name, step, it, read, write, mode, partition, next, registry, policy, memoryPolicy })
    }
    s.step = step
    s.it = it
    s.read = read
    s.write = write
    s.partition = partition
    s.next = next
    return s
  }

  /**
   * The box of the domain written at a superstep (cached per pair of
   * partitions). Border: it must hold what the rank computes and what the next
   * superstep needs of it. Circulation: it is the receive buffer of the blocks
   * the next superstep reads (the kernel reads `read`; routing moves blocks
   * from `read` into it), so it holds `needed(s+1)` only — a hull with
   * `possessed(s)` would span the whole ring where the rank wraps from the
   * last block to the first.
   */
  private writeBox(part: Partition, next: Partition | undefined, rank: number): DomainDesc {
    if (this.wb && this.wb.part === part && this.wb.next === next) return this.wb.box
    const needed = (next ?? part).needed[rank]
    const box = this.mode === 'circulation' ? needed : part.possessed[rank].hull(needed)
    this.wb = { part, next, box }
    return box
  }

  private async agreeRoute(it: It, step: number): Promise<boolean> {
    const mine = this.kernel.shouldRoute(it, step) ? 1 : 0
    return (await this.rt.comm.allreduce(mine, 'max')) === 1
  }

  /**
   * Routing messages of superstep `step`: kept within small integers (no
   * boxed numbers per message); a tag repeats after 2^20 supersteps, which is
   * safe since messages between two ranks with one tag arrive in order.
   */
  private tag(step: number): number {
    return (this.index % 2048) * 0x100000 + (step % 0x100000)
  }
}
