// --incremental end to end (a program changing ~5 % of its state per
// checkpoint interval, processes transport): disk checkpoints flushed from
// the memory level are stored as deltas of a chain; after a rank was killed
// and the memory level lost, --resume from a delta is bit-identical (on the
// same rank count and on another); a damaged delta block and a damaged base
// are found, named, and the previous usable checkpoint is used (also with
// --compress: a compressed block is named by number); pruning kept
// the base the deltas need; inspect shows the chain; --incremental with no
// level that can hold deltas is refused before any rank starts.
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { main } from '../../src/cli/main.js'
import { decodeRankFileHeader, storedLength } from '../../src/checkpoint/format/rank-file.js'
import { memoryDirFor, RAM_ROOT } from '../../src/checkpoint/store/memory-level.js'
import { eventsOf, sandbox } from './jacobi-cli.js'
import { sparseUpdateSerial } from '../fixtures/sparse-update-serial.js'

const { root, ramDirs } = sandbox('molotof-incremental-')
const STEPS = 40
const KIB = 2048

async function run(ranks: number, ...args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = []
  const err: string[] = []
  const argv = ['run', 'test/fixtures/sparse-update.ts', '--ranks', String(ranks), '--transport', 'processes', '--steps', String(STEPS), '--kib', String(KIB), ...args]
  const code = await main(argv, (s) => out.push(s), (s) => err.push(s))
  return { code, out: out.join('\n'), err: err.join('\n') }
}

const checksumOf = (text: string) => Number(/^checksum (\S+)/m.exec(text)?.[1])
const complete = (dir: string) => readdirSync(dir).filter((n) => n.startsWith('ckpt-') && existsSync(join(dir, n, 'COMMIT'))).sort()
const stepOf = (dir: string, c: string) => (JSON.parse(readFileSync(join(dir, c, 'COMMIT'), 'utf8')) as { step: number }).step
const headerOf = (path: string) => decodeRankFileHeader(new Uint8Array(readFileSync(path)), path)

/** A run whose rank 1 is killed at step 33 (or as `--inject` first in `extra` says) for good, its memory level then lost: only the disk chain is left. */
async function killedRun(name: string, ...extra: string[]): Promise<string> {
  const inject = extra[0] === '--inject' ? extra.splice(0, 2)[1] : 'rank=1,step=33'
  const dir = join(root, name)
  ramDirs.push(memoryDirFor(dir))
  const first = await run(2, '--checkpoint-dir', dir, '--checkpoint', 'every:5', '--async-checkpoints', '--incremental', '--inject', inject, '--restarts', '0', '--quiet', ...extra)
  expect(first.code, first.err).toBe(1)
  rmSync(memoryDirFor(dir), { recursive: true, force: true })
  expect(complete(dir).length).toBeGreaterThanOrEqual(2)
  return dir
}

describe.skipIf(!existsSync(RAM_ROOT))('--incremental', () => {
  it('stores deltas of few blocks, keeps their base through pruning, and --resume from a delta after a kill is bit-identical', async () => {
    const dir = await killedRun('same')
    const kept = complete(dir)
    const delta = headerOf(join(dir, kept.at(-1)!, 'rank-0.mlf')).header.delta
    expect(delta, 'the newest disk checkpoint is a delta').toBeDefined()
    for (const r of [0, 1]) {
      const state = headerOf(join(dir, kept.at(-1)!, `rank-${r}.mlf`)).header.entries.find((e) => e.name === 'state')!
      // 5 % of the array changed per interval: at most 3 of a rank's 16 blocks.
      expect(state.blocks!.held.length).toBeLessThanOrEqual(3)
      expect(storedLength(state)).toBeLessThan(state.length / 4)
    }
    // keep 2: more than two complete checkpoints are left, since the deltas kept need their base and the deltas between.
    for (const need of delta!.needs) expect(existsSync(join(dir, `ckpt-${String(need).padStart(8, '0')}`, 'COMMIT')), `checkpoint ${need}`).toBe(true)
    expect(kept.length).toBeGreaterThan(2)
    const step = stepOf(dir, kept.at(-1)!)
    const events = join(root, 'same.jsonl')
    const resumed = await run(2, '--checkpoint-dir', dir, '--checkpoint', 'every:5', '--resume', '--events', events)
    expect(resumed.code, resumed.err).toBe(0)
    expect(eventsOf(events).find((e) => e.event === 'resume')).toMatchObject({ level: 'disk', step })
    expect(checksumOf(resumed.out)).toBe(sparseUpdateSerial(STEPS, KIB))
  }, 120_000)

  it('an elastic --resume on 3 ranks from the delta files of 2 is bit-identical', async () => {
    const dir = await killedRun('elastic')
    const events = join(root, 'elastic.jsonl')
    const resumed = await run(3, '--checkpoint-dir', dir, '--checkpoint', 'every:5', '--resume', '--events', events)
    expect(resumed.code, resumed.err).toBe(0)
    expect(resumed.out).toMatch(/resuming a checkpoint of 2 ranks on 3/)
    expect(checksumOf(resumed.out)).toBe(sparseUpdateSerial(STEPS, KIB))
  }, 120_000)

  it('a damaged block of the newest delta is found and named, and the previous checkpoint is used', async () => {
    const dir = await killedRun('damaged-delta')
    const kept = complete(dir)
    // The rank whose slice the window last moved through holds changed blocks.
    const path = [0, 1].map((r) => join(dir, kept.at(-1)!, `rank-${r}.mlf`)).find((p) => headerOf(p).header.entries.find((e) => e.name === 'state')!.blocks!.held.length > 0)!
    const bytes = new Uint8Array(readFileSync(path))
    const { header, dataStart } = decodeRankFileHeader(bytes, path)
    const state = header.entries.find((e) => e.name === 'state')!
    bytes[dataStart + state.offset + 8] ^= 0x04
    writeFileSync(path, bytes)
    const previous = stepOf(dir, kept.at(-2)!)
    const events = join(root, 'damaged-delta.jsonl')
    const resumed = await run(2, '--checkpoint-dir', dir, '--checkpoint', 'every:5', '--resume', '--events', events)
    expect(resumed.code, resumed.err).toBe(0)
    expect(eventsOf(events).find((e) => e.event === 'resume')).toMatchObject({ level: 'disk', step: previous })
    expect(`${resumed.out}\n${resumed.err}`).toContain(path)
    expect(`${resumed.out}\n${resumed.err}`).toMatch(new RegExp(`checksum mismatch in block ${state.blocks!.held[0]} of delta entry "state"`))
    expect(checksumOf(resumed.out)).toBe(sparseUpdateSerial(STEPS, KIB))
  }, 120_000)

  it('a damaged base is found and named; the newest checkpoint of an intact chain is used', async () => {
    // A full one every 3 (steps 4, 19, 34) and keep 8: the middle chain's deltas at steps 24 and 29 need the base at
    // step 19, and checkpoints older than that base stay usable. The kill at 38 may come before the background flush
    // wrote the newest ones (under load it did): the test takes the newest delta whose base has an older checkpoint
    // and drops the checkpoints after it, as if they had been lost, so that this delta is what --resume meets first.
    const dir = await killedRun('damaged-base', '--inject', 'rank=1,step=38', '--full-every', '3', '--keep', '8')
    const all = complete(dir)
    const oldest = Number(all[0].slice(5))
    const deltaOf = (c: string) => headerOf(join(dir, c, 'rank-0.mlf')).header.delta
    const newestDelta = all.findLastIndex((c) => (deltaOf(c)?.base ?? -1) > oldest)
    expect(newestDelta, `no delta whose base has an older checkpoint among ${all.join(', ')}`).toBeGreaterThan(0)
    for (const c of all.slice(newestDelta + 1)) rmSync(join(dir, c), { recursive: true })
    const kept = all.slice(0, newestDelta + 1)
    const base = deltaOf(kept.at(-1)!)!.base
    const basePath = join(dir, `ckpt-${String(base).padStart(8, '0')}`, 'rank-0.mlf')
    const bytes = new Uint8Array(readFileSync(basePath))
    const { header, dataStart } = decodeRankFileHeader(bytes, basePath)
    const state = header.entries.find((e) => e.name === 'state')!
    bytes[dataStart + state.offset + 100] ^= 0x10
    writeFileSync(basePath, bytes)
    // The newest usable: the newest checkpoint older than the damaged base.
    const usable = stepOf(dir, kept.filter((c) => Number(c.slice(5)) < base).at(-1)!)
    const events = join(root, 'damaged-base.jsonl')
    const resumed = await run(2, '--checkpoint-dir', dir, '--checkpoint', 'every:5', '--resume', '--events', events)
    expect(resumed.code, resumed.err).toBe(0)
    expect(eventsOf(events).find((e) => e.event === 'resume')).toMatchObject({ level: 'disk', step: usable })
    expect(`${resumed.out}\n${resumed.err}`).toContain(basePath)
    expect(`${resumed.out}\n${resumed.err}`).toMatch(new RegExp(`the base checkpoint ${base} it needs is not usable`))
    expect(checksumOf(resumed.out)).toBe(sparseUpdateSerial(STEPS, KIB))
  }, 120_000)

  it('with --compress: the held blocks are compressed, and --resume from a compressed delta after a kill is bit-identical', async () => {
    const dir = await killedRun('compressed', '--compress')
    const kept = complete(dir)
    const newest = headerOf(join(dir, kept.at(-1)!, 'rank-0.mlf')).header
    expect(newest.delta, 'the newest disk checkpoint is a delta').toBeDefined()
    // The base is a compressed full file, the deltas hold compressed blocks (each smaller than its raw 64 KiB).
    const base = headerOf(join(dir, `ckpt-${String(newest.delta!.base).padStart(8, '0')}`, 'rank-0.mlf')).header
    expect(base.entries.find((e) => e.name === 'state')!.stored).toBeDefined()
    const held = [0, 1].map((r) => headerOf(join(dir, kept.at(-1)!, `rank-${r}.mlf`)).header.entries.find((e) => e.name === 'state')!.blocks!)
    const some = held.find((b) => b.held.length > 0)!
    expect(some.stored, 'the held blocks are stored compressed').toBeDefined()
    expect(some.stored!.lengths.every((l) => l < 65536)).toBe(true)
    // inspect says so.
    const said: string[] = []
    expect(await main(['inspect', dir, '--verify'], (s) => said.push(s), () => {})).toBe(0)
    expect(said.join('\n')).toMatch(/state\(float64 \S+ \S+, \d+ blocks? held compressed to \S+ \S+\).* delta \d+ of #\d+/)
    const step = stepOf(dir, kept.at(-1)!)
    const events = join(root, 'compressed.jsonl')
    const resumed = await run(2, '--checkpoint-dir', dir, '--checkpoint', 'every:5', '--resume', '--events', events)
    expect(resumed.code, resumed.err).toBe(0)
    expect(eventsOf(events).find((e) => e.event === 'resume')).toMatchObject({ level: 'disk', step })
    expect(checksumOf(resumed.out)).toBe(sparseUpdateSerial(STEPS, KIB))
  }, 120_000)

  it('with --compress: a damaged compressed block of the newest delta is found and named, and the previous checkpoint is used', async () => {
    const dir = await killedRun('damaged-compressed', '--compress')
    const kept = complete(dir)
    const path = [0, 1].map((r) => join(dir, kept.at(-1)!, `rank-${r}.mlf`)).find((p) => headerOf(p).header.entries.find((e) => e.name === 'state')!.blocks!.held.length > 0)!
    const bytes = new Uint8Array(readFileSync(path))
    const { header, dataStart } = decodeRankFileHeader(bytes, path)
    const state = header.entries.find((e) => e.name === 'state')!
    expect(state.blocks!.stored).toBeDefined()
    bytes[dataStart + state.offset + 8] ^= 0x04
    writeFileSync(path, bytes)
    const previous = stepOf(dir, kept.at(-2)!)
    const events = join(root, 'damaged-compressed.jsonl')
    const resumed = await run(2, '--checkpoint-dir', dir, '--checkpoint', 'every:5', '--resume', '--events', events)
    expect(resumed.code, resumed.err).toBe(0)
    expect(eventsOf(events).find((e) => e.event === 'resume')).toMatchObject({ level: 'disk', step: previous })
    expect(`${resumed.out}\n${resumed.err}`).toContain(path)
    expect(`${resumed.out}\n${resumed.err}`).toMatch(new RegExp(`checksum mismatch in compressed block ${state.blocks!.held[0]} of delta entry "state"`))
    expect(checksumOf(resumed.out)).toBe(sparseUpdateSerial(STEPS, KIB))
  }, 120_000)

  it('inspect shows the chain: delta of N, changed blocks out of all', async () => {
    const dir = await killedRun('inspected')
    const out: string[] = []
    const code = await main(['inspect', dir, '--verify'], (s) => out.push(s), () => {})
    const text = out.join('\n')
    expect(code, text).toBe(0)
    expect(text).toMatch(/#\d+ {2}valid .* delta \d+ of #\d+ \(needs #\d+(, #\d+)*\), \d+\/\d+ blocks changed/)
  }, 120_000)

  it('with no level that can hold deltas: refused before any rank starts, naming the flag', async () => {
    const noFlush = await run(2, '--checkpoint-dir', join(root, 'refused'), '--checkpoint', 'every:5', '--incremental')
    expect(noFlush.code).toBe(2)
    expect(noFlush.err).toMatch(/--incremental .*--async-checkpoints/)
    expect(checksumOf(noFlush.out)).toBeNaN()
    const noDisk = await run(2, '--checkpoint-dir', join(root, 'refused'), '--checkpoint', 'off', '--memory-checkpoint', 'every:5', '--incremental')
    expect(noDisk.code).toBe(2)
    expect(noDisk.err).toMatch(/--incremental .*--checkpoint off/)
  })
})
