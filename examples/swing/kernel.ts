import { CalcKernel } from 'molotof'
import { bellmanDate, type BellmanContext, type Grid2 } from './model/bellman.js'
import type { SwingDomain } from './domain.js'

/**
 * Backward induction over the decision dates: the iterator is the date
 * k = N − 1 … 0; `calculate` computes V_k on this rank's levels from V_{k+1}
 * (continuation values, then the Bellman maximisation, in model/bellman.ts).
 */
export class Swing extends CalcKernel<number, SwingDomain> {
  constructor(private readonly ctx: BellmanContext) {
    super()
  }

  begin(): number {
    return this.ctx.params.N - 1
  }

  end(k: number): boolean {
    return k < 0
  }

  next(k: number): number {
    return k - 1
  }

  override totalSteps(): number {
    return this.ctx.params.N
  }

  /** V_N = 0: gas left in the storage at the end is worthless. */
  override initialize(read: SwingDomain): void {
    read.fill(0)
  }

  calculate(read: SwingDomain, write: SwingDomain, k: number): void {
    const box = write.possessedBox
    bellmanDate(this.ctx, k, read as unknown as Grid2, write as unknown as Grid2, box.lower[0], box.upper[0])
  }
}
