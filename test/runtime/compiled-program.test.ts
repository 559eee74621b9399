import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { codeIdentityOf } from '../../src/checkpoint/identity/code.js'
import { Supervisor, type SupervisorEvent } from '../../src/runtime/launch/supervisor.js'
import { interiorSum, jacobiSerial } from '../../examples/jacobi/serial.js'
import { compileProgram, PRECOMPILE_ENV } from '../../src/runtime/compiled-program.js'

const repo = resolve(import.meta.dirname, '../..')
const sourcesEntry = pathToFileURL(join(repo, 'src/index.ts')).href
const LOAD_PROGRAM = pathToFileURL(join(repo, 'src/runtime/boot/load-program.mjs')).href
const SOURCE_LOCATIONS = pathToFileURL(join(repo, 'src/runtime/boot/source-locations.mjs')).href
const tmp: string[] = []
afterAll(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true })
})
afterEach(() => {
  delete process.env[PRECOMPILE_ENV]
})

/**
 * A project of its own in a temporary folder: an (empty) node_modules, an ESM
 * package.json, the given files, and a stand-in framework whose
 * `defineProgram` marks the program as molotof's does.
 */
function project(files: Record<string, string>, opts: { nodeModules?: boolean } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'molotof-compile-'))
  tmp.push(dir)
  if (opts.nodeModules ?? true) mkdirSync(join(dir, 'node_modules'))
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'user-project', type: 'module' }))
  writeFileSync(
    join(dir, 'framework.mjs'),
    "export const defineProgram = (p) => ({ ...p, [Symbol.for('molotof.rank-entry')]: () => undefined })\n",
  )
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true })
    writeFileSync(join(dir, name), text)
  }
  return dir
}
const fakeFramework = (dir: string) => pathToFileURL(join(dir, 'framework.mjs')).href

/** Run a module's code in a fresh Node (no tsx, no vitest): its JSON output. */
function nodeEval(code: string): unknown {
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' }))
}

describe('compileProgram', () => {
  it('bundles the local modules of Jacobi into one content-addressed module that imports molotof from the compiled framework', async () => {
    const program = join(repo, 'examples/jacobi/jacobi.ts')
    const { compiled, why } = await compileProgram(program, join(repo, 'tsconfig.json'), sourcesEntry)
    expect(why).toBeUndefined()
    const c = compiled!
    expect([...c.modules].sort()).toEqual(['jacobi.ts', 'plate.ts', 'relaxation.ts'].map((f) => pathToFileURL(join(repo, 'examples/jacobi', f)).href))
    const bytes = readFileSync(c.file)
    expect(c.file).toBe(join(repo, 'node_modules/.cache/molotof/programs', `${createHash('sha256').update(bytes).digest('hex').slice(0, 16)}.mjs`))
    const text = bytes.toString('utf8')
    // The framework's sources compiled too: the program imports that module for `molotof`.
    expect(c.framework).toMatch(new RegExp(`^${pathToFileURL(join(repo, 'node_modules/.cache/molotof/framework')).href}/[0-9a-f]{16}\\.mjs$`))
    expect(text).toContain(`from "${c.framework}"`)
    expect(text).not.toMatch(/from ["']molotof["']/)
    // From the program's folder `molotof` is this repository's own package: no resolve hook needed.
    expect(c.pinMolotof).toBe(false)
    // The code identity is the one the ranks loading the sources through tsx compute: the three files.
    expect(Object.keys(codeIdentityOf(program, c.modules).files).sort()).toEqual(['jacobi.ts', 'plate.ts', 'relaxation.ts'])
    // The same program again: the same file, nothing half-written left beside it.
    expect((await compileProgram(program, join(repo, 'tsconfig.json'), sourcesEntry)).compiled?.file).toBe(c.file)
    expect(readdirSync(dirname(c.file)).filter((f) => f.endsWith('.tmp'))).toEqual([])
  })

  it("keeps each module's own import.meta.url, dirname and filename, and leaves packages as imports", async () => {
    const dir = project({
      'prog.ts': [
        "import { defineProgram } from 'molotof'",
        "import { where } from './lib/where.js'",
        "import { readFileSync } from 'node:fs'",
        'export const self = import.meta.url',
        "export default defineProgram({ name: 'p', data: readFileSync(new URL('./lib/data.txt', import.meta.url), 'utf8'), where })",
      ].join('\n'),
      'lib/where.ts': 'export const where = { url: import.meta.url, dir: import.meta.dirname, file: import.meta.filename }\n',
      'lib/data.txt': 'next to the program',
    })
    const { compiled, why } = await compileProgram(join(dir, 'prog.ts'), undefined, fakeFramework(dir))
    expect(why).toBeUndefined()
    expect(readFileSync(compiled!.file, 'utf8')).toMatch(/from "node:fs"/)
    const out = nodeEval(
      `const m = await import(${JSON.stringify(pathToFileURL(compiled!.file).href)}); console.log(JSON.stringify({ self: m.self, data: m.default.data, where: m.default.where }))`,
    )
    expect(out).toEqual({
      self: pathToFileURL(join(dir, 'prog.ts')).href,
      data: 'next to the program',
      where: { url: pathToFileURL(join(dir, 'lib/where.ts')).href, dir: join(dir, 'lib'), file: join(dir, 'lib/where.ts') },
    })
    // `molotof` does not resolve from this project: a rank pins it with the resolve hook.
    expect(compiled!.pinMolotof).toBe(true)
  })

  it('says why a program is loaded from its sources instead', async () => {
    const fixtures = join(repo, 'test/fixtures')
    expect((await compileProgram(join(fixtures, 'cjs/program.ts'), undefined, sourcesEntry)).why).toMatch(/CommonJS/)
    expect((await compileProgram(join(fixtures, 'where.ts'), undefined, sourcesEntry)).why).toMatch(/where\.ts uses import\.meta\.resolve/)
    const dynamic = project({ 'prog.ts': "const name = './x.js'\nexport default await import(name)\n" })
    expect((await compileProgram(join(dynamic, 'prog.ts'), undefined, fakeFramework(dynamic))).why).toMatch(/computed module name/)
    const broken = project({ 'prog.ts': 'export default {\n' })
    expect((await compileProgram(join(broken, 'prog.ts'), undefined, fakeFramework(broken))).why).toBe('the program does not compile')
    const homeless = project({ 'prog.ts': 'export default 1\n' }, { nodeModules: false })
    expect((await compileProgram(join(homeless, 'prog.ts'), undefined, fakeFramework(homeless))).why).toMatch(/no node_modules/)
    process.env[PRECOMPILE_ENV] = '0'
    expect((await compileProgram(join(repo, 'examples/jacobi/jacobi.ts'), undefined, sourcesEntry)).why).toBe(`${PRECOMPILE_ENV}=0`)
  })
})

describe('the framework running from its sources (a checkout, these tests)', () => {
  it('is compiled into one module too, reused while its sources do not change, that a plain Node runs the program on', async () => {
    const program = join(repo, 'examples/jacobi/jacobi.ts')
    const { compiled } = await compileProgram(program, join(repo, 'tsconfig.json'))
    const c = compiled!
    expect(c.framework).toMatch(new RegExp(`^${pathToFileURL(join(repo, 'node_modules/.cache/molotof/framework')).href}/[0-9a-f]{16}\\.mjs$`))
    expect(readFileSync(c.file, 'utf8')).toContain(`from "${c.framework}"`)
    expect((await compileProgram(program, join(repo, 'tsconfig.json'))).compiled?.framework).toBe(c.framework)
    // A fresh Node with no TypeScript loader at all imports it: the program, marked by the compiled framework.
    const out = nodeEval(
      `const p = (await import(${JSON.stringify(pathToFileURL(c.file).href)})).default
       console.log(JSON.stringify({ name: p.name, entry: typeof p[Symbol.for('molotof.rank-entry')] }))`,
    ) as { name: string; entry: string }
    expect(out.entry).toBe('function')
    expect(out.name).toBe('jacobi')
  }, 60_000)
})

describe('a rank loading a compiled program (load-program.mjs)', () => {
  const load = (programFile: string, compiled: object) =>
    nodeEval(
      `const { loadProgram } = await import(${JSON.stringify(LOAD_PROGRAM)})
       const r = await loadProgram({ programFile: ${JSON.stringify(programFile)}, compiled: ${JSON.stringify(compiled)}, namespace: 'test' })
       console.log(JSON.stringify('error' in r ? { error: r.error } : { name: r.program.name, modules: r.modules }))`,
    )

  it('takes the compiled module and its module list, and falls back to the sources when the file is not on this host', async () => {
    const dir = project({ 'prog.ts': "import { defineProgram } from 'molotof'\nexport default defineProgram({ name: 'compiled' })\n" })
    const { compiled } = await compileProgram(join(dir, 'prog.ts'), undefined, fakeFramework(dir))
    const listed = { ...compiled!, modules: ['file:///listed/by/the/launcher.ts'] }
    expect(load(join(dir, 'prog.ts'), listed)).toEqual({ name: 'compiled', modules: ['file:///listed/by/the/launcher.ts'] })
    // Another host, without the file: tsx loads the sources (here the repository's Jacobi, molotof from sources).
    const jacobi = join(repo, 'examples/jacobi/jacobi.ts')
    const fallback = load(jacobi, { file: join(dir, 'missing.mjs'), modules: [], pinMolotof: false }) as { name: string; modules: string[] }
    expect(fallback.name).toBe('jacobi')
    expect(fallback.modules).toContain(pathToFileURL(join(repo, 'examples/jacobi/relaxation.ts')).href)
  }, 60_000)

  it("reports an error thrown by the program's own code at its place in the sources", async () => {
    const dir = project({
      'prog.ts': "import { defineProgram } from 'molotof'\nimport { check } from './check.js'\ncheck()\nexport default defineProgram({ name: 'x' })\n",
      'check.ts': "export function check(): void {\n  throw new Error('bad setting')\n}\n",
    })
    const { compiled } = await compileProgram(join(dir, 'prog.ts'), undefined, fakeFramework(dir))
    const out = load(join(dir, 'prog.ts'), compiled!) as { error: string }
    // As with tsx: the first frame in the program file, at its line in the sources (not in the compiled module).
    expect(out.error).toBe(`cannot load ${join(dir, 'prog.ts')}: ${join(dir, 'prog.ts')}:3:1: Error: bad setting`)
  }, 60_000)
})

describe('sourceLocations (source-locations.mjs)', () => {
  it("tells a stack thrown in a compiled module by the program's source lines, without Node's source maps on", async () => {
    const dir = project({
      'prog.ts': "import { defineProgram } from 'molotof'\nimport { step } from './kernel.js'\nexport default defineProgram({ name: 'x', step })\n",
      'kernel.ts': "export function step(i: number): number {\n  if (i > 2) throw new Error(`diverged at ${i}`)\n  return i + 1\n}\n",
    })
    const { compiled } = await compileProgram(join(dir, 'prog.ts'), undefined, fakeFramework(dir))
    const out = nodeEval(
      `const { sourceLocations } = await import(${JSON.stringify(SOURCE_LOCATIONS)})
       const p = (await import(${JSON.stringify(pathToFileURL(compiled!.file).href)})).default
       try { p.step(3) } catch (e) { console.log(JSON.stringify({ raw: e.stack, mapped: sourceLocations(e.stack) })) }`,
    ) as { raw: string; mapped: string }
    // Node left the frame in the compiled module (no source maps on); mapped, it is kernel.ts line 2.
    expect(out.raw.split('\n')[1]).toContain(compiled!.file)
    expect(out.mapped.split('\n')[0]).toBe('Error: diverged at 3')
    expect(out.mapped.split('\n')[1]).toMatch(new RegExp(`\\(${join(dir, 'kernel.ts')}:2:\\d+\\)$`))
    expect(out.mapped).not.toContain('.cache/molotof')
  })
})

describe('the supervisor', () => {
  it('notes, once, when each rank must compile the program itself and why', async () => {
    const logs: string[] = []
    const ckpt = mkdtempSync(join(tmpdir(), 'molotof-compile-note-'))
    tmp.push(ckpt)
    const r = await new Supervisor<number>(join(repo, 'test/fixtures/cjs/program.ts'), {
      ranks: 2,
      argv: ['--base', '3'],
      checkpoint: { dir: ckpt, policy: { every: 1 }, keep: 1, resume: false },
      onLog: (_rank, text) => logs.push(text),
    }).run()
    expect(r.kind).toBe('done')
    expect(logs.filter((l) => l.startsWith('note: each rank compiles'))).toEqual([
      'note: each rank compiles the program itself (Node loads the program as CommonJS), about 0.25 s more per rank start',
    ])
  }, 60_000)
})

describe('a run is one version of its code', () => {
  it('restarts on the code compiled at run start, and resumes its own checkpoints, when a source file is edited during the run', async () => {
    const dir = project({})
    for (const f of ['jacobi.ts', 'plate.ts', 'relaxation.ts']) cpSync(join(repo, 'examples/jacobi', f), join(dir, f))
    const relaxation = join(dir, 'relaxation.ts')
    const original = readFileSync(relaxation, 'utf8')
    expect(original).toContain('0.25')
    const events: SupervisorEvent[] = []
    const sup = new Supervisor<{ checksum: number }>(join(dir, 'jacobi.ts'), {
      ranks: 2,
      transport: 'processes',
      argv: ['--n', '48', '--iterations', '90'],
      checkpoint: { dir: join(dir, 'ckpt'), policy: { every: 10 }, keep: 2, resume: false },
      inject: [{ rank: 1, skeleton: 0, step: 55, phase: 'calculate' }],
      onLog: () => {},
      onEvent: (e) => {
        events.push(e)
        // Between the failure and the restart: the kernel's weight changes on disk (as a user editing it would).
        if (e.event === 'failure') writeFileSync(relaxation, original.replaceAll('0.25', '0.2499'))
      },
    })
    const r = await sup.run()
    expect(r.kind).toBe('done')
    if (r.kind !== 'done') return
    // The restarted ranks resumed from step 49 with the code that wrote it: the bits of the unedited program.
    expect(r.value.checksum).toBe(interiorSum(jacobiSerial(48, 90), 48))
    expect(events.filter((e) => e.event === 'recovery-line').map((e) => e.event === 'recovery-line' && e.step)).toEqual([49])
    const starts = events.flatMap((e) => (e.event === 'start' ? [e.compiled] : []))
    expect(starts).toHaveLength(2)
    expect(starts[1]).toBe(starts[0])
  }, 60_000)
})
