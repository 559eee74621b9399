// `molotof run --redundancy`: bad values refused before any rank starts (exit 2), naming the flag.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

const root = mkdtempSync(join(tmpdir(), 'molotof-redundancy-cli-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
const JACOBI = 'examples/jacobi/jacobi.ts'

/** One node supervisor as a launcher starts it (PMI_RANK/PMI_SIZE): its exit code and output. */
async function runNode(nodes: number, args: string[]): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, ['bin/molotof.mjs', 'run', JACOBI, '--checkpoint-dir', join(root, 'ckpt'), ...args], {
    env: { ...process.env, PMI_RANK: '0', PMI_SIZE: String(nodes) },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout.on('data', (b: Buffer) => (output += b.toString()))
  child.stderr.on('data', (b: Buffer) => (output += b.toString()))
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)))
  return { code, output }
}

describe('--redundancy refuses bad input', () => {
  it('xor:1, xor:G over the node count and an unknown value: exit 2 before the nodes meet, naming the flag', async () => {
    const [one, tooMany, unknown] = await Promise.all([
      runNode(3, ['--redundancy', 'xor:1']),
      runNode(2, ['--redundancy', 'xor:3']),
      runNode(2, ['--redundancy', 'raid6']),
    ])
    expect(one.code).toBe(2)
    expect(one.output).toMatch(/--redundancy xor:1: a set needs at least 2 nodes/)
    expect(tooMany.code).toBe(2)
    expect(tooMany.output).toMatch(/--redundancy xor:3: this run has 2 nodes, fewer than the 3 a set spans/)
    expect(unknown.code).toBe(2)
    expect(unknown.output).toMatch(/--redundancy needs partner or xor:<G>/)
  })
})
