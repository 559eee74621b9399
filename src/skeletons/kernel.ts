import { ConfigError } from '../errors.js'
import type { Domain } from '../domains/domain.js'

/**
 * Where a kernel hook runs: this rank, the rank count and the superstep
 * (numbered from 0, as everywhere in molotof).
 *
 * ```ts
 * class HotTop extends Relax {
 *   override initialize(read: Plate, write: Plate, ctx: StepContext) {
 *     if (ctx.rank === 0) for (const d of [read, write]) for (let j = 0; j < d.n + 2; j++) d.put(0, j, 1)
 *   }
 * }
 * ```
 */
export interface StepContext {
  readonly rank: number
  readonly size: number
  readonly step: number
}

/**
 * What `rebuild` sees: the superstep that will read the rebuilt domain, its
 * iterator value, and which domains the checkpoint did not restore.
 */
export interface RebuildContext<It> extends StepContext {
  /** The iterator value of superstep `step`. */
  readonly it: It
  /** Whether each domain was restored from the checkpoint (false: left out of it, for `rebuild` to fill). */
  readonly restored: { readonly read: boolean; readonly write: boolean }
}

/**
 * The user's calculation: an iterator (`begin`, `next`, `end`) over light
 * values and the heavy `calculate` that reads one domain and writes the other.
 * The iterator is replayed during recovery, so it must be deterministic and
 * cheap; `calculate` is skipped until the recovery line.
 *
 * ```ts
 * class Relax extends CalcKernel<number, Plate> {
 *   constructor(private iterations: number) { super() }
 *   begin() { return 0 }
 *   end(it: number) { return it >= this.iterations }
 *   next(it: number) { return it + 1 }
 *   calculate(read: Plate, write: Plate) {
 *     const b = write.possessedBox, u = read.data, v = write.data, s = read.s0, o = read.offset
 *     for (let i = b.lower[0]; i < b.upper[0]; i++)
 *       for (let j = b.lower[1]; j < b.upper[1]; j++) v[o + i * s + j] = 0.25 * (u[o + i * s + j - 1] + u[o + i * s + j + 1] + u[o + (i - 1) * s + j] + u[o + (i + 1) * s + j])
 *   }
 * }
 * ```
 */
export abstract class CalcKernel<It, D extends Domain = Domain> {
  /** The first iterator value. */
  abstract begin(): It
  /** True when `it` is past the last superstep (the loop stops before calculating it). */
  abstract end(it: It): boolean
  /** The iterator value of the following superstep. */
  abstract next(it: It): It
  /**
   * Heavy work of one superstep: compute the possessed cells of `write` from
   * `read`. In `border` mode `read` is read-only here: a memory checkpoint
   * taken at the end of the previous superstep may still be copying it in the
   * background. (In `circulation` mode a kernel may change its block in
   * `read` before routing moves it on; that domain is copied at the point.)
   */
  abstract calculate(read: D, write: D, it: It, step: number): void

  /**
   * Whether to route after this superstep (default: always). When a kernel
   * overrides it, the ranks agree on the answer (routing happens if any rank
   * asks for it), so a rank-dependent condition can never leave a rank waiting.
   */
  shouldRoute(_it: It, _step: number): boolean {
    return true
  }

  /** The number of supersteps, when known (for progress and ETA); undefined by default. */
  totalSteps(): number | undefined {
    return undefined
  }

  /**
   * Light set-up once both domains are allocated for the first superstep
   * (boundary values, initial data). Replayed during recovery. Both domains
   * are allocated for superstep 0 and their `possessedBox` is set to this
   * rank's `possessed(rank, size, 0)`; `ctx.step` is 0.
   *
   * Fill the possessed cells of `read` (the initial data), and the cells
   * that no rank possesses but the steps read (fixed boundary values) in both
   * domains. The rest of what step 0 reads comes from the ranks that possess
   * it, routed before step 0: halos in `border` mode, the cells of `needed(0)`
   * beyond this rank's block in `circulation` (values put there are overwritten).
   */
  initialize(_read: D, _write: D, _ctx: StepContext): void {}

  /**
   * Recovery only: fill by light code a domain the program left out of its
   * checkpoints (`sk.checkpoint.unregister('read')` or `'write'`). It is called
   * after the registered data is restored, with the domains as superstep
   * `ctx.step` (the one after the checkpoint) will see them: `read` is
   * allocated to what that superstep reads (its box) and both `possessedBox`
   * are its possessed box; `ctx.restored` says which domains the checkpoint
   * held. When `read` was left out, fill its possessed cells with what that
   * superstep reads there: the rest (halos, in circulation the cells beyond
   * the block) is routed from the ranks that possess it afterwards, and a
   * recovery checks the possessed cells against a digest the checkpoint
   * recorded (a difference is a ReplayDivergenceError). `write` needs nothing:
   * that superstep overwrites it. Nothing by default: a skeleton that leaves
   * `read` out with no `rebuild` is refused at start, unless the program
   * declares that `initialize`'s values stay right
   * (`unregister('read', { rebuiltBy: 'initialize' })`).
   *
   * ```ts
   * class Waves extends CountedKernel<Plate> {
   *   // Step s writes a formula of s and the coordinates: the grid need not be saved (sk.checkpoint.unregister('read')).
   *   calculate(_read: Plate, write: Plate, it: number) {
   *     for (const [i, j] of write.possessedBox.cells()) write.put(i, j, Math.sin(it + 1 + i + j))
   *   }
   *   override rebuild(read: Plate, _write: Plate, ctx: RebuildContext<number>) {
   *     if (!ctx.restored.read) for (const [i, j] of read.possessedBox.cells()) read.put(i, j, Math.sin(ctx.step + i + j))
   *   }
   * }
   * ```
   */
  rebuild(_read: D, _write: D, _ctx: RebuildContext<It>): void {}
}

/**
 * A kernel whose iterator counts supersteps: 0, 1, …, `steps` − 1 (the loop
 * runs `steps` supersteps, and progress reports know the total). Most
 * iterative programs need no other iterator; subclass `CalcKernel` for one
 * that carries more than a count (a date, a tolerance reached).
 *
 * ```ts
 * class Copy extends CountedKernel<Plate> {
 *   calculate(read: Plate, write: Plate, it: number) {
 *     if (it === 0) console.log('first superstep')   // it = the superstep: 0, 1, …, steps − 1
 *     write.data.set(read.data)
 *   }
 * }
 * const sk = ctx.skeleton(new Copy(500), [new Plate(n), new Plate(n)])   // 500 supersteps
 * ```
 */
export abstract class CountedKernel<D extends Domain = Domain> extends CalcKernel<number, D> {
  constructor(readonly steps: number) {
    super()
    if (!Number.isInteger(steps) || steps < 0) throw new ConfigError(`a CountedKernel needs a whole number of supersteps ≥ 0 (got ${steps})`)
  }

  begin(): number {
    return 0
  }

  end(it: number): boolean {
    return it >= this.steps
  }

  next(it: number): number {
    return it + 1
  }

  override totalSteps(): number {
    return this.steps
  }
}
