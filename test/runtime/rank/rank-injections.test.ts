import { readdir, readFile, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { RankInjections, type RankInjectionSetup } from '../../../src/runtime/rank/rank-injections.js'
import { createStatusBuffer, RankStatus } from '../../../src/runtime/status.js'
import { tempDir } from '../../checkpoint/helpers.js'

/** `die` cannot end the test process: it throws this instead, so the test sees where the rank would have died. */
class Died extends Error {}

function injections(setup: Partial<RankInjectionSetup>): { inj: RankInjections; status: RankStatus } {
  const status = new RankStatus(createStatusBuffer(2), 1)
  const die = (): never => {
    throw new Died('died')
  }
  return { inj: new RankInjections({ rank: 1, size: 2, inject: [], die, ...setup }, status), status }
}

describe('failure injection on a rank', () => {
  let dir: string | undefined
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true })
    dir = undefined
  })

  it('a checkpoint-phase point leaves the first half of the rank file under a temporary name, then dies', async () => {
    dir = await tempDir('inject')
    const { inj } = injections({ inject: [{ rank: 1, skeleton: 0, step: 7, phase: 'checkpoint' }] })
    const ckpt = join(dir, 'ckpt-00000003')
    const file = { dir: ckpt, path: join(ckpt, 'rank-1.mlf'), parts: [Uint8Array.of(1, 2, 3, 4), Uint8Array.of(5, 6, 7, 8, 9, 10)] }
    // Another checkpoint point: nothing happens, the write goes on.
    expect(inj.tornWrite({ skeleton: 0, step: 6 }, file)).toBeUndefined()
    expect(() => inj.checkpointPointDone({ skeleton: 0, step: 6 })).not.toThrow()

    await expect(inj.tornWrite({ skeleton: 0, step: 7 }, file)).rejects.toBeInstanceOf(Died)
    const names = await readdir(ckpt)
    expect(names).toEqual([`rank-1.mlf.tmp-${process.pid}-torn`])
    expect([...(await readFile(join(ckpt, names[0])))]).toEqual([1, 2, 3, 4, 5])
    // A checkpoint point that wrote nothing dies at its end instead.
    expect(() => inj.checkpointPointDone({ skeleton: 0, step: 7 })).toThrow(Died)
  })

  it('calculate and route points fire when the rank enters that phase, and points that already fired are left out', () => {
    const { status } = injections({
      inject: [
        { rank: 1, skeleton: 0, step: 3, phase: 'route' },
        { rank: 1, skeleton: 0, step: 5, phase: 'calculate' },
      ],
      injectFired: [{ rank: 1, skeleton: 0, step: 3, phase: 'route' }],
    })
    status.set(0, 3, 'calculate')
    expect(() => status.phase('route')).not.toThrow()
    expect(() => status.set(0, 5, 'calculate')).toThrow(Died)
  })
})
