// A TypeScript program outside an ESM package (its package.json has no
// "type": "module") is loaded by tsx as CommonJS: its default export arrives
// one level deeper, and its local imports are require()d, not imported, with
// ESM-style specifiers (`./helper.js` for helper.ts) resolved as in ESM.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { CheckpointStore } from '../../../src/checkpoint/store/checkpoint-store.js'
import { launch } from '../../../src/runtime/launch/launcher.js'

const dir = mkdtempSync(join(tmpdir(), 'molotof-cjs-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('a program loaded as CommonJS', () => {
  it.each(['threads', 'processes'] as const)('runs on the %s transport, and its checkpoints name its local modules', async (transport) => {
    const ckpt = join(dir, transport)
    const r = await launch<number>('test/fixtures/cjs/program.ts', {
      ranks: 2,
      transport,
      argv: ['--base', '3'],
      checkpoint: { dir: ckpt, policy: { every: 1 }, keep: 1, resume: false },
      onLog: () => {},
    })
    // Σ over ranks of (rank + base) × WEIGHT (FACTOR of factor.ts, through helper.ts): (0 + 3) × 2 + (1 + 3) × 2.
    expect(r.value).toBe(14)
    const [c] = await new CheckpointStore(ckpt).list()
    expect(Object.keys(c.marker!.code!.files)).toEqual(['factor.ts', 'helper.ts', 'program.ts'])
  }, 60_000)
})
