// The CLI on a small Jacobi run in this process (threads transport), shared by
// the resume and memory-level tests: the command, its expected checksum from a
// plain serial loop, the events file, and a sandbox cleaned after the file.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll } from 'vitest'
import { interiorSum, jacobiSerial } from '../../examples/jacobi/serial.js'
import { main } from '../../src/cli/main.js'

export const N = 30
export const ITERATIONS = 40
/** The checksum of an uninterrupted run, from the serial loop. */
export const straight = interiorSum(jacobiSerial(N, ITERATIONS), N)

/** A temporary root and a list of RAM directories to remove, both cleaned after the test file. */
export function sandbox(prefix: string): { root: string; ramDirs: string[] } {
  const root = mkdtempSync(join(tmpdir(), prefix))
  const ramDirs: string[] = []
  afterAll(() => {
    rmSync(root, { recursive: true, force: true })
    for (const d of ramDirs) rmSync(d, { recursive: true, force: true })
  })
  return { root, ramDirs }
}

export async function run(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = []
  const err: string[] = []
  const code = await main(['run', 'examples/jacobi/jacobi.ts', '--ranks', '2', '--n', String(N), '--iterations', String(ITERATIONS), ...args], (s) => out.push(s), (s) => err.push(s))
  return { code, out: out.join('\n'), err: err.join('\n') }
}

export const checksumOf = (text: string) => Number(/checksum (\S+)/.exec(text)?.[1])

export interface RunEvent {
  event: string
  level?: string
  step?: number
  seq?: number
}

export const eventsOf = (file: string): RunEvent[] =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as RunEvent)
