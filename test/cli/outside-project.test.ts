import { execFileSync } from 'node:child_process'
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { interiorSum, jacobiSerial } from '../../examples/jacobi/serial.js'
import type { SupervisorEvent } from '../../src/index.js'

// A user's project outside the repository, set up exactly as README's
// "Writing a program" says, with molotof installed from its npm pack tarball.
// The tarball is packed from a copy of the repository (so no dist/ is left
// here, see build.test.ts); npm install reads the registry or its cache.
const repo = resolve(import.meta.dirname, '../..')
const readme = readFileSync(join(repo, 'README.md'), 'utf8')
const tmp: string[] = []
let tarball = ''
let work = ''

const env = { ...process.env, npm_config_prefer_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' }
const sh = (script: string, cwd: string) => execFileSync('bash', ['-e', '-c', script], { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })

/** The fenced block after `<!-- readme-test: name -->`. */
function block(name: string): string {
  const m = new RegExp(`<!-- readme-test: ${name.replace('.', '\\.')} -->\\n\`\`\`\\w*\\n([\\s\\S]*?)\`\`\``).exec(readme)
  if (!m) throw new Error(`README has no block marked readme-test: ${name}`)
  return m[1]
}

function events(file: string): SupervisorEvent[] {
  return readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as SupervisorEvent)
}

beforeAll(() => {
  const stage = mkdtempSync(join(tmpdir(), 'molotof-stage-'))
  tmp.push(stage)
  for (const f of ['package.json', 'README.md', 'tsconfig.json', 'tsup.config.ts', 'bin', 'src', 'examples']) cpSync(join(repo, f), join(stage, f), { recursive: true })
  symlinkSync(join(repo, 'node_modules'), join(stage, 'node_modules'))
  const out = sh(`npm pack --pack-destination "${stage}" 2>/dev/null`, stage)
  tarball = join(stage, out.trim().split('\n').pop()!)
  work = mkdtempSync(join(tmpdir(), 'molotof-user-'))
  tmp.push(work)
}, 300_000)
afterAll(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true })
})

describe("README's Writing a program, in a new directory outside the repository", () => {
  const heat = interiorSum(jacobiSerial(256, 500), 256)

  it('sets up, runs, and prints the heat of a plain serial loop, as README says', () => {
    sh(block('setup').replace('/path/to/molotof/molotof-0.1.0.tgz', tarball), work)
    const project = join(work, 'relax')
    writeFileSync(join(project, 'relax.ts'), block('relax.ts'))
    const out = sh(block('run'), project)
    expect(out).toContain(`relax n=256 sweeps=500: heat ${heat}`)
    expect(readme).toContain(`\`relax n=256 sweeps=500: heat ${heat}\``)
  }, 300_000)

  it('recovers from the injected failure from the checkpoint README names, with the same heat', () => {
    const project = join(work, 'relax')
    const out = sh(`${block('recover').trim()} --events events.jsonl`, project)
    expect(out).toContain(`heat ${heat}`)
    const ev = events(join(project, 'events.jsonl'))
    expect(ev.filter((e) => e.event === 'failure').map((e) => e.event === 'failure' && [e.rank, e.step, e.phase])).toEqual([[2, 250, 'calculate']])
    expect(ev.filter((e) => e.event === 'recovery-line').map((e) => e.event === 'recovery-line' && e.step)).toEqual([199])
    expect(ev.filter((e) => e.event === 'checkpoint').map((e) => e.event === 'checkpoint' && e.step)).toEqual([99, 199, 299, 399, 499])
    // The installed copy compiles the program once per run, into the project's own cache.
    const compiled = ev.flatMap((e) => (e.event === 'start' ? [e.compiled] : []))
    expect(compiled).toHaveLength(2)
    expect(compiled[0]).toMatch(new RegExp(`^${join(project, 'node_modules/.cache/molotof/programs')}/[0-9a-f]{16}\\.mjs$`))
    expect(compiled[1]).toBe(compiled[0])
  }, 120_000)

  it("runs the repository's own programs on the installed copy, not the repository's sources", () => {
    const out = sh(`npx molotof run "${join(repo, 'test/fixtures/where.ts')}" --ranks 1 --quiet`, join(work, 'relax'))
    expect(JSON.parse(out)).toMatch(new RegExp(`^file://${join(work, 'relax/node_modules/molotof/dist/index.js')}`))
  }, 120_000)

  it('molotof demo runs from the installed package: the recovered result is bit-identical', () => {
    const out = sh('npx molotof demo --ranks 2 --n 128 --iterations 40', join(work, 'relax'))
    expect(out).toContain('bit-identical to the reference (1 restart)')
  }, 120_000)

  it('molotof init writes the same program and a test that pass, type-check and run', () => {
    sh('npx molotof init starter', join(work, 'relax'))
    const starter = join(work, 'relax/starter')
    // The tarball the project installed molotof from, not that project's node_modules copy.
    const pkg = JSON.parse(readFileSync(join(starter, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }
    expect(pkg.dependencies.molotof).toBe(`file:${tarball}`)
    expect(readFileSync(join(starter, 'relax.ts'), 'utf8')).toBe(block('relax.ts'))
    sh('npm install 2>&1', starter)
    const test = sh('npm test 2>&1', starter)
    expect(test).toMatch(/# pass 1/)
    sh('npm run typecheck 2>&1', starter)
    expect(sh('npx molotof run relax.ts --ranks 2 --quiet', starter)).toContain(`heat ${heat}`)
  }, 300_000)

  it("the help pages' examples name files the project molotof init made has, and run there as written", () => {
    const starter = join(work, 'relax/starter')
    const examples = (cmd: string) => sh(`npx molotof ${cmd} --help`, starter).split('Examples:\n')[1].split('\n').map((l) => l.trim())
    const pages = { run: examples('run'), bench: examples('bench'), inspect: examples('inspect') }
    for (const [cmd, lines] of Object.entries(pages)) {
      const files = lines.flatMap((l) => l.split(/\s+/).filter((w) => w.endsWith('.ts')))
      expect(files.length, `${cmd} --help names a program`).toBeGreaterThan(0)
      for (const f of files) expect(existsSync(join(starter, f)), `${cmd} --help names ${f}`).toBe(true)
    }
    const command = (lines: string[], start: string) => lines.find((l) => l.startsWith(start))!.split('#')[0].replace(/^molotof /, 'npx molotof ')
    expect(sh(command(pages.run, 'molotof run relax.ts --ranks 2 --checkpoint every:50 --inject'), starter)).toContain(`heat ${heat}`)
    expect(sh(command(pages.inspect, 'molotof inspect .molotof/relax'), starter)).toMatch(/valid .* step 499 /)
  }, 120_000)
})
