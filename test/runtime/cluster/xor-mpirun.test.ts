// XOR redundancy under a real cluster launcher: 3 "nodes" of 2 ranks on this
// host (mpirun, each node its own {node} directory, as mpirun.test.ts makes
// them), xor:3: sets {0,2,4} and {1,3,5}. A node's directory lost, both of its
// ranks' files are rebuilt from their sets at --resume, bit-identical.
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import type { JacobiResult } from '../../../examples/jacobi/jacobi.js'
import { launch } from '../../../src/runtime/launch/launcher.js'

const MPIRUN = '/usr/bin/mpirun'
const haveMpirun = existsSync(MPIRUN)
const root = mkdtempSync(join(tmpdir(), 'molotof-xor-mpirun-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
// MOLOTOF_SECRET as a batch script exports it: mpirun passes the environment to the nodes on this host.
const MPI_ENV = { OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1', OMPI_MCA_rmaps_base_oversubscribe: '1', MOLOTOF_SECRET: 'a secret of the xor mpirun test' }

async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()))
  const port = (s.address() as { port: number }).port
  await new Promise((r) => s.close(r))
  return port
}

function mpirun(nodes: number, command: string[]): Promise<{ code: number | null; out: string }> {
  const child = spawn(MPIRUN, ['--bind-to', 'none', '-np', String(nodes), ...command], { env: { ...process.env, ...MPI_ENV }, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (b: Buffer) => (out += b.toString()))
  child.stderr.on('data', (b: Buffer) => (out += b.toString()))
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out })))
}

const jsonOf = <T>(out: string): T => JSON.parse(out.slice(out.indexOf('{\n'), out.lastIndexOf('\n}') + 2)) as T

describe.skipIf(!haveMpirun)('XOR redundancy under mpirun', () => {
  it('3 nodes × 2 ranks, --redundancy xor:3: parity slices instead of partner copies; node 1\'s directory lost, --resume rebuilds ranks 2 and 3 from their sets, bit-identical', async () => {
    const jacobi = ['examples/jacobi/jacobi.ts', '--n', '48', '--iterations', '60']
    const reference = (await launch<JacobiResult>(jacobi[0], { ranks: 6, argv: jacobi.slice(1), onLog: () => {} })).value
    const dir = join(root, 'x-{node}')
    const events = join(root, 'events.jsonl')
    const common = [...jacobi, '--ranks-per-node', '2', '--checkpoint', 'every:20', '--checkpoint-dir', dir, '--redundancy', 'xor:3', '--json', '--hang-timeout', '20000']
    const first = await mpirun(3, ['node', 'bin/molotof.mjs', 'run', ...common, '--rendezvous', `127.0.0.1:${await freePort()}`])
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
    const again = await mpirun(3, ['node', 'bin/molotof.mjs', 'run', ...common, '--resume', '--events', events, '--rendezvous', `127.0.0.1:${await freePort()}`])
    expect(again.code, again.out).toBe(0)
    expect(again.out).toMatch(/rebuilt the lost files of checkpoint \d+ from their XOR sets: rank 2 from ranks 0, 4; rank 3 from ranks 1, 5/)
    const resume = readFileSync(events, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { event: string; step?: number }).find((e) => e.event === 'resume')
    expect(resume?.step).toBe(59)
    const got = jsonOf<JacobiResult>(again.out)
    expect(got.checksum).toBe(reference.checksum)
    expect(got.residual).toBe(reference.residual)
  })
})
