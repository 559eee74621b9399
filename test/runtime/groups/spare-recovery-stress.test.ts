// Two failures recovered from the memory level with a warm spare, on a loaded
// node: each run sees exactly the two injected failures. A send of a kept
// survivor's stopped run to the killed rank used to fail a grace period later,
// unhandled, in the middle of the survivor's next run ("CommunicationError …
// connection to rank 2 closed unexpectedly … write EPIPE"), costing a restart
// (issue 29). Rows of 3000 cells make the halo sends large enough to be
// awaited (> 16 KiB); a busy loop beside the run makes a survivor lag behind.
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SupervisorEvent } from '../../../src/index.js'

const repo = resolve(import.meta.dirname, '../../..')
const RUNS = 3

let busy: ChildProcess | undefined
const dirs: string[] = []
beforeAll(() => {
  busy = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' })
})
afterAll(() => {
  busy?.kill('SIGKILL')
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

function run(dir: string): Promise<{ code: number | null; stderr: string }> {
  const args = [
    'bin/molotof.mjs', 'run', 'examples/jacobi/jacobi.ts', '--n', '3000', '--iterations', '5',
    '--ranks', '4', '--transport', 'processes', '--checkpoint', 'every:1', '--memory-checkpoint', 'every:1', '--spares', '1',
    '--inject', 'rank=2,step=2;rank=3,step=3', '--restarts', '2', '--quiet',
    '--checkpoint-dir', join(dir, 'ckpt'), '--memory-dir', join(dir, 'memory'), '--events', join(dir, 'events.jsonl'),
  ]
  const child = spawn(process.execPath, args, { cwd: repo, stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()))
  return new Promise((res) => child.on('close', (code) => res({ code, stderr })))
}

describe('warm-spare recoveries under load (processes, memory level)', () => {
  it(`${RUNS} runs with two injected failures each: exactly those two failures, no CommunicationError`, async () => {
    for (let i = 0; i < RUNS; i++) {
      const dir = mkdtempSync(join(tmpdir(), 'molotof-spare-stress-'))
      dirs.push(dir)
      const { code, stderr } = await run(dir)
      const events = readFileSync(join(dir, 'events.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as SupervisorEvent)
      const failures = events.filter((e): e is Extract<SupervisorEvent, { event: 'failure' }> => e.event === 'failure')
      expect(failures.map((f) => `${f.rank}@${f.step} ${f.message}`), `run ${i}`).toEqual([
        expect.stringMatching(/^2@2 .*killed by SIGKILL/),
        expect.stringMatching(/^3@3 .*killed by SIGKILL/),
      ])
      expect(stderr).not.toMatch(/CommunicationError/)
      expect(code, stderr).toBe(0)
    }
  }, 180_000)
})
