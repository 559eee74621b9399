// A disk flush that compresses (CheckpointStore.flushRankFile with
// `compress`): heavy payloads stored compressed on the flush's thread, those
// opted out (registered `{ compress: false }`) and light values stored raw,
// every payload read back as it was, the header checksum the one written.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { CheckpointStore } from '../../../src/checkpoint/store/checkpoint-store.js'
import { CheckpointIoThread } from '../../../src/checkpoint/store/io-thread.js'
import { decodeRankFileHeader, encodeRankFile, headerChecksumOf } from '../../../src/checkpoint/format/rank-file.js'
import { encodeLight } from '../../../src/checkpoint/light/codec.js'
import { CheckpointRegistry } from '../../../src/checkpoint/registry.js'
import { runLocal } from '../../../src/index.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-flush-compress-'))
const io = new CheckpointIoThread()
afterAll(async () => {
  await io.close()
  rmSync(root, { recursive: true, force: true })
})

const meta = { fingerprint: 'p', skeleton: 0, step: 5, rank: 0, size: 1, settings: {} }
const smooth = () => new Float64Array(4096).map((_, i) => Math.floor(i / 32))

describe('a disk flush that compresses', () => {
  it('stores heavy payloads compressed, an opted-out one and light values raw, and reads every one back', async () => {
    const memory = new CheckpointStore(join(root, 'mem'), { volatile: true })
    const disk = new CheckpointStore(join(root, 'disk'))
    const grid = smooth()
    const lookup = smooth()
    const parts = encodeRankFile(meta, [
      { name: 'grid', kind: 'heavy', dtype: 'float64', bytes: new Uint8Array(grid.buffer) },
      { name: 'lookup', kind: 'heavy', dtype: 'float64', bytes: new Uint8Array(lookup.buffer) },
      { name: 'it', kind: 'light', bytes: encodeLight({ k: 5 }) },
    ])
    const m = await memory.writeRankFile(3, 0, parts)
    const w = await disk.flushRankFile(3, 0, memory, m.headerChecksum, { io, raw: new Set(['lookup']) })

    const file = new Uint8Array(readFileSync(disk.fileOf(3, 0)))
    expect(w.bytes).toBe(file.byteLength)
    expect(w.bytes).toBeLessThan(m.bytes - grid.byteLength / 2)
    expect(w.headerChecksum).toBe(headerChecksumOf(file))
    const { header } = decodeRankFileHeader(file, 'f')
    const byName = new Map(header.entries.map((e) => [e.name, e]))
    expect(byName.get('grid')!.stored).toMatchObject({ codec: 'brotli', shuffle: 8 })
    expect(byName.get('lookup')!.stored).toBeUndefined()
    expect(byName.get('it')!.stored).toBeUndefined()

    const back = await disk.loadRankFile(3, 0)
    expect(new Float64Array(back.entries.get('grid')!.bytes.slice().buffer)).toEqual(grid)
    expect(new Float64Array(back.entries.get('lookup')!.bytes.slice().buffer)).toEqual(lookup)
    expect(back.header.step).toBe(5)
  })

  it('register(…, { compress: false }) is what the flush keeps raw; register() compresses', () => {
    const reg = new CheckpointRegistry('sk')
    reg.register('seeds', new Uint32Array(4), { compress: false })
    reg.register('grid', new Float64Array(4))
    expect(reg.heavy.get('seeds')!.compress).toBe(false)
    expect(reg.heavy.get('grid')!.compress).toBe(true)
    expect(() => reg.register('x', new Float64Array(1), { compress: 'no' as unknown as boolean })).toThrow(/compress must be true or false/)
  })
})

describe('a payload registered { compress: false } in a compressing run', () => {
  it('is stored raw in every flushed disk checkpoint, beside a compressed one of the same contents', async () => {
    const program = (await import('../../fixtures/compress-opt-out.js')).default
    const dir = join(root, 'opt-out')
    await runLocal(program, { ranks: 2, argv: [], checkpoint: { dir, policy: { every: 2 }, keep: 2, resume: false, async: true, compress: true } })
    const ckpts = readdirSync(dir).filter((n) => n.startsWith('ckpt-'))
    expect(ckpts.length).toBeGreaterThan(0)
    for (const c of ckpts) {
      for (const r of [0, 1]) {
        const { header } = decodeRankFileHeader(new Uint8Array(readFileSync(join(dir, c, `rank-${r}.mlf`))), 'f')
        const entry = (name: string) => header.entries.find((e) => e.name === name)!
        expect(entry('packed').stored, `${c} rank ${r}`).toMatchObject({ codec: 'brotli' })
        expect(entry('kept-raw').stored, `${c} rank ${r}`).toBeUndefined()
        expect(entry('kept-raw').length).toBe(8192 * 8)
      }
    }
  }, 60_000)
})
