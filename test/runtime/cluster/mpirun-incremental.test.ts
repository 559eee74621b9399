// --incremental under a real cluster launcher (Open MPI's mpirun, every
// "node" on this host with its own {node} directory, partner copies on by
// default with two nodes): the partner copies keep each delta's chain, and
// after node 1's directory (and its memory level) is lost, `--resume` gets
// its rank's delta and the earlier files of its chain from node 0's copies,
// bit-identical to a run without failures. test/fixtures/sparse-update.ts
// changes ~5 % of its state per checkpoint interval: its disk checkpoints
// are deltas.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { decodeRankFileHeader } from '../../../src/checkpoint/format/rank-file.js'
import { memoryDirFor, RAM_ROOT } from '../../../src/checkpoint/store/memory-level.js'
import { launch } from '../../../src/runtime/launch/launcher.js'
import { eventsIn, freePort, haveMpirun, MOLOTOF_RUN, mpirun } from './mpirun-job.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-mpirun-incremental-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
const secret = 'a secret of the incremental mpirun test'

const program = ['test/fixtures/sparse-update.ts', '--steps', '40', '--kib', '1024']
const checksumOf = (text: string) => Number(/^checksum (\S+)/m.exec(text)?.[1])
const ckpts = (dir: string) => readdirSync(dir).filter((n) => n.startsWith('ckpt-') && existsSync(join(dir, n, 'COMMIT'))).sort()

describe.skipIf(!haveMpirun || !existsSync(RAM_ROOT))('--incremental under mpirun', () => {
  it("node 1's directory lost: --resume gets its delta chain from node 0's partner copies, bit-identical", async () => {
    const dir = join(root, 'inc-{node}')
    const flags = ['--ranks-per-node', '1', '--checkpoint', 'every:5', '--keep', '2', '--async-checkpoints', '--incremental', '--checkpoint-dir', dir, '--hang-timeout', '20000']
    const first = await mpirun(2, [...MOLOTOF_RUN, ...program, ...flags, '--rendezvous', `127.0.0.1:${await freePort()}`], { secret })
    expect(first.code, first.out).toBe(0)
    // Node 0 keeps node 1's copies: the newest a delta, its whole chain there and committed (pruning kept it).
    const partner = join(root, 'inc-0', 'partner')
    const newest = ckpts(partner).at(-1)!
    const path = join(partner, newest, 'rank-1.mlf')
    const { header } = decodeRankFileHeader(new Uint8Array(readFileSync(path)), path)
    expect(header.delta, `${path} is a delta`).toBeDefined()
    for (const need of header.delta!.needs) expect(existsSync(join(partner, `ckpt-${String(need).padStart(8, '0')}`, 'rank-1.mlf')), `checkpoint ${need}`).toBe(true)
    expect(ckpts(partner).length).toBeGreaterThan(2)
    // Node 1 lost: its directory and its memory level.
    rmSync(join(root, 'inc-1'), { recursive: true, force: true })
    const memory = memoryDirFor(dir)
    for (const n of readdirSync(dirname(memory))) if (n.startsWith(basename(memory))) rmSync(join(dirname(memory), n), { recursive: true, force: true })
    const events = join(root, 'events.jsonl')
    const again = await mpirun(2, [...MOLOTOF_RUN, ...program, ...flags, '--resume', '--events', events, '--rendezvous', `127.0.0.1:${await freePort()}`], { secret })
    expect(again.code, again.out).toBe(0)
    const resume = eventsIn(events).find((e) => e.event === 'resume')
    expect(resume).toMatchObject({ seq: Number(newest.slice(5)), level: 'disk+partner' })
    const straight = (await launch<number>(program[0], { ranks: 2, argv: program.slice(1), onLog: () => {} })).value
    expect(checksumOf(again.out)).toBe(straight)
  }, 180_000)
})
