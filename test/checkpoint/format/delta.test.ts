// Incremental rank files (format/delta.ts, store/delta-chain.ts): a chain of
// any length, with any blocks changed between its files, assembles to the
// payload written last (checked against that payload itself, kept aside);
// a delta holds exactly the blocks that differ; damage to a delta's block or
// to its base is found and named.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { CheckpointCorruptError } from '../../../src/errors.js'
import { joinBytes } from '../../../src/domains/dtype.js'
import { DELTA_BLOCK_BYTES } from '../../../src/checkpoint/format/delta.js'
import { decodeRankFile, decodeRankFileHeader, DELTA_FORMAT_VERSION, encodeRankFile, storedLength, type EntryRecord, type RankFileMeta } from '../../../src/checkpoint/format/rank-file.js'
import { assembleChain, DeltaChain } from '../../../src/checkpoint/store/delta-chain.js'
import { encodeLight } from '../../../src/checkpoint/light/codec.js'

const B = DELTA_BLOCK_BYTES
const meta = (step: number): RankFileMeta => ({ fingerprint: 'prog-1', skeleton: 0, step, rank: 0, size: 1, settings: {} })

/** Deterministic bytes from a seed (xorshift), so large payloads cost no generator time. */
function fill(bytes: Uint8Array, seed: number): void {
  let x = seed | 1
  for (let i = 0; i < bytes.length; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    bytes[i] = x & 0xff
  }
}

/** The full rank file a memory checkpoint of `payload` would be (one heavy entry, one light). */
function fullFile(step: number, payload: Uint8Array): Uint8Array {
  return joinBytes(encodeRankFile(meta(step), [{ name: 'write', kind: 'heavy', bytes: payload }, { name: 'it', kind: 'light', bytes: encodeLight(step) }]))
}

/** The blocks of `a` and `b` that differ, by comparing every byte. */
function differingBlocks(a: Uint8Array, b: Uint8Array): number[] {
  const out: number[] = []
  for (let i = 0; i * B < b.length; i++) {
    for (let k = i * B; k < Math.min(b.length, (i + 1) * B); k++) {
      if (a[k] !== b[k]) {
        out.push(i)
        break
      }
    }
  }
  return out
}

/** Writes a chain: each step changes some blocks of the payload; returns the files by number and the payloads written. */
function writeChain(length: number, seed: number, steps: readonly { blocks: number[]; seed: number }[], every: number) {
  const chain = new DeltaChain(every)
  const files = new Map<number, Uint8Array>()
  const payloads: Uint8Array[] = []
  const held: (number[] | undefined)[] = []
  let payload = new Uint8Array(length)
  fill(payload, seed)
  const blocks = Math.ceil(length / B)
  for (const [seq, step] of steps.entries()) {
    if (seq > 0) {
      payload = payload.slice()
      // Change one byte in each chosen block (flipped, so it always differs).
      for (const b of step.blocks) if (b < blocks) payload[b * B + ((step.seed >>> 0) % Math.min(B, length - b * B))] ^= 0x5a
    }
    payloads.push(payload)
    const full = fullFile(seq, payload)
    const { header, dataStart } = decodeRankFileHeader(full, `memory ${seq}`)
    const payloadOf = (e: EntryRecord) => full.subarray(dataStart + e.offset, dataStart + e.offset + storedLength(e))
    const { parts } = chain.encode(seq, header, payloadOf, true)
    files.set(seq, parts ? joinBytes(parts) : full)
    held.push(parts ? decodeRankFile(files.get(seq)!, `file ${seq}`).entries.get('write')!.blocks!.held : undefined)
    chain.committed(seq)
  }
  return { files, payloads, held }
}

const load = (files: Map<number, Uint8Array>) => async (seq: number) => {
  const f = files.get(seq)
  if (!f) throw new CheckpointCorruptError(`file ${seq}`, 'the file is missing')
  return decodeRankFile(f, `file ${seq}`)
}

describe('delta chains', () => {
  it('assemble to the payload written last, for any chain, and a delta holds exactly the changed blocks', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 * B + 3 }),
        fc.integer(),
        fc.array(fc.record({ blocks: fc.uniqueArray(fc.nat(6), { maxLength: 4 }), seed: fc.integer() }), { minLength: 1, maxLength: 9 }),
        fc.integer({ min: 1, max: 9 }),
        async (length, seed, steps, every) => {
          const { files, payloads, held } = writeChain(length, seed, steps, every)
          for (const [seq, file] of files) {
            const decoded = decodeRankFile(file, `file ${seq}`)
            const whole = await assembleChain(decoded, `file ${seq}`, load(files))
            expect(Buffer.from(whole.entries.get('write')!.bytes).equals(Buffer.from(payloads[seq]))).toBe(true)
            if (held[seq]) {
              expect(held[seq]).toEqual(differingBlocks(payloads[seq - 1], payloads[seq]))
              expect(decoded.header.formatVersion).toBe(DELTA_FORMAT_VERSION)
              expect(decoded.header.delta!.depth).toBeLessThan(every)
            }
          }
        },
      ),
      { numRuns: 60 },
    )
  })

  it('writes a delta of the changed blocks only, and a full file when more than half changed or every K', () => {
    const steps = [{ blocks: [], seed: 1 }, { blocks: [2], seed: 2 }, { blocks: [0, 1, 2, 3, 4], seed: 3 }, { blocks: [5], seed: 4 }, { blocks: [5], seed: 5 }, { blocks: [5], seed: 6 }]
    const { files, held } = writeChain(8 * B, 7, steps, 3)
    // 0 full, 1 delta (1 block of 8), 2 full (5 of 8 changed), 3 delta, 4 delta, 5 full (every 3).
    expect(held.map((h) => h?.length)).toEqual([undefined, 1, undefined, 1, 1, undefined])
    expect(files.get(1)!.byteLength).toBeLessThan(B + 4096)
    expect(decodeRankFile(files.get(4)!, 'f').header.delta).toEqual({ base: 2, previous: 3, depth: 2, needs: [2, 3] })
  })

  it('names a damaged block of a delta, and a damaged base, when the chain is read', async () => {
    const { files } = writeChain(8 * B, 9, [{ blocks: [], seed: 1 }, { blocks: [3], seed: 2 }, { blocks: [6], seed: 3 }], 8)
    const delta = files.get(2)!.slice()
    delta[delta.byteLength - 100] ^= 1
    expect(() => decodeRankFile(delta, 'file 2')).toThrow(/checksum mismatch in block 6 of delta entry "write"/)
    const base = files.get(0)!.slice()
    base[base.byteLength - 5 * B] ^= 1
    const damaged = new Map(files).set(0, base)
    await expect(assembleChain(decodeRankFile(files.get(2)!, 'file 2'), 'file 2', load(damaged))).rejects.toThrow(/the base checkpoint 0 it needs is not usable \(file 0: checksum mismatch in entry "write"/)
    const missing = new Map(files)
    missing.delete(1)
    await expect(assembleChain(decodeRankFile(files.get(2)!, 'file 2'), 'file 2', load(missing))).rejects.toThrow(/the delta checkpoint 1 it needs is not usable \(file 1: the file is missing\)/)
  })
})
