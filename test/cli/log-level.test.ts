// `molotof run --log events`: what a batch log keeps (failures, restarts,
// recoveries, warnings, the result), without progress, checkpoint or
// informational lines; `--log quiet` prints the result only.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { interiorSum, jacobiSerial } from '../../examples/jacobi/serial.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-log-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

/** A run with one injected failure, recovered from the memory level (checkpointed at every step: costlier than the steps, a warning). */
function run(level: string, dir: string): { status: number | null; output: string } {
  const args = ['bin/molotof.mjs', 'run', 'examples/jacobi/jacobi.ts', '--ranks', '2', '--n', '32', '--iterations', '60']
  args.push('--checkpoint', 'every:10', '--memory-checkpoint', 'every:1', '--checkpoint-dir', join(root, dir), '--memory-dir', join(root, `${dir}-memory`))
  args.push('--inject', 'rank=1,step=30', '--log', level)
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', timeout: 90_000 })
  return { status: r.status, output: `${r.stdout}\n${r.stderr}` }
}

const checksum = `checksum ${interiorSum(jacobiSerial(32, 60), 32)}`

describe('molotof run --log', () => {
  it('events: failures, restarts, recoveries, warnings and the result; no progress, checkpoint or informational lines', () => {
    const { status, output } = run('events', 'events')
    expect(status, output).toBe(0)
    expect(output).toMatch(/^failure: rank 1 \(exit\) at skeleton 0, step 30, phase calculate/m)
    expect(output).toMatch(/^restart 1: starting 2 ranks in recovery mode/m)
    expect(output).toMatch(/^recovered in \d+ ms from memory/m)
    expect(output).toMatch(/^warning: a memory checkpoint costs/m)
    expect(output).toContain(checksum)
    expect(output).toMatch(/^\(2 ranks, threads, wall .* 1 restart\)/m)
    expect(output).not.toMatch(/committed to|^progress:|^replayed |^resuming from checkpoint/m)
  }, 120_000)

  it('quiet: the result only', () => {
    const { status, output } = run('quiet', 'quiet')
    expect(status, output).toBe(0)
    expect(output).toContain(checksum)
    expect(output).not.toMatch(/failure|restart|recovered|warning|committed|progress/)
  }, 120_000)
})
