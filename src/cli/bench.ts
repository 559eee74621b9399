import { mkdirSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { htmlReport } from '../bench/report-html.js'
import { textReport } from '../bench/report-text.js'
import { runBench } from '../bench/runner.js'
import { summarize } from '../bench/summarize.js'
import { ConfigError } from '../errors.js'
import { TRANSPORTS, type Transport } from '../runtime/group.js'
import { formatFlags, splitArgs, type FlagSpec } from './args.js'

const FLAGS: Record<string, FlagSpec> = {
  ranks: { kind: 'int', help: 'number of ranks', default: 2 },
  transport: { kind: 'string', help: 'processes (per-rank system-level figures) or threads', default: 'processes' },
  counts: { kind: 'string', help: 'checkpoints per run to measure, comma-separated', default: '2,5,10,20' },
  repeats: { kind: 'int', help: 'repeats of every configuration (after one warm-up run)', default: 3 },
  'no-failure': { kind: 'boolean', help: 'skip the run with an injected failure' },
  out: { kind: 'string', help: 'directory for bench-report.json and bench-report.html', default: 'bench-out' },
  quick: { kind: 'boolean', help: 'small and fast: one repeat, counts 2,5 (checks that the report is produced)' },
  'async-checkpoints': { kind: 'boolean', help: 'checkpointed configurations write in the background' },
}

const USAGE = `Usage: molotof bench <program> [options] [program options]

Measures, side by side in one invocation and on the same problem:
  (a) no fault tolerance; (b) checkpoints with the default contents (both
  domains); (c) checkpoints with the program's own (minimal) registration —
  (b) and (c) at several checkpoint counts per run; (d) a run with a failure
  injected mid-run and recovered automatically.
Configurations are interleaved and repeated (min/median/max) after a warm-up.
Reports runtime and overhead, checkpoint sizes per rank and in total, the
size a system-level checkpointer would save (private resident memory of each
rank process, from /proc), write throughput, and the recovery breakdown.
Writes a table to the terminal, bench-report.json and bench-report.html.

Options:
${formatFlags(FLAGS)}

Example:
  molotof bench examples/jacobi/jacobi.ts --ranks 2 --n 2048 --iterations 400`

export async function benchCommand(argv: readonly string[], out: (s: string) => void, err: (s: string) => void): Promise<number> {
  const args = splitArgs(argv, FLAGS, 1)
  if (args.help) {
    out(USAGE)
    return 0
  }
  const [program] = args.positional
  if (!program) throw new ConfigError('molotof bench: name the program (see molotof bench --help)')
  const f = args.flags
  const transport = String(f.transport) as Transport
  if (!TRANSPORTS.includes(transport)) throw new ConfigError(`unknown transport "${transport}" (available: ${TRANSPORTS.join(', ')})`)
  const quick = f.quick === true
  const counts = (quick ? '2,5' : String(f.counts)).split(',').map((x) => Number(x.trim()))
  if (counts.some((c) => !Number.isInteger(c) || c < 0)) throw new ConfigError(`--counts needs comma-separated whole numbers (got "${String(f.counts)}")`)
  const outDir = resolve(String(f.out))
  try {
    mkdirSync(outDir, { recursive: true })
    writeFileSync(join(outDir, 'bench-report.json'), '')
  } catch (e) {
    throw new ConfigError(`cannot write the report to ${outDir}: ${(e as Error).message}`, { cause: e })
  }
  const report = await runBench({
    program,
    argv: args.rest,
    ranks: f.ranks as number,
    transport,
    counts,
    repeats: quick ? 1 : (f.repeats as number),
    failure: f['no-failure'] !== true,
    async: f['async-checkpoints'] === true,
    onNote: (t) => err(t),
  })
  const summary = summarize(report)
  const text = textReport(report, summary)
  out(text)
  writeFileSync(join(outDir, 'bench-report.json'), JSON.stringify({ report, summary }, null, 2))
  writeFileSync(join(outDir, 'bench-report.html'), htmlReport(report, summary, text))
  out(`\nreports: ${join(outDir, 'bench-report.json')}, ${join(outDir, 'bench-report.html')}`)
  return 0
}
