import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { CheckpointStore } from '../../src/checkpoint/store/checkpoint-store.js'
import { CalcKernel, ConfigError, defineProgram, Domain, DomainDesc, option, runLocal, splitPoint, type FaultToleranceConfig } from '../../src/index.js'
import matmul, { type MatmulResult } from '../../examples/matmul/matmul.js'
import { matmulSerial } from '../../examples/matmul/serial.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
const freshDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'molotof-registered-'))
  dirs.push(d)
  return d
}
const ft = (dir: string, extra: Partial<FaultToleranceConfig> = {}): FaultToleranceConfig => ({ dir, policy: { every: 1 }, keep: 2, resume: false, ...extra })
const bits = (rs: MatmulResult[]) => rs.flatMap((r) => Array.from(new BigUint64Array(Float64Array.from(r.rows!.values).buffer)))

describe('a checkpoint holds exactly what the program registers', () => {
  it.each([1, 2, 3])('both domains unregistered, one array registered: stopped after every step and resumed, C is bit-identical (%i ranks)', async (ranks) => {
    const n = 17
    const rounds = 2
    const argv = ['--n', String(n), '--rounds', String(rounds), '--return-rows']
    const reference = Array.from(new BigUint64Array(matmulSerial(n, rounds).buffer))
    for (let k = 0; k < rounds * ranks; k++) {
      const dir = freshDir()
      await expect(runLocal(matmul, { ranks, argv, checkpoint: ft(dir, { interrupt: { skeleton: 0, step: k } }) })).rejects.toThrow(/interrupted/)
      const store = new CheckpointStore(dir)
      const [line] = (await store.list()).slice(-1)
      expect(line.marker?.step).toBe(k)
      const file = await store.loadRankFile(line.seq, 0)
      expect([...file.entries.keys()].sort(), 'entries').toEqual(['C', 'iterator'])
      const logs: string[] = []
      const resumed = await runLocal(matmul, { ranks, argv, checkpoint: ft(dir, { resume: true }), onLog: (_r, t) => logs.push(t) })
      expect(logs.join('\n')).toMatch(new RegExp(`resuming from checkpoint \\d+ \\(skeleton 0, step ${k}\\)`))
      expect(bits(resumed), `ranks=${ranks} k=${k}`).toEqual(reference)
    }
  })

  it('a skeleton whose checkpoints would restore nothing is refused before its first step', async () => {
    let calculated = 0
    class Count extends CalcKernel<number, Strip> {
      begin() {
        return 0
      }
      end(it: number) {
        return it >= 3
      }
      next(it: number) {
        return it + 1
      }
      calculate() {
        calculated++
      }
    }
    const program = defineProgram({
      name: 'empty-checkpoints',
      options: { rebuild: option.boolean(false, 'give the kernel a rebuild()') },
      async main(ctx) {
        const kernel = ctx.options.rebuild
          ? new (class extends Count {
              override rebuild() {}
            })()
          : new Count()
        const sk = ctx.skeleton(kernel, [new Strip(), new Strip()])
        sk.checkpoint.unregister('read')
        sk.checkpoint.unregister('write')
        await sk.run()
        return calculated
      },
    })
    const dir = freshDir()
    const run = runLocal(program, { ranks: 2, checkpoint: ft(dir) })
    await expect(run).rejects.toThrow(ConfigError)
    await expect(run).rejects.toThrow(/checkpoints would restore nothing/)
    expect(calculated).toBe(0)
    expect(readdirSync(dir).filter((f) => f.startsWith('ckpt-'))).toEqual([])
    // A kernel that rebuilds its domains needs nothing else.
    expect(await runLocal(program, { ranks: 2, argv: ['--rebuild'], checkpoint: ft(freshDir()) })).toEqual([6, 6])
  })
})

class Strip extends Domain<1> {
  constructor() {
    super(1)
  }
  possessed(rank: number, size: number): DomainDesc<1> {
    return DomainDesc.of([splitPoint(8, size, rank)], [splitPoint(8, size, rank + 1)])
  }
  needed(rank: number, size: number): DomainDesc<1> {
    return this.possessed(rank, size)
  }
}
