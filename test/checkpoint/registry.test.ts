import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { CheckpointRegistry } from '../../src/checkpoint/registry.js'
import { CalcKernel, ConfigError, defineProgram, Domain, DomainDesc, option, runLocal, type Serializer } from '../../src/index.js'
import { main } from '../../src/cli/main.js'

class Money {
  constructor(
    readonly cents: bigint,
    readonly currency: string,
  ) {}
}
const moneySerializer: Serializer<Money> = {
  name: 'money',
  serialize: (m) => ({ cents: m.cents, currency: m.currency }),
  deserialize: (d) => {
    const x = d as { cents: bigint; currency: string }
    return new Money(x.cents, x.currency)
  },
}

/** One cell per rank: enough to carry registered values through a skeleton. */
class Dot extends Domain<1> {
  constructor() {
    super(1)
  }
  possessed(rank: number): DomainDesc<1> {
    return DomainDesc.of([rank], [rank + 1])
  }
  needed(rank: number): DomainDesc<1> {
    return this.possessed(rank)
  }
}

describe('CheckpointRegistry', () => {
  it('refuses a name twice, reserved names, and values it cannot save — at registration', () => {
    const r = new CheckpointRegistry('sk')
    r.register('hist', new Float64Array(4))
    expect(() => r.register('hist', new Float64Array(4))).toThrow(/"hist" is already registered/)
    expect(() => r.value('hist', 1)).toThrow(/already registered/)
    expect(() => r.value('iterator', 1)).toThrow(/reserved/)
    expect(() => r.value('cb', { onDone: () => 1 })).toThrowError(ConfigError)
    expect(() => r.value('cb2', { onDone: () => 1 })).toThrow(/cb2.*onDone/)
    expect(() => r.value('money', new Money(5n, 'EUR'))).toThrow(/money/)
    expect(() => r.value('money', new Money(5n, 'EUR'), moneySerializer)).not.toThrow()
    expect(() => r.unregister('domain' as 'read')).toThrow(/cannot unregister "domain"/)
    // Only the domain the next step reads can be declared refilled by initialize, and only so.
    expect(() => r.unregister('write', { rebuiltBy: 'initialize' })).toThrow(/only "read" is read by the next step/)
    expect(() => r.unregister('read', { rebuiltBy: 'rebuild' as 'initialize' })).toThrow(/rebuiltBy can only be "initialize"/)
    expect(r.includes('read')).toBe(true)
    r.unregister('read', { rebuiltBy: 'initialize' })
    expect([r.includes('read'), r.readRebuiltByInitialize]).toEqual([false, true])
  })

  it('restores registered values with their types (typed array, Map/Set/Date/BigInt/NaN/-0, a user class)', async () => {
    class K extends CalcKernel<number, Dot> {
      begin() {
        return 0
      }
      end(i: number) {
        return i >= 6
      }
      next(i: number) {
        return i + 1
      }
      calculate(): void {}
    }
    const program = defineProgram({
      name: 'registry-types',
      options: { stop: option.int(-1, 'interrupt step') },
      async main(ctx) {
        const sk = ctx.skeleton(new K(), [new Dot(), new Dot()])
        const hist = sk.checkpoint.register('hist', new Int32Array(3))
        const light = sk.checkpoint.value('light', {
          m: new Map<string, bigint>([['a', 1n]]),
          s: new Set([NaN]),
          d: new Date(0),
          z: -0,
        })
        const money = sk.checkpoint.value('money', new Money(0n, 'EUR'), moneySerializer)
        if (!ctx.recovering) {
          // State set in the first run only: a resumed run must get it back from the checkpoint.
          hist.set([7, 8, 9])
          light.value = { m: new Map([['b', 2n ** 70n]]), s: new Set([NaN, -0]), d: new Date(86_400_000), z: -0 }
          money.value = new Money(1234n, 'CHF')
        }
        await sk.run()
        return { hist: [...hist], light: light.value, money: money.value }
      },
    })
    const dir = mkdtempSync(join(tmpdir(), 'molotof-reg-'))
    try {
      const checkpoint = { dir, policy: { every: 1 }, keep: 2, resume: false }
      await expect(runLocal(program, { ranks: 2, checkpoint: { ...checkpoint, interrupt: { skeleton: 0, step: 3 } } })).rejects.toThrow(/interrupted/)
      const [r] = await runLocal(program, { ranks: 2, checkpoint: { ...checkpoint, resume: true } })
      expect(r.hist).toEqual([7, 8, 9])
      expect(r.light.m.get('b')).toBe(2n ** 70n)
      expect([...r.light.s].some((x) => Number.isNaN(x))).toBe(true)
      expect(r.light.d.getTime()).toBe(86_400_000)
      expect(Object.is(r.light.z, -0)).toBe(true)
      expect(r.money).toBeInstanceOf(Money)
      expect(r.money.cents).toBe(1234n)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('takes a checkpoint on request (requestCheckpoint on every rank), whatever the policy', async () => {
    let ctxRef: { requestCheckpoint(): void } | undefined
    class K extends CalcKernel<number, Dot> {
      begin() {
        return 0
      }
      end(i: number) {
        return i >= 10
      }
      next(i: number) {
        return i + 1
      }
      calculate(_r: Dot, _w: Dot, i: number): void {
        if (i === 4) ctxRef?.requestCheckpoint()
      }
    }
    const program = defineProgram({
      name: 'on-request',
      options: {},
      async main(ctx) {
        ctxRef = ctx
        await ctx.skeleton(new K(), [new Dot(), new Dot()]).run()
        return 0
      },
    })
    const dir = mkdtempSync(join(tmpdir(), 'molotof-req-'))
    try {
      await runLocal(program, { ranks: 1, checkpoint: { dir, policy: { onRequest: true }, keep: 2, resume: false } })
      const lines: string[] = []
      await main(['inspect', dir, '--verify'], (s) => lines.push(s))
      expect(lines.join('\n')).toMatch(/#0 {2}valid +skeleton 0 step 4 {2}1 ranks/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
