import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'
import { afterAll, describe, expect, it } from 'vitest'
import { decodeRankFile, encodeRankFile, PLACEHOLDER_CHECKSUM, type EntryInput, type RankFileMeta } from '../../../src/checkpoint/format/rank-file.js'
import { encodeLight } from '../../../src/checkpoint/light/codec.js'
import { CheckpointIoThread } from '../../../src/checkpoint/store/io-thread.js'
import { domainPayload, StagingBuffers } from '../../../src/checkpoint/store/staging.js'
import { bytesOf, sharedAllocator } from '../../../src/domains/dtype.js'
import { Domain, DomainDesc } from '../../../src/index.js'

class Free extends Domain {
  possessed(): DomainDesc {
    return this.box
  }
  needed(): DomainDesc {
    return this.box
  }
}

const root = mkdtempSync(join(tmpdir(), 'molotof-io-thread-'))
const io = new CheckpointIoThread()
afterAll(() => io.close())

const meta: RankFileMeta = { fingerprint: 'io', skeleton: 0, step: 9, rank: 0, size: 1, settings: {}, createdAt: '2026-11-26T00:00:00.000Z' }

/** A 2-D domain in shared memory with a halo, its cells numbered, and the payload of its interior staged for the thread. */
function stagedDomain(staging: StagingBuffers) {
  const d = new Free(2)
  d.allocator = sharedAllocator
  d.resize(DomainDesc.of([0, 0], [34, 66]))
  for (let i = 0; i < d.data.length; i++) d.data[i] = i * 0.5
  const box = DomainDesc.of([1, 1], [33, 65])
  const bytes = domainPayload(d, box, staging, 'read', true) as Uint8Array
  const interior = new Float64Array(box.volume)
  let k = 0
  for (const c of box.cells(d.order)) interior[k++] = d.get(c)
  return { d, bytes, interior }
}

describe('CheckpointIoThread: a rank file written in one go once the rank releases it, its header last', () => {
  it('copies the domain, sums the payloads, writes the body behind the room for the header, and seals the file over a recycled one', async () => {
    const staging = new StagingBuffers(true)
    const { bytes, interior } = stagedDomain(staging)
    const counter = new Uint8Array(new SharedArrayBuffer(24)).fill(3)
    const entries: EntryInput[] = [
      { name: 'read', kind: 'heavy', dtype: 'float64', bytes },
      { name: 'counter', kind: 'heavy', dtype: 'uint8', bytes: counter },
      { name: 'it', kind: 'light', bytes: encodeLight({ t: 1.5 }) },
    ]
    const early = encodeRankFile(meta, entries.map((e) => (e.kind === 'heavy' ? { ...e, checksum: PLACEHOLDER_CHECKSUM } : e)))
    const dir = join(root, 'ckpt')
    mkdirSync(dir)
    // A recycled file longer than the new one, full of old bytes.
    const spare = join(root, 'spare.mlf')
    writeFileSync(spare, new Uint8Array(early.reduce((n, p) => n + p.byteLength, 0) + 4096).fill(0xee))
    const tmp = join(dir, 'rank-0.mlf.tmp')
    const before = io.gateCounts
    const { copied, done } = io.stage({
      copies: staging.takeDeferred(),
      uncompacted: staging.takeUncompacted(),
      sums: [[counter]],
      body: { tmp, reuse: spare, at: early[0].byteLength, parts: early.slice(1) },
    })
    // The job waits for the rank to leave its checkpoint point: it reaches the gate, has not started there,
    // and leaves it on the release (not after the thread's GATE_MS).
    let started = false
    void copied.then(() => (started = true))
    while (io.gateCounts.arrived < before.arrived + 1) await new Promise((r) => setImmediate(r))
    expect(started).toBe(false)
    io.release()
    await copied
    const staged = await done
    expect(io.gateCounts.released).toBe(before.released + 1)
    expect(existsSync(spare)).toBe(false)
    const late = encodeRankFile(meta, [{ ...entries[0], checksum: staged.copied[0] }, { ...entries[1], checksum: staged.sums[0] }, entries[2]], { headerBytes: early[0].byteLength })
    await io.seal(tmp, join(dir, 'rank-0.mlf'), late[0])
    expect(readdirSync(dir)).toEqual(['rank-0.mlf'])
    const file = readFileSync(join(dir, 'rank-0.mlf'))
    expect(file.byteLength).toBe(staged.bytes)
    // Decoding verifies every checksum; the payload is the domain's interior, cell by cell.
    const decoded = decodeRankFile(file, 'rank-0.mlf')
    expect(Buffer.from(decoded.entries.get('read')!.bytes).equals(Buffer.from(bytesOf(interior)))).toBe(true)
    expect(Array.from(decoded.entries.get('counter')!.bytes)).toEqual(Array.from(counter))
  })

  it('the checksum of a payload in pieces, one of them a view of an empty SharedArrayBuffer, is the CRC32 of its bytes', async () => {
    const shared = (n: number, seed: number) => {
      const b = new Uint8Array(new SharedArrayBuffer(n))
      for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) & 0xff
      return b
    }
    const pieces = [shared(300_000, 1), shared(0, 2), shared(70_001, 3)]
    io.release()
    const { done } = io.stage({ copies: [], uncompacted: [], sums: [pieces] })
    expect((await done).sums).toEqual([crc32(Buffer.concat(pieces)) >>> 0])
  })

  it('a body that cannot be written rejects with the file-system error after the copy, and leaves no file', async () => {
    const staging = new StagingBuffers(true)
    const { bytes, interior } = stagedDomain(staging)
    const early = encodeRankFile(meta, [{ name: 'read', kind: 'heavy', dtype: 'float64', bytes, checksum: PLACEHOLDER_CHECKSUM }])
    const missing = join(root, 'no-such-dir', 'rank-0.mlf.tmp')
    // Released ahead of the job: it starts at once.
    io.release()
    const { copied, done } = io.stage({ copies: staging.takeDeferred(), uncompacted: [], sums: [], body: { tmp: missing, at: early[0].byteLength, parts: early.slice(1) } })
    await expect(done).rejects.toMatchObject({ code: 'ENOENT' })
    // The domain was read first: its owner may go on.
    await expect(copied).resolves.toBeUndefined()
    expect(Buffer.from(bytes).equals(Buffer.from(bytesOf(interior)))).toBe(true)
    await expect(io.seal(missing, join(root, 'never.mlf'), early[0])).rejects.toMatchObject({ code: 'ENOENT' })
    expect(existsSync(join(root, 'never.mlf'))).toBe(false)
  })
})

describe('CheckpointIoThread.warm: the thread started ahead of its first job', () => {
  it('resolves once the thread has loaded, before any job; a job then runs on it, and warm starts a new thread after close', async () => {
    const ahead = new CheckpointIoThread()
    try {
      await ahead.warm()
      const payload = new Uint8Array(new SharedArrayBuffer(8192)).fill(7)
      const [digests] = await ahead.digest([payload], 4096)
      expect(digests.byteLength).toBeGreaterThan(0)
      await ahead.close()
      await ahead.warm()
      const [again] = await ahead.digest([payload], 4096)
      expect(again).toEqual(digests)
    } finally {
      await ahead.close()
    }
  })
})
