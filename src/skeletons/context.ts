import type { Domain } from '../domains/domain.js'
import type { Communicator, ReduceOp } from '../routing/communicator.js'
import { FRAMEWORK_TAGS } from '../routing/tags.js'
import type { CalcKernel } from './kernel.js'
import type { RankRuntime } from './runtime.js'
import { foldInStorageOrder } from './ordered-fold.js'
import { Skeleton, type SkeletonOptions } from './skeleton.js'

/**
 * What a program's `main` sees on each rank: who it is, its parsed options,
 * skeleton construction, and a few collectives for light results.
 *
 * ```ts
 * export default defineProgram({
 *   name: 'relax',
 *   options: { n: option.int(256, 'interior size'), iterations: option.int(500, 'sweeps') },
 *   async main(ctx) {
 *     const { n, iterations } = ctx.options
 *     const grid = await ctx.skeleton(new Relax(iterations), [new Plate(n), new Plate(n)]).run()
 *     const sum = await ctx.sumInStorageOrder(grid)
 *     ctx.log(`sum ${sum}`)   // rank 0's log line
 *     return { sum }
 *   },
 * })
 * ```
 */
export class RankContext<O> {
  private skeletons = 0

  constructor(
    private readonly rt: RankRuntime,
    readonly options: O,
    /** True when this run resumes from a checkpoint (light code runs as usual). */
    readonly recovering: boolean,
    private readonly logSink: (text: string) => void,
  ) {}

  get rank(): number {
    return this.rt.comm.rank
  }
  get size(): number {
    return this.rt.comm.size
  }
  /** The communicator, for programs that need more than the helpers below. */
  get comm(): Communicator {
    return this.rt.comm
  }

  /** A new skeleton; skeletons are numbered in creation order, which every rank must follow. */
  skeleton<It, D extends Domain>(kernel: CalcKernel<It, D>, domains: readonly [D, D], options?: SkeletonOptions): Skeleton<It, D> {
    return new Skeleton(this.rt, this.skeletons++, kernel, domains, options)
  }

  /**
   * Checkpoint at the next checkpoint point, whatever the policy (a no-op
   * when checkpointing is off). Call it on every rank, like a collective.
   */
  requestCheckpoint(): void {
    this.rt.hooks.request()
  }

  /** Print a line once (from rank 0). */
  log(...parts: unknown[]): void {
    if (this.rank === 0) this.logSink(parts.map(String).join(' '))
  }

  /** Print a line from this rank, prefixed with its number. */
  logAll(...parts: unknown[]): void {
    this.logSink(`[rank ${this.rank}] ${parts.map(String).join(' ')}`)
  }

  /** Reduce one number over all ranks; every rank gets the result. */
  allreduce(value: number, op: ReduceOp): Promise<number> {
    return this.rt.comm.allreduce(value, op)
  }

  /** Every rank's value, in rank order, on every rank (small light values). */
  allgather<T>(value: T): Promise<T[]> {
    return this.rt.comm.allgather(value)
  }

  /** Resolves once every rank has called it. */
  barrier(): Promise<void> {
    return this.rt.comm.barrier()
  }

  /**
   * Thread an accumulator through the ranks in order (rank 0 first) and give
   * every rank the final value. Unlike a tree reduction, a floating-point sum
   * built this way is bit-identical to a serial loop over the same cells.
   */
  async foldInRankOrder(initial: number, step: (acc: number) => number): Promise<number> {
    const { rank, size } = this
    const tag = FRAMEWORK_TAGS.foldInRankOrder
    let acc = initial
    if (rank > 0) {
      const m = await this.comm.recv(rank - 1, tag)
      acc = new Float64Array(m.bytes.slice().buffer)[0]
      m.release()
    }
    acc = step(acc)
    if (rank < size - 1) await this.comm.send(rank + 1, tag, new Uint8Array(Float64Array.of(acc).buffer))
    return this.comm.allreduce(rank === size - 1 ? acc : -Infinity, 'max')
  }

  /**
   * The sum of the cells every rank possesses in `domain` (its
   * `possessedBox`, e.g. the domain `run()` returned), added in the global
   * storage order: the same bits as a serial loop over the whole array, for
   * any box decomposition (strips, a 2-D grid of ranks, uneven boxes).
   * Call it on every rank. Cost: a serial pass on rank 0 (see `foldInStorageOrder`).
   *
   * ```ts
   * const grid = await sk.run()
   * const checksum = await ctx.sumInStorageOrder(grid)
   * ```
   */
  sumInStorageOrder(domain: Domain): Promise<number> {
    return foldInStorageOrder(this.comm, domain, 0, { kind: 'sum' })
  }

  /**
   * Thread `step` through the cells every rank possesses in `domain`, in the
   * global storage order (the order of a serial loop over the whole array),
   * and give every rank the result. Every possessed cell crosses once to
   * rank 0, band by band (rank 0 holds at most two bands of about 2^20
   * cells), where `step` runs on each cell in turn (on each value of a cell
   * of several components; see `foldCellsInStorageOrder` for whole cells and
   * their coordinates): the time of a serial pass plus the transfer. For
   * results and checksums, not every superstep.
   *
   * ```ts
   * const sumOfSquares = await ctx.foldInStorageOrder(grid, 0, (acc, v) => acc + v * v)
   * ```
   */
  foldInStorageOrder(domain: Domain, initial: number, step: (acc: number, value: number) => number): Promise<number> {
    return foldInStorageOrder(this.comm, domain, initial, { kind: 'fold', step })
  }

  /**
   * `foldInStorageOrder` over whole cells: `step` gets each possessed cell's
   * values (all its components) and its global coordinates, in the global
   * storage order, so a per-cell figure needs no decoding of a running index.
   * `cell` and `at` are reused from one call to the next: read them during
   * the call, copy what must outlive it. Same cost as `foldInStorageOrder`.
   *
   * ```ts
   * // x-momentum of a D2Q9 lattice (components: 9) over the columns j ≥ 10
   * const cx = [0, 1, 0, -1, 0, 1, -1, -1, 1]
   * const momentum = await ctx.foldCellsInStorageOrder(grid, 0, (acc, f, at) => {
   *   if (at[1] < 10) return acc
   *   for (let q = 0; q < f.length; q++) acc += cx[q] * f[q]
   *   return acc
   * })
   * ```
   */
  foldCellsInStorageOrder(domain: Domain, initial: number, step: (acc: number, cell: Float64Array, at: readonly number[]) => number): Promise<number> {
    return foldInStorageOrder(this.comm, domain, initial, { kind: 'cells', step })
  }
}
