import { ConfigError } from '../errors.js'
import { describe, launch } from '../runtime/launcher.js'
import { formatFlags, splitArgs, type FlagSpec } from './args.js'

export const RUN_FLAGS: Record<string, FlagSpec> = {
  ranks: { kind: 'int', help: 'number of ranks (SPMD copies of the program)', default: 2 },
  transport: { kind: 'string', help: 'how ranks run: threads (worker threads of one process)', default: 'threads' },
  json: { kind: 'boolean', help: "print rank 0's result as JSON instead of the program's text" },
  quiet: { kind: 'boolean', help: 'print only the result' },
}

const USAGE = `Usage: molotof run <program.ts|.js> [--ranks N] [framework options] [program options]

Runs a molotof program (a module whose default export is defineProgram({...}))
on N ranks. TypeScript programs run as they are, without a build step.

Framework options:
${formatFlags(RUN_FLAGS)}
  --help                 this help, and the program's own options when a program is named

Example:
  molotof run examples/jacobi/jacobi.ts --ranks 4 --n 1024 --iterations 500`

export async function runCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const args = splitArgs(argv, RUN_FLAGS, 1)
  const [program] = args.positional
  if (args.help) {
    out(USAGE)
    if (program) {
      const d = await describe(program)
      out(`\nProgram ${d.name}${d.description ? `: ${d.description}` : ''}\nProgram options:\n${d.optionsHelp || '  (none)'}`)
    }
    return 0
  }
  if (!program) throw new ConfigError('molotof run: name the program file to run (see molotof run --help)')
  if (args.flags.transport !== 'threads') {
    throw new ConfigError(`unknown transport "${String(args.flags.transport)}" (available: threads)`)
  }
  const ranks = args.flags.ranks as number
  const quiet = args.flags.quiet === true
  const result = await launch(program, {
    ranks,
    argv: args.rest,
    onLog: (_rank, text) => {
      if (!quiet) out(text)
    },
  })
  if (args.flags.json) out(JSON.stringify(result.value, jsonReplacer, 2))
  else out(result.text ?? JSON.stringify(result.value, jsonReplacer, 2))
  if (!quiet && !args.flags.json) out(`(${ranks} rank${ranks > 1 ? 's' : ''}, wall ${(result.wallMs / 1000).toFixed(3)} s)`)
  return 0
}

function jsonReplacer(_k: string, v: unknown): unknown {
  if (ArrayBuffer.isView(v)) return `<${v.constructor.name} of ${(v as Float64Array).length}>`
  return v
}
