// Problems of the environment and impossible inputs are found before compute
// and described truly: each bad input with its message, exit 2, no stack trace.
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { main } from '../../src/cli/main.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-env-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

async function run(...args: string[]): Promise<{ code: number; text: string; ms: number }> {
  const lines: string[] = []
  const t0 = performance.now()
  const code = await main(['run', ...args], (s) => lines.push(s), (s) => lines.push(s))
  return { code, text: lines.join('\n'), ms: performance.now() - t0 }
}
const JACOBI = 'examples/jacobi/jacobi.ts'
/** A stack trace line: "    at f (file:1:2)". */
const STACK = /^\s+at /m

describe('molotof run: bad input found before compute, each with its message', () => {
  it.each([
    [['--checkpoint-dir', ''], /--checkpoint-dir needs a directory path \(got an empty value\)/],
    [['--heartbeat', '200', '--hang-timeout', '100'], /--hang-timeout 100 ms is shorter than two heartbeat periods \(--heartbeat 200 ms\).*at least 400 ms/],
    [['--ranks', '100000'], /--ranks 100000: each rank thread needs at least 24 MiB before any data, 100000 need 2\.29 TiB, more than this machine's memory/],
    [['--ranks', '100000', '--transport', 'processes'], /each rank process needs at least 48 MiB/],
    [['--events', join(root, 'no-such-dir', 'run.jsonl')], /--events: cannot write .*run\.jsonl: no such file or directory \(ENOENT\)/],
    [['--allow-code-change'], /--allow-code-change applies to a resume: add --resume/],
  ])('%j', async (args, message) => {
    const r = await run(JACOBI, '--checkpoint-dir', join(root, 'unused'), ...args)
    console.log(`${JSON.stringify(args)} refused in ${r.ms.toFixed(0)} ms`)
    expect(r.code).toBe(2)
    expect(r.text).toMatch(message)
    expect(r.text).not.toMatch(STACK)
  })

  it('a grid that cannot fit in memory is refused once, without restarts', async () => {
    const events = join(root, 'huge.jsonl')
    const r = await run(JACOBI, '--ranks', '2', '--n', '1000000', '--checkpoint-dir', join(root, 'huge'), '--events', events)
    console.log(`a 10^12-cell grid refused in ${r.ms.toFixed(0)} ms`)
    expect(r.code).toBe(2)
    expect(r.text).toMatch(/rank \d+'s two domains need [\d.]+ TiB \(\d+ cells of 8 bytes, twice\), more than this machine's memory/)
    expect(r.text).not.toMatch(STACK)
    const { readFileSync } = await import('node:fs')
    expect(readFileSync(events, 'utf8').match(/"event":"start"/g)).toHaveLength(1)
  })

  it('a domain beyond typed array limits is bad input too, not a crash to restart from', async () => {
    const { Domain2D } = await import('../../src/domains/domain2d.js')
    const { DomainDesc } = await import('../../src/domains/desc.js')
    const { ConfigError } = await import('../../src/errors.js')
    const d = new (class extends Domain2D {
      possessed() {
        return DomainDesc.of([0, 0], [1, 1])
      }
      needed() {
        return this.possessed()
      }
    })()
    expect(() => d.resize(DomainDesc.of([0, 0], [70_000, 70_000]))).toThrow(ConfigError)
    expect(() => d.resize(DomainDesc.of([0, 0], [70_000, 70_000]))).toThrow(/cannot allocate a domain of .* \(4900000000 float64 cells, 36\.5 GiB\): (Invalid typed array length|Array buffer allocation failed)/)
  })

  it('a syntax error, a non-program file and a file that throws while loading: location and message, no stack', async () => {
    const dir = join(root, 'programs')
    mkdirSync(dir)
    writeFileSync(join(dir, 'syntax.ts'), 'import { defineProgram } from "molotof"\nexport default defineProgram({ name: "s", options: {}, main() { return 1 +* 2 } })\n')
    writeFileSync(join(dir, 'syntax.mjs'), 'export default 1 +* 2\n')
    writeFileSync(join(dir, 'throws.ts'), 'const x: number = 1\nif (x) throw new Error("no config found")\nexport default x\n')
    writeFileSync(join(dir, 'notes.md'), '# notes\n')
    writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n')
    // Loaded as CommonJS (no "type": "module" above it): no line numbers of the source, but the file.
    mkdirSync(join(dir, 'cjs'))
    writeFileSync(join(dir, 'cjs', 'package.json'), '{}\n')
    writeFileSync(join(dir, 'cjs', 'throws.ts'), 'const x: number = 1\nif (x) throw new Error("no config found")\nexport default x\n')
    const cases: Array<[string, RegExp]> = [
      ['syntax.ts', /cannot load .*syntax\.ts: .*syntax\.ts:2:74: syntax error: Unexpected "\*"/],
      ['syntax.mjs', /cannot load .*syntax\.mjs: .*syntax\.mjs:1: SyntaxError: Unexpected token '\*'/],
      ['throws.ts', /cannot load .*throws\.ts: .*programs\/throws\.ts:2:\d+: Error: no config found/],
      ['cjs/throws.ts', /cannot load .*throws\.ts: .*cjs\/throws\.ts: Error: no config found/],
      ['notes.md', /notes\.md is not a program: molotof runs TypeScript or JavaScript modules/],
      ['missing.ts', /program file not found: .*missing\.ts/],
    ]
    for (const [file, message] of cases) {
      const r = await run(join(dir, file), '--ranks', '1', '--checkpoint-dir', join(root, 'p'))
      expect(r.code, file).toBe(2)
      expect(r.text, file).toMatch(message)
      expect(r.text, file).not.toMatch(STACK)
    }
  })
})

// A read-only mount needs a private mount namespace (unshare, as root): skipped where there is none.
const canMount = spawnSync('unshare', ['-m', '--propagation', 'private', 'true']).status === 0

describe.skipIf(!canMount)('molotof run: a read-only checkpoint directory', () => {
  it('is reported at start as a read-only file system (EROFS), not ENOENT and not at the first checkpoint', () => {
    const mnt = join(root, 'ro')
    mkdirSync(mnt)
    for (const dir of [join(mnt, 'ckpt'), mnt]) {
      const script = `mount -t tmpfs -o ro,size=1m tmpfs ${mnt} && exec ${process.execPath} bin/molotof.mjs run ${JACOBI} --ranks 2 --n 32 --iterations 50 --checkpoint every:10 --checkpoint-dir ${dir}`
      const r = spawnSync('unshare', ['-m', '--propagation', 'private', 'sh', '-c', script], { encoding: 'utf8', timeout: 60_000 })
      expect(r.status, r.stderr).toBe(2)
      expect(r.stderr).toMatch(new RegExp(`molotof: cannot (create|write to) the checkpoint directory ${dir}: the file system is read-only \\(EROFS\\)`))
      expect(r.stderr).not.toMatch(/ENOENT|checksum|step 9/)
      expect(r.stdout).toBe('')
    }
  })
})
