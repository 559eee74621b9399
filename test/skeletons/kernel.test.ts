import { describe, expect, it } from 'vitest'
import { CountedKernel, defineProgram, Domain, DomainDesc, option, runLocal } from '../../src/index.js'
import { ConfigError } from '../../src/errors.js'

class Cells extends Domain<1> {
  constructor() {
    super(1)
  }
  possessed(): DomainDesc<1> {
    return DomainDesc.of([0], [4])
  }
  needed(): DomainDesc<1> {
    return this.possessed()
  }
}

/** Records the iterator value and the step of every superstep. */
class Record extends CountedKernel<Cells> {
  readonly seen: Array<[number, number]> = []
  calculate(_read: Cells, _write: Cells, it: number, step: number): void {
    this.seen.push([it, step])
  }
}

const program = defineProgram({
  name: 'counted',
  options: { steps: option.int(3, 'supersteps', { min: 0 }) },
  async main(ctx): Promise<{ seen: Array<[number, number]>; total: number | undefined }> {
    const k = new Record(ctx.options.steps)
    await ctx.skeleton(k, [new Cells(), new Cells()]).run()
    return { seen: k.seen, total: k.totalSteps() }
  },
})

describe('CountedKernel', () => {
  it('runs `steps` supersteps with it = the step, and says how many', async () => {
    for (const steps of [0, 1, 7]) {
      const [r] = await runLocal(program, { ranks: 1, argv: ['--steps', String(steps)] })
      expect(r.seen).toEqual(Array.from({ length: steps }, (_, s) => [s, s]))
      expect(r.total).toBe(steps)
    }
  })

  it('refuses a count that is not a whole number ≥ 0', () => {
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => new Record(bad)).toThrow(ConfigError)
  })
})
