// A cluster run under mpirun (nodes on this host, `{node}` directories, a
// spare node): every checkpoint's commit marker records the membership it was
// written under, and `molotof inspect` on the template names it.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { main } from '../../src/cli/main.js'
import { freePort, haveMpirun, MOLOTOF_RUN, mpirun } from '../runtime/cluster/mpirun-job.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-inspect-membership-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

describe.skipIf(!haveMpirun)('molotof inspect: the membership of a cluster run', () => {
  it('3 nodes, the last a spare: each checkpoint names node 0 rank 0, node 1 rank 1, spare node 2; a one-host run names none', async () => {
    const dirs = join(root, 'ckpt-{node}')
    const args = [...MOLOTOF_RUN, 'examples/jacobi/jacobi.ts', '--n', '24', '--iterations', '60', '--spare-nodes', '1', '--checkpoint', 'every:20', '--keep', '5', '--checkpoint-dir', dirs, '--rendezvous', `127.0.0.1:${await freePort()}`, '--log', 'events']
    const { code, out } = await mpirun(3, args, { secret: 'a secret of the inspect-membership test' })
    expect(code, out).toBe(0)
    const lines: string[] = []
    expect(await main(['inspect', dirs], (s) => lines.push(s)), lines.join('\n')).toBe(0)
    // The disk level's listing (each directory's partner/ copies follow, listed on their own).
    const text = lines.join('\n').split(/^(?=checkpoints in )/m)[0]
    expect(text).toMatch(/^checkpoints in .*ckpt-0, .*ckpt-1 \(disk level\)/)
    expect(text.match(/^ {2}#\d+ {2}valid/gm), text).toHaveLength(3)
    expect(text.match(/^ {6}written under membership epoch 0: node 0 rank 0, node 1 rank 1; spare nodes: 2$/gm), text).toHaveLength(3)

    const single = join(root, 'one-host')
    const r = await main(['run', 'examples/jacobi/jacobi.ts', '--ranks', '2', '--n', '24', '--iterations', '20', '--checkpoint', 'every:10', '--checkpoint-dir', single, '--log', 'quiet'], () => {})
    expect(r).toBe(0)
    const oneHost: string[] = []
    await main(['inspect', single], (s) => oneHost.push(s))
    expect(oneHost.join('\n')).toMatch(/#1 {2}valid/)
    expect(oneHost.join('\n')).not.toMatch(/written under membership/)
  }, 90_000)
})
