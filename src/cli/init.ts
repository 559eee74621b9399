import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { basename, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ConfigError } from '../errors.js'

const USAGE = `Usage: molotof init <dir> [--molotof <spec>]

Creates a molotof project in <dir> (new or empty): package.json, tsconfig.json,
a starter program (relax.ts: Jacobi relaxation on a plate, row strips over the
ranks) and its test (relax.test.ts). Then:

  cd <dir> && npm install && npm test && npx molotof run relax.ts --ranks 4

Options:
  --molotof <spec>   the molotof dependency in package.json: a version range, a
                     path to a .tgz made by npm pack, a directory
                     [default: file:<the molotof copy running this command>;
                     a copy installed in a project's node_modules: what that
                     project installed it from (its .tgz, path or version)]`

/** The starter program: README's "Writing a program" shows this same text. */
export const STARTER_PROGRAM = `import { CountedKernel, defineProgram, Domain2D, DomainDesc, option, splitPoint, type StepContext } from 'molotof'

/** An n×n plate inside a one-cell boundary; each rank computes a strip of rows. */
class Plate extends Domain2D {
  constructor(readonly n: number) {
    super()
  }
  // The cells this rank computes at a step: its strip of interior rows.
  possessed(rank: number, size: number): DomainDesc<2> {
    return DomainDesc.of([1 + splitPoint(this.n, size, rank), 1], [1 + splitPoint(this.n, size, rank + 1), this.n + 1])
  }
  // The cells it reads: its strip, one halo row above and below, the boundary columns.
  needed(rank: number, size: number): DomainDesc<2> {
    const p = this.possessed(rank, size)
    return p.isEmpty ? p : DomainDesc.of([p.lower[0] - 1, 0], [p.upper[0] + 1, this.n + 2])
  }
}

/** Jacobi sweeps: every interior cell becomes the mean of its four neighbours; it = 0, 1, …, sweeps − 1 (CountedKernel; subclass CalcKernel for an iterator of your own). */
class Relax extends CountedKernel<Plate> {
  // Light set-up, replayed after a failure: the top edge is hot (1), the other edges cold (0).
  override initialize(read: Plate, write: Plate, _ctx: StepContext) {
    for (const d of [read, write]) if (d.box.lower[0] === 0) for (let j = 0; j < d.n + 2; j++) d.put(0, j, 1)
  }
  // Heavy work of one step: a hot loop over the typed arrays (read and write cover the same box).
  calculate(read: Plate, write: Plate) {
    const b = write.possessedBox
    const u = read.data
    const v = write.data
    const s = read.s0
    const o = read.offset
    for (let i = b.lower[0]; i < b.upper[0]; i++) {
      for (let j = b.lower[1]; j < b.upper[1]; j++) {
        const k = o + i * s + j
        v[k] = 0.25 * (u[k - 1] + u[k + 1] + u[k - s] + u[k + s])
      }
    }
  }
}

export default defineProgram({
  name: 'relax',
  options: { n: option.int(256, 'interior size (n×n)', { min: 1 }), sweeps: option.int(500, 'Jacobi sweeps', { min: 0 }) },
  async main(ctx) {
    const { n, sweeps } = ctx.options
    const sk = ctx.skeleton(new Relax(sweeps), [new Plate(n), new Plate(n)])
    sk.checkpoint.unregister('write') // minimal checkpoints: the next sweep overwrites that grid
    const plate = await sk.run() // the grid of the last sweep; its halo cells hold the neighbours' final values
    const heat = await ctx.sumInStorageOrder(plate) // the bits of a serial loop, on any number of ranks
    return { n, sweeps, heat }
  },
  format: (r) => \`relax n=\${r.n} sweeps=\${r.sweeps}: heat \${r.heat}\`,
})
`

const STARTER_TEST = `import assert from 'node:assert/strict'
import { test } from 'node:test'
import { runLocal } from 'molotof'
import relax from './relax.js'

// runLocal runs every rank as a task of this thread: quick tests, no workers.
test('relax gives the same bits on 1 and 3 ranks', async () => {
  const argv = ['--n', '40', '--sweeps', '60']
  const [one] = await runLocal(relax, { ranks: 1, argv })
  const [three] = await runLocal(relax, { ranks: 3, argv })
  assert.ok(one.heat > 0)
  assert.ok(Object.is(one.heat, three.heat), \`\${one.heat} on 1 rank, \${three.heat} on 3\`)
})
`

const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    lib: ['ES2023'],
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: ['node'],
  },
  include: ['*.ts'],
}

interface OwnPackage {
  dir: string
  version: string
  dependencies: Record<string, string>
  devDependencies: Record<string, string>
}

/**
 * `molotof init <dir>`: a new project with a starter program and its test,
 * depending on the molotof copy that runs the command (or `--molotof`).
 *
 * ```ts
 * await initCommand(['my-project'], console.log)   // then: cd my-project && npm install
 * ```
 */
export async function initCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    out(USAGE)
    return 0
  }
  let dir: string | undefined
  let spec: string | undefined
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--molotof' || a.startsWith('--molotof=')) {
      spec = a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[++i]
      if (!spec) throw new ConfigError('molotof init: --molotof needs a dependency spec (a version range, a .tgz path or a directory)')
    } else if (a.startsWith('-')) {
      throw new ConfigError(`molotof init: unknown option ${a} (see molotof init --help)`)
    } else if (dir === undefined) {
      dir = a
    } else {
      throw new ConfigError(`molotof init: one directory only (got ${dir} and ${a})`)
    }
  }
  if (!dir) throw new ConfigError('molotof init: name the directory to create (see molotof init --help)')
  const target = resolve(dir)
  if (existsSync(target) && readdirSync(target).length > 0) {
    throw new ConfigError(`molotof init: ${dir} is not empty; give a new or empty directory`)
  }
  const own = ownPackage()
  const from: InstalledFrom = spec === undefined ? defaultSpec(own) : { spec }
  const name = basename(target).toLowerCase().replace(/[^a-z0-9._-]+/g, '-').replace(/^[._-]+/, '') || 'molotof-project'
  const pkg = {
    name,
    version: '0.1.0',
    private: true,
    type: 'module',
    scripts: {
      start: 'molotof run relax.ts --ranks 4',
      test: 'node --import tsx --test relax.test.ts',
      typecheck: 'tsc --noEmit',
    },
    dependencies: { molotof: from.spec },
    devDependencies: {
      '@types/node': own.devDependencies['@types/node'] ?? '^20.0.0',
      tsx: own.dependencies.tsx ?? '^4.0.0',
      typescript: own.devDependencies.typescript ?? '^5.0.0',
    },
  }
  mkdirSync(target, { recursive: true })
  const files: [string, string][] = [
    ['package.json', JSON.stringify(pkg, null, 2) + '\n'],
    ['tsconfig.json', JSON.stringify(TSCONFIG, null, 2) + '\n'],
    ['relax.ts', STARTER_PROGRAM],
    ['relax.test.ts', STARTER_TEST],
    ['.gitignore', 'node_modules/\n.molotof/\n'],
  ]
  for (const [file, text] of files) writeFileSync(join(target, file), text)
  out(`created ${dir}: ${files.map(([f]) => f).join(', ')}`)
  out(`molotof dependency: ${pkg.dependencies.molotof}${from.why ? ` (${from.why})` : ''}`)
  if (from.note) out(`note: ${from.note}`)
  if (spec === undefined && from.spec === `file:${own.dir}` && !existsSync(join(own.dir, 'dist', 'index.js'))) {
    // Imports (tests, the type checker) use the package's build; the CLI alone would run from sources.
    out(`note: ${own.dir} has no build yet: run \`npm run build\` there before \`npm install\` here`)
  }
  out(`next:\n  cd ${dir}\n  npm install\n  npm test\n  npx molotof run relax.ts --ranks 4`)
  return 0
}

/** A project's record of where it installed molotof from. */
interface InstalledFrom {
  spec: string
  /** Said after the dependency line: where the spec comes from. */
  why?: string
  /** A warning: the spec may not install as it is. */
  note?: string
}

/**
 * The dependency of a new project when --molotof is not given. A clone, or a
 * directory installed by path (npm links it, so its real path lies outside
 * node_modules), is depended on as that directory. A copy inside another
 * project's node_modules (installed from a tarball or the registry) belongs to
 * that project, which may remove or replace it: the new project gets what that
 * project installed molotof from instead.
 */
function defaultSpec(own: OwnPackage): InstalledFrom {
  const at = own.dir.lastIndexOf('/node_modules/')
  if (at < 0) return { spec: `file:${own.dir}` }
  const host = own.dir.slice(0, at)
  const fallback = { spec: `^${own.version}`, why: `the version running this command; ${host} does not say where it installed molotof from` }
  const declared = readJson(join(host, 'package.json')) as { dependencies?: Record<string, string>; devDependencies?: Record<string, string>; optionalDependencies?: Record<string, string> } | undefined
  const lock = readJson(join(host, 'package-lock.json')) as { packages?: Record<string, { resolved?: string }> } | undefined
  const range = declared?.dependencies?.molotof ?? declared?.devDependencies?.molotof ?? declared?.optionalDependencies?.molotof
  const resolved = lock?.packages?.[own.dir.slice(at + 1)]?.resolved
  // A registry download: the lock holds a URL, the package.json a version range.
  const raw = range?.startsWith('file:') ? range : resolved?.startsWith('file:') ? resolved : range
  if (raw === undefined) return fallback
  if (!raw.startsWith('file:')) return { spec: raw, why: `as ${host}/package.json has it` }
  // Relative file: specs are relative to the project that wrote them.
  const rest = raw.slice('file:'.length)
  const path = rest.startsWith('//') ? fileURLToPath(raw) : resolve(host, rest)
  const made = { spec: `file:${path}`, why: `what ${host} installed molotof from` }
  return existsSync(path) ? made : { ...made, note: `${path} no longer exists: give --molotof <spec> (a version range, a .tgz made by npm pack, a directory)` }
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as unknown
  } catch {
    // Absent or not JSON: the caller falls back to the next source.
    return undefined
  }
}

/** The package this command runs from (src/cli or dist/: package.json is one or two levels up). */
function ownPackage(): OwnPackage {
  for (let url = new URL('./', import.meta.url); url.pathname !== '/'; url = new URL('../', url)) {
    const file = new URL('package.json', url)
    if (!existsSync(file)) continue
    const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string; dependencies?: Record<string, string>; devDependencies?: Record<string, string> }
    if (pkg.name !== 'molotof') continue
    return {
      dir: realpathSync(fileURLToPath(url)).replace(/\/$/, ''),
      version: pkg.version ?? '0.0.0',
      dependencies: pkg.dependencies ?? {},
      devDependencies: pkg.devDependencies ?? {},
    }
  }
  throw new ConfigError('molotof init: cannot find the package.json of the molotof copy running this command; give --molotof <spec>')
}
