import { mkdirSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { htmlReport } from '../bench/report-html.js'
import { textReport } from '../bench/report-text.js'
import { runBench } from '../bench/runner.js'
import { summarize } from '../bench/summarize.js'
import { ConfigError } from '../errors.js'
import { TRANSPORTS } from '../runtime/group.js'
import { option } from '../skeletons/options.js'
import { HELP_OPTION, parseProgramCommand } from './args.js'
import { formatHelp, STARTER_EXAMPLES_FROM } from './help.js'

const BENCH_OPTIONS = {
  ranks: option.int(2, 'number of ranks', { min: 1 }),
  transport: option.choice(TRANSPORTS, 'processes', 'processes (per-rank system-level figures) or threads'),
  counts: option.string('2,5,10,20', 'checkpoints per run to measure, comma-separated'),
  repeats: option.int(3, 'repeats of every configuration (after one warm-up run)', { min: 1 }),
  noFailure: option.boolean(false, 'skip the run with an injected failure'),
  out: option.string('bench-out', 'directory for bench-report.json and bench-report.html'),
  quick: option.boolean(false, 'small and fast: one repeat, counts 2,5 (checks that the report is produced)'),
  asyncCheckpoints: option.boolean(false, 'checkpointed configurations write disk checkpoints through a memory copy flushed in the background'),
  level: option.choice(['disk', 'memory'] as const, 'disk', 'the level checkpointed configurations write to: the disk directory, or RAM only (the memory level)'),
  spares: option.int(1, 'the failure run is measured again with this many warm spares (0: cold restart only)', { min: 0 }),
  ...HELP_OPTION,
}

const BENCH_HELP = formatHelp({
  usage: 'molotof bench <program> [options] [program options]',
  about: `Measures, side by side in one invocation and on the same problem:
  (a) no fault tolerance; (b) checkpoints with the default contents (both
  domains); (c) checkpoints with the program's own (minimal) registration —
  (b) and (c) at several checkpoint counts per run; (d) a run with a failure
  injected mid-run and recovered automatically.
Configurations are interleaved and repeated (min/median/max) after a warm-up.
Reports runtime and overhead, checkpoint sizes per rank and in total, the
size a system-level checkpointer would save (private resident memory of each
rank process, from /proc), write throughput, and the recovery breakdown,
cold (every rank started again) and with warm spares (--spares).
Writes a table to the terminal, bench-report.json and bench-report.html.
The program's own options (molotof run --help <program>) follow the program.`,
  sections: [{ title: 'Options', specs: BENCH_OPTIONS }],
  exitCodes: [
    [0, 'done: the reports are written'],
    [1, 'a measured run failed'],
    [2, 'bad input (options, program file), refused before any computation'],
  ],
  examplesFrom: STARTER_EXAMPLES_FROM,
  examples: ['molotof bench relax.ts --ranks 2 --n 2048 --sweeps 400'],
})

export async function benchCommand(argv: readonly string[], out: (s: string) => void, err: (s: string) => void): Promise<number> {
  const { values: f, program, programArgv } = parseProgramCommand(BENCH_OPTIONS, argv)
  if (f.help) {
    out(BENCH_HELP)
    return 0
  }
  if (!program) throw new ConfigError('molotof bench: name the program (see molotof bench --help)')
  const { transport, quick } = f
  const counts = (quick ? '2,5' : f.counts).split(',').map((x) => Number(x.trim()))
  if (counts.some((c) => !Number.isInteger(c) || c < 0)) throw new ConfigError(`--counts needs comma-separated whole numbers (got "${f.counts}")`)
  const outDir = resolve(f.out)
  try {
    mkdirSync(outDir, { recursive: true })
    writeFileSync(join(outDir, 'bench-report.json'), '')
  } catch (e) {
    throw new ConfigError(`cannot write the report to ${outDir}: ${(e as Error).message}`, { cause: e })
  }
  const report = await runBench({
    program,
    argv: programArgv,
    ranks: f.ranks,
    transport,
    counts,
    repeats: quick ? 1 : f.repeats,
    failure: !f.noFailure,
    async: f.asyncCheckpoints,
    level: f.level,
    spares: f.noFailure ? 0 : Math.min(f.spares, f.ranks),
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
