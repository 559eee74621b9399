// The cluster flags are checked on one host too: a batch script's typo is
// found on a test run, not first when the launcher starts it on the cluster.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { main } from '../../src/cli/main.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-cluster-opts-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

describe('molotof run without a launcher: cluster options refused by name', () => {
  it.each([
    [['--rendezvous', '127.0.0.1'], /--rendezvous needs host:port with a port in 1\.\.65535.*got "127\.0\.0\.1"/],
    [['--rendezvous', '127.0.0.1:99999'], /--rendezvous needs host:port with a port in 1\.\.65535.*got "127\.0\.0\.1:99999"/],
    [['--node-timeout', '0s'], /--node-timeout needs a positive duration .*got "0s"/],
    [['--node-timeout', '-5s'], /--node-timeout needs a positive duration .*got "-5s"/],
    [['--node-timeout=-5s'], /--node-timeout needs a positive duration .*got "-5s"/],
    [['--node-timeout', 'abc'], /--node-timeout needs a positive duration .*got "abc"/],
  ])('%j: exit 2 before any rank starts', async (args, message) => {
    const lines: string[] = []
    const env = { ...process.env }
    for (const v of ['OMPI_COMM_WORLD_RANK', 'PMIX_RANK', 'PMI_RANK', 'FLUX_TASK_RANK', 'SLURM_PROCID']) expect(env[v]).toBeUndefined()
    const code = await main(['run', 'examples/jacobi/jacobi.ts', '--n', '20', '--iterations', '2', '--checkpoint-dir', join(root, 'c'), ...args], (s) => lines.push(s), (s) => lines.push(s))
    expect(code).toBe(2)
    expect(lines.join('\n')).toMatch(message)
    expect(lines.join('\n')).not.toMatch(/checksum/)
  })
})
