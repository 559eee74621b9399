import type { DomainDesc } from '../domains/desc.js'
import type { Domain } from '../domains/domain.js'
import { ConfigError } from '../errors.js'
import { partitionAt, validatePartition, type Partition } from '../routing/partition.js'
import type { RoutingMode } from '../routing/plan.js'
import { Router, validateSchedule, type Schedule } from '../routing/router.js'
import { CheckpointRegistry } from '../checkpoint/registry.js'
import { parsePolicy, type CheckpointPolicy } from '../checkpoint/policy/policy.js'
import type { SkeletonState } from '../checkpoint/skeleton-hooks.js'
import { CalcKernel, type StepContext } from './kernel.js'
import type { RankRuntime } from './runtime.js'

export interface SkeletonOptions {
  /** `border` (halo exchange, the default) or `circulation` (blocks move between ranks). */
  routing?: RoutingMode
  /** Message schedule; all at once by default. */
  schedule?: Schedule
  /** A name for messages and checkpoints; `skeleton<index>` by default. */
  name?: string
  /** When this skeleton checkpoints, overriding the run's policy (`{ every: 50 }`, `'30s'`, `{ mtbf: '6h' }`…). */
  checkpoint?: CheckpointPolicy | string
}

/**
 * The GReLoSSS main loop of one skeleton. Each superstep: calculate → route
 * (when the kernel says so, agreed by all ranks) → checkpoint point → swap
 * (a pointer swap). The skeleton owns the loop; the kernel owns the numbers.
 *
 * ```ts
 * const sk = ctx.skeleton(new Relax(iterations), [new Plate(n), new Plate(n)])
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
  private readonly router: Router
  private readonly customRoute: boolean
  private readonly total: number | undefined
  private finished = false

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
    if (domains[0].dims !== domains[1].dims || domains[0].dtype !== domains[1].dtype || domains[0].order !== domains[1].order) {
      throw new ConfigError('both domains of a skeleton must have the same dimensions, dtype and storage order')
    }
    this.name = options.name ?? `skeleton${index}`
    this.mode = options.routing ?? 'border'
    if (this.mode !== 'border' && this.mode !== 'circulation') {
      throw new ConfigError(`unknown routing mode "${String(this.mode)}" (border or circulation)`)
    }
    this.router = new Router(rt.comm, this.mode, validateSchedule(options.schedule ?? { kind: 'all' }), this.name)
    this.customRoute = kernel.shouldRoute !== CalcKernel.prototype.shouldRoute
    this.checkpoint = new CheckpointRegistry(this.name)
    this.total = kernel.totalSteps()
    this.policy = options.checkpoint === undefined ? undefined : parsePolicy(options.checkpoint)
  }

  /** Number of routing plans built so far (a plan is reused while the partition is unchanged). */
  get plansBuilt(): number {
    return this.router.plansBuilt
  }

  /** Run the loop to the end; resolves with the domain that holds the final values. */
  async run(): Promise<D> {
    if (this.finished) throw new ConfigError(`${this.name} has already run`)
    this.finished = true
    this.checkRegistration()
    const { rt, kernel: k } = this
    const { rank, size } = rt.comm
    const owner = this.domains[0]
    let [read, write] = this.domains
    read.allocator = write.allocator = rt.comm.allocator

    rt.onSkeletonStart?.(this.index, this.total)
    const recovery = rt.hooks.recoveryFor(this.index)
    if (recovery.kind === 'skip') {
      rt.status.set(this.index, -1, 'replay')
      return read
    }

    rt.status.set(this.index, 0, 'init')
    let step = 0
    let it = k.begin()
    if (k.end(it)) return read
    let nextIt = k.next(it)
    let last = k.end(nextIt)
    let part = this.partition(owner, size, 0)
    let partNext = last ? undefined : this.partition(owner, size, 1)
    const advance = () => {
      it = nextIt
      step++
      part = partNext!
      nextIt = k.next(it)
      last = k.end(nextIt)
      partNext = last ? undefined : this.partition(owner, size, step + 1)
    }

    read.resize(part.needed[rank])
    write.resize(writeBox(this.mode, part, partNext, rank))
    read.setPossessedBox(part.possessed[rank])
    write.setPossessedBox(part.possessed[rank])
    const initCtx: StepContext = { rank, size, step: 0 }
    k.initialize(read, write, initCtx)

    if (recovery.kind === 'resume') {
      // Fast-forward: replay the iterator only, up to the recovery step.
      rt.status.set(this.index, 0, 'replay')
      const replayStart = performance.now()
      while (step < recovery.step) {
        if (last) throw new ConfigError(`${this.name}: the recovery step ${recovery.step} is past the end of the loop (${step})`)
        it = nextIt
        step++
        nextIt = k.next(it)
        last = k.end(nextIt)
      }
      part = this.partition(owner, size, step)
      partNext = last ? undefined : this.partition(owner, size, step + 1)
      // The step's read box is the write box of the step before it.
      const before = step === 0 ? undefined : this.partition(owner, size, step - 1)
      read.resize(before ? writeBox(this.mode, before, part, rank) : part.needed[rank])
      write.resize(writeBox(this.mode, part, partNext, rank))
      const replayMs = performance.now() - replayStart
      rt.status.set(this.index, step, 'restore')
      const restoreStart = performance.now()
      const state = this.state(step, it, read, write, part, partNext)
      const restored = await rt.hooks.restore(state)
      if (!restored.read || !restored.write) {
        // The program left a domain out: its kernel rebuilds it, seen as the next superstep will.
        const box = (partNext ?? part).possessed[rank]
        write.setPossessedBox(box)
        read.setPossessedBox(box)
        k.rebuild(write, read, { rank, size, step: step + 1, it: nextIt, restored: { read: restored.read, write: restored.write } })
      }
      if (partNext && restored.reroute && (await this.agreeRoute(it, step))) {
        rt.status.phase('route')
        await this.router.route(this.router.plan(part, partNext), this.mode === 'border' ? write : read, write, this.tag(step))
      }
      rt.hooks.resumed({ skeleton: this.index, step, replayMs, restoreMs: performance.now() - restoreStart })
      ;[read, write] = [write, read]
      if (last) return this.finish(read)
      advance()
    }

    for (;;) {
      rt.status.set(this.index, step, 'calculate')
      await this.router.settle(write)
      write.resize(writeBox(this.mode, part, partNext, rank))
      read.setPossessedBox(part.possessed[rank])
      write.setPossessedBox(part.possessed[rank])
      k.calculate(read, write, it, step)

      if (partNext && (await this.agreeRoute(it, step))) {
        rt.status.phase('route')
        const plan = this.router.plan(part, partNext)
        await this.router.route(plan, this.mode === 'border' ? write : read, write, this.tag(step))
      }

      rt.status.phase('checkpoint')
      await rt.hooks.checkpointPoint(this.state(step, it, read, write, part, partNext), last)

      rt.status.phase('swap')
      ;[read, write] = [write, read]
      rt.onStep?.(this.index, step, this.total)
      if (last) break
      advance()
    }
    return this.finish(read)
  }

  /**
   * Registration is complete when the loop starts: a checkpoint that would
   * restore nothing (both domains unregistered, no array or value registered,
   * no `rebuild`) is a configuration error now, not an empty file later.
   */
  private checkRegistration(): void {
    const reg = this.checkpoint
    if (reg.includes('read') || reg.includes('write') || reg.heavy.size > 0 || reg.light.size > 0) return
    if (this.kernel.rebuild !== CalcKernel.prototype.rebuild) return
    throw new ConfigError(
      `${this.name}: its checkpoints would restore nothing (both domains unregistered, nothing registered): ` +
        `register the state replay cannot rebuild (sk.checkpoint.register / value), keep a domain, or give the kernel a rebuild() that refills the domains`,
    )
  }

  private async finish(read: D): Promise<D> {
    await this.router.settleAll()
    this.rt.status.phase('light')
    return read
  }

  private state(step: number, it: It, read: D, write: D, partition: Partition, next: Partition | undefined): SkeletonState<It, D> {
    const { index, name, mode, checkpoint: registry, policy } = this
    return { index, name, step, it, read, write, mode, partition, next, registry, policy }
  }

  private partition(owner: D, size: number, step: number): Partition {
    const p = partitionAt(owner, size, step)
    if (step === 0) validatePartition(p, this.name)
    return p
  }

  private async agreeRoute(it: It, step: number): Promise<boolean> {
    if (!this.customRoute) return true
    const mine = this.kernel.shouldRoute(it, step) ? 1 : 0
    return (await this.rt.comm.allreduce(mine, 'max')) === 1
  }

  private tag(step: number): number {
    return this.index * 2 ** 32 + step
  }
}

/**
 * The box of the domain written at a superstep. Border: it must hold what the
 * rank computes and what the next superstep needs of it. Circulation: it is
 * the receive buffer of the blocks the next superstep reads (the kernel reads
 * `read`; routing moves blocks from `read` into it), so it holds `needed(s+1)`
 * only — a hull with `possessed(s)` would span the whole ring where the
 * rank wraps from the last block to the first.
 */
function writeBox(mode: RoutingMode, part: Partition, next: Partition | undefined, rank: number): DomainDesc {
  const needed = (next ?? part).needed[rank]
  return mode === 'circulation' ? needed : part.possessed[rank].hull(needed)
}
