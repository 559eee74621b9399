// An injection past the last step would never fire: the run would finish
// "without failures" although one was asked for. Refused by the ranks once
// they know the step count from the program's kernel (a CountedKernel).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { main } from '../../src/cli/main.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-inject-end-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

async function run(...args: string[]): Promise<{ code: number; text: string }> {
  const lines: string[] = []
  const code = await main(['run', 'examples/jacobi/jacobi.ts', '--n', '32', '--iterations', '30', '--checkpoint', 'every:10', ...args], (s) => lines.push(s), (s) => lines.push(s))
  return { code, text: lines.join('\n') }
}

describe('--inject past the last step', () => {
  it.each(['threads', 'processes'])('is refused, exit 2, naming the last step (%s)', async (transport) => {
    const r = await run('--transport', transport, '--checkpoint-dir', join(root, transport), '--inject', 'rank=1,step=30')
    expect(r.code).toBe(2)
    expect(r.text).toMatch(/--inject rank=1,step=30: the last step of \S+ is 29 \(steps count from 0\)/)
    expect(r.text).not.toMatch(/checksum/)
  }, 60_000)

  it('at the last step it fires and the run recovers', async () => {
    const r = await run('--checkpoint-dir', join(root, 'last'), '--inject', 'rank=1,step=29')
    expect(r.code).toBe(0)
    expect(r.text).toMatch(/checksum/)
    expect(r.text).toMatch(/1 restart/)
  }, 60_000)
})
