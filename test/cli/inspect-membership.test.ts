// A cluster run under mpirun (nodes on this host, `{node}` directories, a
// spare node): every checkpoint's commit marker records the membership it was
// written under, and `molotof inspect` on the template names it.
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { main } from '../../src/cli/main.js'

const MPIRUN = '/usr/bin/mpirun'
const haveMpirun = existsSync(MPIRUN)
const root = mkdtempSync(join(tmpdir(), 'molotof-inspect-membership-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

const MPI_ENV = { OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1', OMPI_MCA_rmaps_base_oversubscribe: '1', MOLOTOF_SECRET: 'a secret of the inspect-membership test' }

async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()))
  const port = (s.address() as { port: number }).port
  await new Promise((r) => s.close(r))
  return port
}

describe.skipIf(!haveMpirun)('molotof inspect: the membership of a cluster run', () => {
  it('3 nodes, the last a spare: each checkpoint names node 0 rank 0, node 1 rank 1, spare node 2; a one-host run names none', async () => {
    const dirs = join(root, 'ckpt-{node}')
    const args = ['--bind-to', 'none', '-np', '3', 'node', 'bin/molotof.mjs', 'run', 'examples/jacobi/jacobi.ts', '--n', '24', '--iterations', '60', '--spare-nodes', '1', '--checkpoint', 'every:20', '--keep', '5', '--checkpoint-dir', dirs, '--rendezvous', `127.0.0.1:${await freePort()}`, '--log', 'events']
    const child = spawn(MPIRUN, args, { env: { ...process.env, ...MPI_ENV }, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (b: Buffer) => (out += b.toString()))
    child.stderr.on('data', (b: Buffer) => (out += b.toString()))
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
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
