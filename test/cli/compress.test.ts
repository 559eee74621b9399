// --compress end to end (Jacobi, processes transport): disk checkpoints
// flushed from the memory level are stored compressed; after a rank was
// killed and the memory level lost, --resume from them is bit-identical, on
// the same rank count and on another (elastic); a damaged compressed payload
// is found, named, and the previous checkpoint used.
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { interiorSum, jacobiSerial } from '../../examples/jacobi/serial.js'
import { main } from '../../src/cli/main.js'
import { decodeRankFileHeader } from '../../src/checkpoint/format/rank-file.js'
import { memoryDirFor, RAM_ROOT } from '../../src/checkpoint/store/memory-level.js'
import { eventsOf, sandbox } from './jacobi-cli.js'

const { root, ramDirs } = sandbox('molotof-compress-')
const N = 48
const ITERATIONS = 40
/** The checksum of an uninterrupted run, from the plain serial loop. */
const straight = interiorSum(jacobiSerial(N, ITERATIONS), N)

async function run(ranks: number, ...args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = []
  const err: string[] = []
  const argv = ['run', 'examples/jacobi/jacobi.ts', '--ranks', String(ranks), '--transport', 'processes', '--n', String(N), '--iterations', String(ITERATIONS), ...args]
  const code = await main(argv, (s) => out.push(s), (s) => err.push(s))
  return { code, out: out.join('\n'), err: err.join('\n') }
}

/** The complete checkpoints in `dir`, oldest first (flushes commit in the background: which ones the kill left varies). */
// The result line (a warning may say "checksum mismatch" before it).
const checksumOf = (text: string) => Number(/^checksum (\S+)/m.exec(text)?.[1])
const checkpointFolders = (dir: string) => readdirSync(dir).filter((n) => n.startsWith('ckpt-') && existsSync(join(dir, n, 'COMMIT'))).sort()
const committedSteps = (dir: string) => checkpointFolders(dir).map((c) => (JSON.parse(readFileSync(join(dir, c, 'COMMIT'), 'utf8')) as { step: number }).step)

/**
 * A compressing run whose rank 1 is killed at step 33 for good (no restart),
 * its memory level then lost (as with its node): only the compressed disk
 * checkpoints are left. Returns the checkpoint directory.
 */
async function killedRun(name: string): Promise<string> {
  const dir = join(root, name)
  ramDirs.push(memoryDirFor(dir))
  const first = await run(2, '--checkpoint-dir', dir, '--checkpoint', 'every:5', '--async-checkpoints', '--compress', '--inject', 'rank=1,step=33', '--restarts', '0', '--quiet')
  expect(first.code, first.err).toBe(1)
  rmSync(memoryDirFor(dir), { recursive: true, force: true })
  const ckpts = checkpointFolders(dir)
  expect(ckpts.length).toBeGreaterThanOrEqual(2)
  for (const c of ckpts) {
    for (const r of [0, 1]) {
      const { header } = decodeRankFileHeader(new Uint8Array(readFileSync(join(dir, c, `rank-${r}.mlf`))), 'f')
      expect(header.entries.find((e) => e.name === 'read')!.stored, `${c} rank ${r}`).toMatchObject({ codec: 'brotli', shuffle: 8 })
    }
  }
  return dir
}

describe.skipIf(!existsSync(RAM_ROOT))('--compress', () => {
  it('--resume from compressed disk checkpoints after a killed rank is bit-identical', async () => {
    const dir = await killedRun('same')
    const events = join(root, 'same.jsonl')
    const step = committedSteps(dir).pop()
    const resumed = await run(2, '--checkpoint-dir', dir, '--checkpoint', 'every:5', '--resume', '--events', events)
    expect(resumed.code, resumed.err).toBe(0)
    expect(eventsOf(events).find((e) => e.event === 'resume')).toMatchObject({ level: 'disk', step })
    expect(checksumOf(resumed.out)).toBe(straight)
  }, 120_000)

  it('inspect shows each compressed payload with its raw and stored sizes, and finds the checkpoints valid', async () => {
    const dir = await killedRun('inspected')
    const out: string[] = []
    const code = await main(['inspect', dir], (s) => out.push(s), () => {})
    expect(code).toBe(0)
    const text = out.join('\n')
    expect(text).toMatch(/#\d+ {2}valid .*entries: read\(float64 9 KiB, compressed to [\d.]+ (B|KiB)\)/)
  }, 120_000)

  it('an elastic --resume on 3 ranks from compressed files of 2 is bit-identical', async () => {
    const dir = await killedRun('elastic')
    const events = join(root, 'elastic.jsonl')
    const step = committedSteps(dir).pop()
    const resumed = await run(3, '--checkpoint-dir', dir, '--checkpoint', 'every:5', '--resume', '--events', events)
    expect(resumed.code, resumed.err).toBe(0)
    expect(eventsOf(events).find((e) => e.event === 'resume')).toMatchObject({ level: 'disk', step })
    expect(resumed.out).toMatch(/resuming a checkpoint of 2 ranks on 3/)
    expect(checksumOf(resumed.out)).toBe(straight)
  }, 120_000)

  it('a damaged compressed payload is found and named, and the previous checkpoint is used', async () => {
    const dir = await killedRun('damaged')
    const newest = join(dir, checkpointFolders(dir).pop()!, 'rank-1.mlf')
    const bytes = new Uint8Array(readFileSync(newest))
    const { header, dataStart } = decodeRankFileHeader(bytes, newest)
    const read = header.entries.find((e) => e.name === 'read')!
    bytes[dataStart + read.offset + Math.floor(read.stored!.length / 2)] ^= 0x04
    writeFileSync(newest, bytes)
    const events = join(root, 'damaged.jsonl')
    const previous = committedSteps(dir).at(-2)
    const resumed = await run(2, '--checkpoint-dir', dir, '--checkpoint', 'every:5', '--resume', '--events', events)
    expect(resumed.code, resumed.err).toBe(0)
    expect(eventsOf(events).find((e) => e.event === 'resume')).toMatchObject({ level: 'disk', step: previous })
    expect(`${resumed.out}\n${resumed.err}`).toContain(newest)
    expect(`${resumed.out}\n${resumed.err}`).toMatch(/checksum mismatch in compressed entry "read"/)
    expect(checksumOf(resumed.out), resumed.out).toBe(straight)
  }, 120_000)

  it('without a background flush: refused before any rank starts, naming the flag', async () => {
    const r = await run(2, '--checkpoint-dir', join(root, 'refused'), '--checkpoint', 'every:5', '--compress')
    expect(r.code).toBe(2)
    expect(r.err).toMatch(/--compress .*--async-checkpoints/)
    expect(checksumOf(r.out)).toBeNaN()
  })
})
