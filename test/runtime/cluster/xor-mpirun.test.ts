// XOR redundancy under a real cluster launcher: 3 "nodes" of 2 ranks on this
// host (mpirun, each node its own {node} directory, as mpirun.test.ts makes
// them), xor:3: sets {0,2,4} and {1,3,5}. A node's directory lost, both of its
// ranks' files are rebuilt from their sets at --resume, bit-identical.
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import type { JacobiResult } from '../../../examples/jacobi/jacobi.js'
import { launch } from '../../../src/runtime/launch/launcher.js'
import { eventsIn, freePort, haveMpirun, jsonOf, MOLOTOF_RUN, mpirun } from './mpirun-job.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-xor-mpirun-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
const secret = 'a secret of the xor mpirun test'

describe.skipIf(!haveMpirun)('XOR redundancy under mpirun', () => {
  it('3 nodes × 2 ranks, --redundancy xor:3: parity slices instead of partner copies; node 1\'s directory lost, --resume rebuilds ranks 2 and 3 from their sets, bit-identical', async () => {
    const jacobi = ['examples/jacobi/jacobi.ts', '--n', '48', '--iterations', '60']
    const reference = (await launch<JacobiResult>(jacobi[0], { ranks: 6, argv: jacobi.slice(1), onLog: () => {} })).value
    const dir = join(root, 'x-{node}')
    const events = join(root, 'events.jsonl')
    const common = [...jacobi, '--ranks-per-node', '2', '--checkpoint', 'every:20', '--checkpoint-dir', dir, '--redundancy', 'xor:3', '--json', '--hang-timeout', '20000']
    const first = await mpirun(3, [...MOLOTOF_RUN, ...common, '--rendezvous', `127.0.0.1:${await freePort()}`], { secret })
    expect(first.code, first.out).toBe(0)
    for (const node of [0, 1, 2]) {
      const d = join(root, `x-${node}`)
      expect(existsSync(join(d, 'partner'))).toBe(false)
      const newest = readdirSync(join(d, 'xor')).filter((n) => n.startsWith('ckpt-')).sort().pop()!
      const ranks = [2 * node, 2 * node + 1]
      expect(readdirSync(join(d, 'xor', newest)).sort()).toEqual(['COMMIT', ...ranks.map((r) => `rank-${r}.mlf`)])
      // Sets of 3 members: a slice holds half a file (plus its header).
      for (const r of ranks) expect(statSync(join(d, 'xor', newest, `rank-${r}.mlf`)).size).toBeLessThan(statSync(join(d, newest, `rank-${r}.mlf`)).size * 0.5 + 1024)
    }
    rmSync(join(root, 'x-1'), { recursive: true })
    const again = await mpirun(3, [...MOLOTOF_RUN, ...common, '--resume', '--events', events, '--rendezvous', `127.0.0.1:${await freePort()}`], { secret })
    expect(again.code, again.out).toBe(0)
    expect(again.out).toMatch(/rebuilt the lost files of checkpoint \d+ from their XOR sets: rank 2 from ranks 0, 4; rank 3 from ranks 1, 5/)
    const resume = eventsIn(events).find((e) => e.event === 'resume')
    expect(resume?.step).toBe(59)
    const got = jsonOf<JacobiResult>(again.out)
    expect(got.checksum).toBe(reference.checksum)
    expect(got.residual).toBe(reference.residual)
  })
})
