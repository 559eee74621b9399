import type { Domain } from '../domains/domain.js'

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
 *   calculate(read: Plate, write: Plate) { ... hot loop over read.data / write.data ... }
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
  /** Heavy work of one superstep: compute the possessed cells of `write` from `read`. */
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
   * (boundary values, initial data). Replayed during recovery.
   */
  initialize(_read: D, _write: D): void {}
}
