import { readFileSync } from 'node:fs'
import { match } from 'ts-pattern'
import { MolotofError } from '../errors.js'
import { option } from '../skeletons/options.js'
import { HELP_OPTION } from './args.js'
import { benchCommand } from './bench.js'
import { demoCommand } from './demo.js'
import { EXIT, exitCodeOf } from './exit-codes.js'
import { formatHelp } from './help.js'
import { initCommand } from './init.js'
import { inspectCommand } from './inspect.js'
import { runCommand } from './run.js'

const COMMANDS = `  run <program>     run a program on N ranks             (molotof run --help)
  inspect <dir>     list and verify checkpoints          (molotof inspect --help)
  bench <program>   overhead, checkpoint sizes, recovery (molotof bench --help)
  demo              a failure, its recovery, and checkpoint sizes, in under a minute
  init <dir>        a new project: package.json, tsconfig, a starter program and its test
  help [command]    show help`

const HELP = formatHelp({
  usage: 'molotof <command> [options]',
  about: 'molotof: fault-tolerant iterative SPMD programs.',
  sections: [
    { title: 'Commands', specs: COMMANDS },
    { title: 'Options', specs: { ...HELP_OPTION, version: { ...option.boolean(false, 'print the version'), short: 'v' } } },
  ],
  exitCodes: [
    [0, 'done'],
    [1, 'failed: a run failed (inspect: the newest checkpoint is not valid)'],
    [2, 'bad input, refused before any computation'],
    [75, 'run: preempted, checkpointed and stopped; resume with --resume'],
    [76, 'run: a node of a cluster run was lost; run the launcher again with --resume'],
  ],
})

/** Exit codes (see exit-codes.ts): 0 done, 1 the run failed, 2 bad input, 75 preempted, 76 node lost. */
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
        const [sub, ...more] = rest
        if (sub === 'run') return runCommand(['--help', ...more], out)
        if (sub === 'inspect') return inspectCommand(['--help'], out)
        if (sub === 'bench') return benchCommand(['--help'], out, err)
        if (sub === 'demo') return demoCommand(['--help'], out)
        if (sub === 'init') return initCommand(['--help'], out)
        out(HELP)
        return 0
      })
      .otherwise((c) => {
        err(`molotof: unknown command "${c}"\n\n${HELP}`)
        return EXIT.badInput
      })
  } catch (e) {
    if (e instanceof MolotofError) err(`molotof: ${e.message}`)
    else err(`molotof: unexpected error: ${(e as Error)?.stack ?? String(e)}`)
    return exitCodeOf(e)
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
