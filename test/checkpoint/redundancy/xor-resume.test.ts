import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import type { JacobiResult } from '../../../examples/jacobi/jacobi.js'
import type { CheckpointEvent } from '../../../src/checkpoint/events.js'
import { ConfigError, NothingToResumeError } from '../../../src/errors.js'
import { interiorSum, jacobiSerial } from '../../../examples/jacobi/serial.js'
import { main } from '../../../src/cli/main.js'
import { memoryDirFor } from '../../../src/checkpoint/store/memory-level.js'
import { launch, type LaunchOptions, type ResumeListenerOption } from '../../../src/runtime/launch/launcher.js'
import { sparseUpdateSerial } from '../../fixtures/sparse-update-serial.js'

// "Nodes" on one host as node-dirs.test.ts makes them: each rank a node with a directory of its own ({rank}).
const root = mkdtempSync(join(tmpdir(), 'molotof-xor-'))
afterAll(() => {
  rmSync(root, { recursive: true, force: true })
  for (const name of ['incr', 'incr-base', 'incr-fewer']) for (let r = 0; r < 3; r++) rmSync(memoryDirFor(join(root, `${name}${r}`)), { recursive: true, force: true })
})
const JACOBI = 'examples/jacobi/jacobi.ts'
const argv = ['--n', '40', '--iterations', '40']
const quiet = { onLog: () => {} }

function xorRun(name: string, ranks: number, setSize: number, perNode = 1) {
  return { dir: join(root, `${name}{rank}`), policy: { every: 10 } as const, keep: 2, resume: false, xor: { setSize, ranksPerNode: perNode } }
}

/** Run to the checkpoint of step 19 and stop (checkpoints 0 and 1, steps 9 and 19); rank 0's checkpoint events. */
async function stopAt19(name: string, ranks: number, setSize: number): Promise<CheckpointEvent[]> {
  const checkpoint = { ...xorRun(name, ranks, setSize), interrupt: { skeleton: 0, step: 19 } }
  const events: CheckpointEvent[] = []
  await expect(launch(JACOBI, { ranks, argv, ...quiet, checkpoint, onCheckpoint: (e) => events.push(e) })).rejects.toThrow(/interrupted/)
  return events
}

async function resume(name: string, ranks: number, setSize: number) {
  const logs: string[] = []
  let resumedAt: number | undefined
  const run = await launch<JacobiResult>(JACOBI, {
    ranks,
    argv,
    checkpoint: { ...xorRun(name, ranks, setSize), resume: true, resumeRequest: 'required' },
    onLog: (_r, t) => logs.push(t),
    onResumed: (f) => (resumedAt = f.step),
  } as LaunchOptions & ResumeListenerOption)
  return { run, resumedAt, log: logs.join('\n') }
}

describe('XOR redundancy (--redundancy xor:G)', () => {
  it('each rank keeps its own checkpoint and one parity slice of its set, half a file with xor:3', async () => {
    const events = await stopAt19('slices', 3, 3)
    // The XOR level's events report the slices, what each rank holds for redundancy, not the files.
    const xorEvent = events.find((e) => e.level === 'xor' && e.seq === 1)!
    expect(xorEvent.bytes).toBe(statSync(join(root, 'slices0', 'xor', 'ckpt-00000001', 'rank-0.mlf')).size)
    expect(xorEvent.totalBytes).toBe([0, 1, 2].reduce((n, r) => n + statSync(join(root, `slices${r}`, 'xor', 'ckpt-00000001', `rank-${r}.mlf`)).size, 0))
    for (let r = 0; r < 3; r++) {
      const d = join(root, `slices${r}`)
      // No partner copies: the parity slices instead.
      expect(existsSync(join(d, 'partner'))).toBe(false)
      const own = statSync(join(d, 'ckpt-00000001', `rank-${r}.mlf`)).size
      const slice = statSync(join(d, 'xor', 'ckpt-00000001', `rank-${r}.mlf`)).size
      expect(readdirSync(join(d, 'xor', 'ckpt-00000001')).sort()).toEqual(['COMMIT', `rank-${r}.mlf`])
      // Each of the 3 ranks holds 14 of the 42 rows (a file of ~ 14 × 42 × 8 bytes): the slice about half of that, plus its header.
      expect(slice).toBeLessThan(own * 0.5 + 1024)
      expect(slice).toBeGreaterThan(own * 0.4)
    }
  })

  it('molotof inspect lists each directory\'s parity slices: which checkpoint, which rank, which set', async () => {
    const lines: string[] = []
    await main(['inspect', join(root, 'slices{rank}')], (s) => lines.push(s))
    const text = lines.join('\n')
    for (let r = 0; r < 3; r++) {
      const heading = `checkpoints in ${join(root, `slices${r}`, 'xor')} (XOR parity slices: one per rank, of its set):`
      expect(text).toContain(heading)
      const rows = text.split(heading)[1].split('\n').slice(1, 3)
      expect(rows[0]).toMatch(new RegExp(`^  #0  valid .* parity slice of checkpoint #0: rank ${r}'s of XOR set \\{0, 1, 2\\}`))
      expect(rows[1]).toMatch(new RegExp(`^  #1  valid .* parity slice of checkpoint #1: rank ${r}'s of XOR set \\{0, 1, 2\\}`))
    }
  })

  it('slices of several messages each, a checkpoint at every other step (threads): every exchange ends and is committed', async () => {
    // 4 ranks of 350 rows of 1400 doubles: 3.7 MiB files, chunks of 1.3 MiB, sent as two messages each, the
    // exchange running while the next supersteps' halos and the commit's collectives go on.
    const big = ['--n', '1400', '--iterations', '24']
    const straight = await launch<JacobiResult>(JACOBI, { ranks: 4, argv: big, ...quiet })
    const events: CheckpointEvent[] = []
    const checkpoint = { ...xorRun('big', 4, 4), policy: { every: 2 } as const, keep: 1 }
    const run = await launch<JacobiResult>(JACOBI, { ranks: 4, argv: big, ...quiet, checkpoint, onCheckpoint: (e) => events.push(e) })
    expect(Object.is(run.value.checksum, straight.value.checksum)).toBe(true)
    // Every checkpoint's slices committed (12 checkpoints, steps 1, 3, … 23).
    expect(events.filter((e) => e.level === 'xor').map((e) => e.seq)).toEqual(Array.from({ length: 12 }, (_, k) => k))
    const slice = statSync(join(root, 'big0', 'xor', 'ckpt-00000011', 'rank-0.mlf')).size
    expect(slice).toBeGreaterThan(2 ** 20 + 1)
  }, 60_000)

  it('--resume after losing one node\'s directory (xor:3 on 4 nodes): its files are rebuilt from its set, bit-identical', async () => {
    const straight = await launch<JacobiResult>(JACOBI, { ranks: 4, argv, ...quiet })
    await stopAt19('lost', 4, 3)
    rmSync(join(root, 'lost2'), { recursive: true })
    const { run, resumedAt, log } = await resume('lost', 4, 3)
    expect(resumedAt).toBe(19)
    expect(log).toMatch(/rebuilt the lost files of checkpoint 1 from their XOR sets: rank 2 from ranks 0, 1, 3/)
    expect(Object.is(run.value.checksum, straight.value.checksum)).toBe(true)
    expect(Object.is(run.value.residual, straight.value.residual)).toBe(true)
  })

  it('a node lost and the run going on with fewer ranks (3 → 2): the lost rank\'s file is rebuilt beside a survivor\'s, the checkpoint re-sliced, the serial bits', async () => {
    await stopAt19('fewer', 3, 3)
    rmSync(join(root, 'fewer2'), { recursive: true })
    const logs: string[] = []
    let resumed: { step?: number } = {}
    const run = await launch<JacobiResult>(JACOBI, {
      ranks: 2,
      argv,
      checkpoint: { ...xorRun('fewer', 2, 2), resume: true, resumeRequest: 'required' },
      onLog: (_r, t) => logs.push(t),
      onResumed: (f) => (resumed = f),
    } as LaunchOptions & ResumeListenerOption)
    const log = logs.join('\n')
    expect(log).toMatch(/rebuilt the lost files of checkpoint 1 \(a checkpoint of 3 ranks, resumed on 2\) from their XOR sets: rank 2 from ranks 0, 1 \(beside rank 0's files\)/)
    expect(existsSync(join(root, 'fewer0', 'ckpt-00000001', 'rank-2.mlf'))).toBe(true)
    expect(resumed.step).toBe(19)
    expect(Object.is(run.value.checksum, interiorSum(jacobiSerial(40, 40), 40))).toBe(true)
  })

  it('one rank file lost alone under its COMMIT is rebuilt in place: the newest checkpoint is resumed', async () => {
    const straight = await launch<JacobiResult>(JACOBI, { ranks: 3, argv, ...quiet })
    await stopAt19('alone', 3, 3)
    rmSync(join(root, 'alone1', 'ckpt-00000001', 'rank-1.mlf'))
    const { run, resumedAt, log } = await resume('alone', 3, 3)
    expect(log).toMatch(/rebuilt the lost files of checkpoint 1 from their XOR sets: rank 1 from ranks 0, 2/)
    expect(resumedAt).toBe(19)
    expect(Object.is(run.value.checksum, straight.value.checksum)).toBe(true)
  })

  it('a damaged parity slice is detected and named, and the previous checkpoint is rebuilt instead', async () => {
    const straight = await launch<JacobiResult>(JACOBI, { ranks: 3, argv, ...quiet })
    await stopAt19('damaged', 3, 3)
    rmSync(join(root, 'damaged0'), { recursive: true })
    const slice = join(root, 'damaged2', 'xor', 'ckpt-00000001', 'rank-2.mlf')
    const bytes = readFileSync(slice)
    bytes[bytes.length - 10] ^= 0x40
    writeFileSync(slice, bytes)
    const { run, resumedAt, log } = await resume('damaged', 3, 3)
    expect(log).toContain(`XOR redundancy: checkpoint 1 passed over: rank 0's file of checkpoint 1 cannot be rebuilt: parity slice ${slice}: checksum mismatch in entry "parity"`)
    expect(log).toMatch(/rebuilt the lost files of checkpoint 0 from their XOR sets: rank 0 from ranks 1, 2/)
    expect(resumedAt).toBe(9)
    expect(Object.is(run.value.checksum, straight.value.checksum)).toBe(true)
  })

  it('a survivor\'s file damaged in a payload: the rebuilt file fails its checksums and is not written; the previous checkpoint is rebuilt', async () => {
    const straight = await launch<JacobiResult>(JACOBI, { ranks: 3, argv, ...quiet })
    await stopAt19('torn', 3, 3)
    rmSync(join(root, 'torn0'), { recursive: true })
    // Rank 1's own file: its header is intact (the cheap checks pass), a payload byte in its first half is not: with
    // 3 members, that half is in rank 2's slice, which rebuilds the second half of rank 0's file.
    const own = join(root, 'torn1', 'ckpt-00000001', 'rank-1.mlf')
    const bytes = readFileSync(own)
    bytes[1000] ^= 0x08
    writeFileSync(own, bytes)
    const { run, resumedAt, log } = await resume('torn', 3, 3)
    expect(log).toMatch(/XOR redundancy: checkpoint 1 passed over: rank 0's file of checkpoint 1 could not be rebuilt from XOR set \{0, 1, 2\}: checksum mismatch in entry "read"/)
    expect(existsSync(join(root, 'torn0', 'ckpt-00000001', 'rank-0.mlf'))).toBe(false)
    expect(log).toMatch(/rebuilt the lost files of checkpoint 0 from their XOR sets: rank 0 from ranks 1, 2/)
    expect(resumedAt).toBe(9)
    expect(Object.is(run.value.checksum, straight.value.checksum)).toBe(true)
  })

  it('a survivor\'s file damaged where the rebuild does not read it: the newest is rebuilt, the negotiation passes over it for the damage, the previous one is rebuilt too', async () => {
    const straight = await launch<JacobiResult>(JACOBI, { ranks: 3, argv, ...quiet })
    await stopAt19('torn-late', 3, 3)
    rmSync(join(root, 'torn-late0'), { recursive: true })
    const own = join(root, 'torn-late1', 'ckpt-00000001', 'rank-1.mlf')
    const bytes = readFileSync(own)
    bytes[bytes.length - 100] ^= 0x08
    writeFileSync(own, bytes)
    const { run, resumedAt, log } = await resume('torn-late', 3, 3)
    expect(log).toMatch(/rebuilt the lost files of checkpoint 1 from their XOR sets: rank 0 from ranks 1, 2/)
    expect(log).toMatch(/rebuilt the lost files of checkpoint 0 from their XOR sets: rank 0 from ranks 1, 2/)
    expect(log).toContain(`checkpoint 1 skipped: ${own}: checksum mismatch`)
    expect(resumedAt).toBe(9)
    expect(Object.is(run.value.checksum, straight.value.checksum)).toBe(true)
  })

  it('two lost members of one set: --resume is refused, naming the set and the two ranks', async () => {
    await stopAt19('two', 3, 3)
    rmSync(join(root, 'two0'), { recursive: true })
    rmSync(join(root, 'two1'), { recursive: true })
    const resumed = resume('two', 3, 3)
    await expect(resumed).rejects.toThrow(NothingToResumeError)
    await expect(resumed).rejects.toThrow(/two members of XOR set \{0, 1, 2\} lost their files of checkpoint 1 \(ranks 0, 1\)/)
  })

  it('two lost members of one set with a shared level: the resume falls to the shared level, saying why XOR could not rebuild, bit-identical', async () => {
    const straight = await launch<JacobiResult>(JACOBI, { ranks: 3, argv, ...quiet })
    const shared = { dir: join(root, 'shared'), every: 1 }
    await expect(launch(JACOBI, { ranks: 3, argv, ...quiet, checkpoint: { ...xorRun('down', 3, 3), shared, interrupt: { skeleton: 0, step: 19 } } })).rejects.toThrow(/interrupted/)
    rmSync(join(root, 'down0'), { recursive: true })
    rmSync(join(root, 'down2'), { recursive: true })
    const logs: string[] = []
    let resumed: { step?: number; level?: string } = {}
    const run = await launch<JacobiResult>(JACOBI, {
      ranks: 3,
      argv,
      checkpoint: { ...xorRun('down', 3, 3), shared, resume: true, resumeRequest: 'required' },
      onLog: (_r, t) => logs.push(t),
      onResumed: (f) => (resumed = f),
    } as LaunchOptions & ResumeListenerOption)
    expect(logs.join('\n')).toMatch(/warning: XOR redundancy: checkpoint 1 passed over: two members of XOR set \{0, 1, 2\} lost their files of checkpoint 1 \(ranks 0, 2\)/)
    expect(resumed.step).toBe(19)
    expect(resumed.level).toMatch(/shared/)
    expect(Object.is(run.value.checksum, straight.value.checksum)).toBe(true)
  })

  it('with a memory level: its checkpoints get parity slices in RAM too, and a node lost with its RAM resumes from the newest memory checkpoint, rebuilt, bit-identical', async () => {
    const straight = await launch<JacobiResult>(JACOBI, { ranks: 3, argv, ...quiet })
    const checkpoint = { ...xorRun('mem', 3, 3), memory: { dir: join(root, 'ram{rank}'), policy: { every: 5 } as const } }
    await expect(launch(JACOBI, { ranks: 3, argv, ...quiet, checkpoint: { ...checkpoint, interrupt: { skeleton: 0, step: 24 } } })).rejects.toThrow(/interrupted/)
    // The newest memory checkpoint (step 24) has its slices beside it, in the memory level's directory.
    const newest = readdirSync(join(root, 'ram0')).filter((n) => n.startsWith('ckpt-')).sort().pop()!
    expect(readdirSync(join(root, 'ram0', 'xor', newest)).sort()).toEqual(['COMMIT', 'rank-0.mlf'])
    rmSync(join(root, 'mem1'), { recursive: true })
    rmSync(join(root, 'ram1'), { recursive: true })
    const logs: string[] = []
    let resumed: { step?: number; level?: string } = {}
    const run = await launch<JacobiResult>(JACOBI, {
      ranks: 3,
      argv,
      checkpoint: { ...checkpoint, resume: true, resumeRequest: 'required' },
      onLog: (_r, t) => logs.push(t),
      onResumed: (f) => (resumed = f),
    } as LaunchOptions & ResumeListenerOption)
    expect(logs.join('\n')).toMatch(/rebuilt the lost files of checkpoint \d+ from their XOR sets: rank 1 from ranks 0, 2/)
    expect(resumed).toMatchObject({ step: 24, level: 'memory' })
    expect(Object.is(run.value.checksum, straight.value.checksum)).toBe(true)
    // The program done, each memory level's directory is cleaned, its slices with it: nothing is left in RAM.
    for (let r = 0; r < 3; r++) expect(existsSync(join(root, `ram${r}`))).toBe(false)
  })

  it('xor:1 and xor:G larger than the node count are refused before any rank starts, naming the flag', async () => {
    let started = false
    const onGroup = () => (started = true)
    await expect(launch(JACOBI, { ranks: 3, argv, ...quiet, onGroup, checkpoint: xorRun('bad', 3, 1) })).rejects.toThrow(ConfigError)
    await expect(launch(JACOBI, { ranks: 3, argv, ...quiet, onGroup, checkpoint: xorRun('bad', 3, 1) })).rejects.toThrow(/--redundancy xor:1/)
    await expect(launch(JACOBI, { ranks: 4, argv, ...quiet, onGroup, checkpoint: { ...xorRun('bad', 4, 3), xor: { setSize: 3, ranksPerNode: 2 } } })).rejects.toThrow(
      /--redundancy xor:3: this run has 2 nodes, fewer than the 3/,
    )
    expect(started).toBe(false)
  })

  it('incremental checkpoints with XOR parity (keep 1): a lost node\'s deltas and their base are all rebuilt from its set, the result the serial loop\'s', async () => {
    const { checkpoint, events } = await incrementalStop('incr')
    // Checkpoint 3 (step 19) is a delta whose chain starts at 0: keep 1 still holds every slice of 0..3 (pruning reads each rank's chain from the marker).
    expect(events.some((e) => e.level === 'disk' && e.seq === 3)).toBe(true)
    for (let r = 0; r < 3; r++) expect(readdirSync(join(root, `incr${r}`, 'xor')).filter((n) => n.startsWith('ckpt-')).sort()).toEqual(['ckpt-00000000', 'ckpt-00000001', 'ckpt-00000002', 'ckpt-00000003'])
    // The node lost with its RAM: its memory level too.
    rmSync(join(root, 'incr1'), { recursive: true })
    rmSync(memoryDirFor(join(root, 'incr1')), { recursive: true, force: true })
    const { run, resumed, log } = await incrementalResume(checkpoint)
    expect(log).toMatch(/rebuilt the lost files of checkpoint 3 from their XOR sets: rank 1 from ranks 0, 2 \(a delta on checkpoints 0, 1, 2\)/)
    // The base, a full file: rebuilt as a checkpoint of its own.
    expect(log).toMatch(/rebuilt the lost files of checkpoint 0 from their XOR sets: rank 1 from ranks 0, 2 \(\d+ ms/)
    expect(resumed).toMatchObject({ step: 19 })
    expect(run.value).toBe(sparseUpdateSerial(INCR_STEPS, INCR_KIB))
  }, 60_000)

  it('incremental checkpoints with XOR parity, a node lost and the run going on with fewer ranks (3 → 2): the lost rank\'s deltas and base rebuilt beside a survivor\'s, the serial loop\'s result', async () => {
    const { checkpoint } = await incrementalStop('incr-fewer')
    rmSync(join(root, 'incr-fewer2'), { recursive: true })
    rmSync(memoryDirFor(join(root, 'incr-fewer2')), { recursive: true, force: true })
    const { run, resumed, log } = await incrementalResume({ ...checkpoint, xor: { setSize: 2, ranksPerNode: 1 } }, 2)
    expect(log).toMatch(/rebuilt the lost files of checkpoint 3 \(a checkpoint of 3 ranks, resumed on 2\) from their XOR sets: rank 2 from ranks 0, 1 \(beside rank 0's files, a delta on checkpoints 0, 1, 2\)/)
    expect(log).toMatch(/rebuilt the lost files of checkpoint 0 \(a checkpoint of 3 ranks, resumed on 2\) from their XOR sets: rank 2 from ranks 0, 1 \(beside rank 0's files\)/)
    expect(resumed.step).toBe(19)
    expect(run.value).toBe(sparseUpdateSerial(INCR_STEPS, INCR_KIB))
  }, 60_000)

  it('a damaged parity slice of a delta\'s base: detected and named, the base passed over, the resume falls to the shared level, the serial loop\'s result', async () => {
    const shared = { dir: join(root, 'incr-shared'), every: 1 }
    const { checkpoint } = await incrementalStop('incr-base', shared)
    rmSync(join(root, 'incr-base0'), { recursive: true })
    rmSync(memoryDirFor(join(root, 'incr-base0')), { recursive: true, force: true })
    const slice = join(root, 'incr-base2', 'xor', 'ckpt-00000000', 'rank-2.mlf')
    const bytes = readFileSync(slice)
    bytes[bytes.length - 10] ^= 0x40
    writeFileSync(slice, bytes)
    const { run, resumed, log } = await incrementalResume(checkpoint)
    expect(log).toMatch(/rebuilt the lost files of checkpoint 3 from their XOR sets: rank 0 from ranks 1, 2 \(a delta on checkpoints 0, 1, 2\)/)
    expect(log).toContain(`XOR redundancy: checkpoint 0 passed over: rank 0's file of checkpoint 0 cannot be rebuilt: parity slice ${slice}: checksum mismatch in entry "parity"`)
    expect(resumed.step).toBe(19)
    // The survivors from their memory level, the lost rank from the shared copy of the chain.
    expect(resumed.level).toMatch(/shared/)
    expect(run.value).toBe(sparseUpdateSerial(INCR_STEPS, INCR_KIB))
  }, 60_000)
})

const SPARSE = 'test/fixtures/sparse-update.ts'
const INCR_STEPS = 30
const INCR_KIB = 1536

/** 3 nodes of one rank, xor:3, the memory level flushing deltas (every 5 steps, a full file every 4, keep 1), stopped at the checkpoint of step 19. */
async function incrementalStop(name: string, shared?: { dir: string; every: number }) {
  const checkpoint = { ...xorRun(name, 3, 3), policy: { every: 5 } as const, keep: 1, async: true, incremental: { every: 4 }, ...(shared ? { shared } : {}) }
  const events: CheckpointEvent[] = []
  const argv = ['--steps', String(INCR_STEPS), '--kib', String(INCR_KIB)]
  await expect(launch(SPARSE, { ranks: 3, argv, ...quiet, checkpoint: { ...checkpoint, interrupt: { skeleton: 0, step: 19 } }, onCheckpoint: (e) => events.push(e) })).rejects.toThrow(/interrupted/)
  return { checkpoint, events }
}

async function incrementalResume(checkpoint: LaunchOptions['checkpoint'], ranks = 3) {
  const logs: string[] = []
  let resumed: { step?: number; level?: string } = {}
  const run = await launch<number>(SPARSE, {
    ranks,
    argv: ['--steps', String(INCR_STEPS), '--kib', String(INCR_KIB)],
    checkpoint: { ...checkpoint!, resume: true, resumeRequest: 'required' },
    onLog: (_r, t) => logs.push(t),
    onResumed: (f) => (resumed = f),
  } as LaunchOptions & ResumeListenerOption)
  return { run, resumed, log: logs.join('\n') }
}
