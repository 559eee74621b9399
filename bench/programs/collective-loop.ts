// Many small collectives in a row: their latency per rank count (bench:scale).
import { defineProgram, option } from 'molotof'

export interface CollectiveResult {
  /** Seconds per operation, this rank: allreduce, allgather of a number, barrier. */
  allreduce: number
  allgather: number
  barrier: number
  /** The last allreduce's value (to check that ranks agree). */
  last: number
}

export default defineProgram({
  name: 'collective-loop',
  options: { repeats: option.int(200, 'operations of each kind', { min: 1 }) },
  async main(ctx): Promise<CollectiveResult> {
    const n = ctx.options.repeats
    let last = 0
    await ctx.barrier()
    let t0 = performance.now()
    for (let i = 0; i < n; i++) last = await ctx.allreduce(ctx.rank * 0.1 + i, 'sum')
    const allreduce = (performance.now() - t0) / 1000 / n
    t0 = performance.now()
    for (let i = 0; i < n; i++) await ctx.allgather(ctx.rank + i)
    const allgather = (performance.now() - t0) / 1000 / n
    t0 = performance.now()
    for (let i = 0; i < n; i++) await ctx.barrier()
    const barrier = (performance.now() - t0) / 1000 / n
    return { allreduce, allgather, barrier, last }
  },
})
