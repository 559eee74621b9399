import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { interiorSum, jacobiSerial } from '../../examples/jacobi/serial.js'
import type { SupervisorEvent } from '../../src/index.js'

// README's example commands, run as written (from a scratch directory, with the
// repository's paths made absolute), give the events README describes.
const repo = resolve(import.meta.dirname, '../..')
const readme = readFileSync(join(repo, 'README.md'), 'utf8')
const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

function block(name: string): string {
  const m = new RegExp(`<!-- readme-test: ${name} -->\\n\`\`\`\\w*\\n([\\s\\S]*?)\`\`\``).exec(readme)
  if (!m) throw new Error(`README has no block marked readme-test: ${name}`)
  return m[1]
}

/** The block's commands with `npx molotof` as this repository's CLI, and `--events` on every run. */
function inScratch(commands: string): { script: string; cwd: string } {
  const cwd = mkdtempSync(join(tmpdir(), 'molotof-readme-'))
  dirs.push(cwd)
  const script = commands
    .replaceAll('npx molotof run ', `node ${repo}/bin/molotof.mjs run --events events.jsonl `)
    .replaceAll('npx molotof ', `node ${repo}/bin/molotof.mjs `)
    .replaceAll(' examples/', ` ${repo}/examples/`)
  return { script, cwd }
}

describe("README's example commands", () => {
  it('--inject "rank=1,step=120;rank=2,step=249,phase=checkpoint": the failures, recovery lines and checkpoints README lists', () => {
    const { script, cwd } = inScratch(block('inject'))
    const out = execFileSync('bash', ['-e', '-c', script], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
    const events = readFileSync(join(cwd, 'events.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as SupervisorEvent)
    const pick = <K extends SupervisorEvent['event']>(k: K) => events.filter((e): e is Extract<SupervisorEvent, { event: K }> => e.event === k)
    expect(pick('failure').map((e) => [e.rank, e.step, e.phase])).toEqual([
      [1, 120, 'calculate'],
      [2, 249, 'checkpoint'],
    ])
    expect(pick('recovery-line').map((e) => e.step)).toEqual([99, 199])
    // Step 249's checkpoint is written again after the second restart; the torn one never committed.
    expect(pick('checkpoint').map((e) => e.step)).toEqual([49, 99, 149, 199, 249, 299])
    expect(out).toContain(`checksum ${interiorSum(jacobiSerial(512, 300), 512)}`)
    // inspect: the two checkpoints kept, complete and valid (and the command exits 0).
    expect(out).toMatch(/#\d+ +valid +skeleton 0 step 249 .*\n.*#\d+ +valid +skeleton 0 step 299 /)
  }, 180_000)

  it('an injection with phase=checkpoint where no checkpoint is written is refused, naming the nearest checkpoint steps', () => {
    const { script, cwd } = inScratch(
      'npx molotof run examples/jacobi/jacobi.ts --ranks 3 --n 64 --iterations 300 --checkpoint every:50 --inject "rank=2,step=220,phase=checkpoint"',
    )
    const r = spawnSync('bash', ['-c', script], { cwd, encoding: 'utf8' })
    expect(r.status).toBe(2)
    expect(r.stderr).toMatch(/no checkpoint is written at step 220.*199.*249/s)
    // Refused before any computation: no failure location (a skeleton's start would read as one).
    expect(r.stderr).not.toMatch(/\(rank 2, skeleton|phase checkpoint\)/)
  }, 120_000)
})
