import { readFileSync } from 'node:fs'
import { match } from 'ts-pattern'
import { MolotofError, RankFailedError } from '../errors.js'
import { benchCommand } from './bench.js'
import { demoCommand } from './demo.js'
import { initCommand } from './init.js'
import { inspectCommand } from './inspect.js'
import { runCommand } from './run.js'

const HELP = `molotof — fault-tolerant iterative SPMD programs

Usage: molotof <command> [options]

Commands:
  run <program>     run a program on N ranks            (molotof run --help)
  inspect <dir>     list and verify checkpoints          (molotof inspect --help)
  bench <program>   overhead, checkpoint sizes, recovery (molotof bench --help)
  demo              a failure, its recovery, and checkpoint sizes, in under a minute
  init <dir>        a new project: package.json, tsconfig, a starter program and its test
  help [command]    show help

Options:
  --help, -h        help for molotof or for a command
  --version         print the version`

/** Exit codes: 0 success, 1 a run failed, 2 bad usage or input. */
export async function main(argv: readonly string[], out = (s: string) => console.log(s), err = (s: string) => console.error(s)): Promise<number> {
  const [cmd, ...rest] = argv
  try {
    return await match(cmd ?? '--help')
      .with('run', () => runCommand(rest, out, err))
      .with('inspect', () => inspectCommand(rest, out))
      .with('bench', () => benchCommand(rest, out, err))
      .with('demo', () => demoCommand(rest, out))
      .with('init', () => initCommand(rest, out))
      .with('--version', '-v', () => {
        out(version())
        return 0
      })
      .with('--help', '-h', 'help', () => {
        const sub = rest[0]
        if (sub === 'run') return runCommand(['--help'], out)
        if (sub === 'inspect') return inspectCommand(['--help'], out)
        if (sub === 'bench') return benchCommand(['--help'], out, err)
        if (sub === 'init') return initCommand(['--help'], out)
        out(HELP)
        return 0
      })
      .otherwise((c) => {
        err(`molotof: unknown command "${c}"\n\n${HELP}`)
        return 2
      })
  } catch (e) {
    if (e instanceof RankFailedError) {
      err(`molotof: ${e.message}`)
      return 1
    }
    if (e instanceof MolotofError) {
      err(`molotof: ${e.message}`)
      return 2
    }
    err(`molotof: unexpected error: ${(e as Error)?.stack ?? String(e)}`)
    return 1
  }
}

/** The version in molotof's package.json (searched upwards: the CLI runs from src/ or dist/). */
function version(): string {
  for (let url = new URL('./', import.meta.url); url.pathname !== '/'; url = new URL('../', url)) {
    try {
      const pkg = JSON.parse(readFileSync(new URL('package.json', url), 'utf8')) as { name?: string; version?: string }
      if (pkg.name === 'molotof' && pkg.version) return pkg.version
    } catch {
      // not here; keep looking
    }
  }
  return 'unknown'
}
