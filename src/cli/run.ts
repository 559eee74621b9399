import { basename, join, resolve } from 'node:path'
import { parsePolicy } from '../checkpoint/policy.js'
import type { FaultToleranceConfig } from '../checkpoint/service.js'
import { ConfigError } from '../errors.js'
import { describe, launch } from '../runtime/launcher.js'
import { formatFlags, splitArgs, type FlagSpec } from './args.js'

export const RUN_FLAGS: Record<string, FlagSpec> = {
  ranks: { kind: 'int', help: 'number of ranks (SPMD copies of the program)', default: 2 },
  checkpoint: { kind: 'string', help: 'checkpoint policy: off, every:<steps>, <seconds>s, mtbf:<duration>, request', default: 'off' },
  'checkpoint-dir': { kind: 'string', help: 'checkpoint directory [default: .molotof/<program file name>]' },
  keep: { kind: 'int', help: 'complete checkpoints kept', default: 2 },
  resume: { kind: 'boolean', help: 'resume from the newest checkpoint valid on every rank (a clean start if there is none)' },
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

Examples:
  molotof run examples/jacobi/jacobi.ts --ranks 4 --n 1024 --iterations 500
  molotof run examples/jacobi/jacobi.ts --ranks 2 --checkpoint every:50      # checkpoint every 50 sweeps
  molotof run examples/jacobi/jacobi.ts --ranks 2 --checkpoint every:50 --resume   # after a crash`

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
  const checkpoint = faultTolerance(program, args.flags)
  const result = await launch(program, {
    ranks,
    argv: args.rest,
    checkpoint,
    onLog: (_rank, text) => {
      if (!quiet) out(text)
    },
    onCheckpoint: (e) => {
      if (!quiet) {
        out(`checkpoint ${e.seq} committed: skeleton ${e.skeleton}, step ${e.step}, ${formatBytes(e.totalBytes)} on ${ranks} rank(s) in ${e.ms.toFixed(0)} ms`)
      }
    },
  })
  if (args.flags.json) out(JSON.stringify(result.value, jsonReplacer, 2))
  else out(result.text ?? JSON.stringify(result.value, jsonReplacer, 2))
  if (!quiet && !args.flags.json) out(`(${ranks} rank${ranks > 1 ? 's' : ''}, wall ${(result.wallMs / 1000).toFixed(3)} s)`)
  return 0
}

/** Checkpointing is on when a policy is given or a resume is asked for. */
function faultTolerance(program: string, flags: Record<string, string | number | boolean>): FaultToleranceConfig | undefined {
  const policy = parsePolicy(String(flags.checkpoint))
  const resume = flags.resume === true
  if ('kind' in policy && policy.kind === 'off' && !resume) return undefined
  const keep = flags.keep as number
  if (!Number.isInteger(keep) || keep < 1) throw new ConfigError(`--keep must be a positive integer (got ${keep})`)
  const dir = typeof flags['checkpoint-dir'] === 'string' ? flags['checkpoint-dir'] : join('.molotof', basename(program).replace(/\.[^.]+$/, ''))
  return { dir: resolve(dir), policy, keep, resume }
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`
  return `${(n / 1024 ** 3).toFixed(2)} GiB`
}

function jsonReplacer(_k: string, v: unknown): unknown {
  if (ArrayBuffer.isView(v)) return `<${v.constructor.name} of ${(v as Float64Array).length}>`
  return v
}
