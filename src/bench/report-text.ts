import type { BenchReport } from './runner.js'
import { table } from './stats.js'
import { repeatsOf, type BenchSummary } from './summarize.js'

const mib = (b: number | undefined) => (b === undefined ? '-' : (b / 2 ** 20).toFixed(2))
const ms = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(x < 10 ? 2 : 0))

/** The terminal tables of `molotof bench`. */
export function textReport(r: BenchReport, s: BenchSummary): string {
  const out: string[] = []
  out.push(
    `molotof bench: ${r.program} ${r.argv.join(' ')} — ${r.ranks} ranks (${r.transport}), ${r.steps} supersteps, ` +
      `${repeatsOf(r)} repeats, ${r.async ? 'background checkpoints, ' : ''}${r.level === 'memory' ? 'memory level, ' : ''}${r.machine.cpus} × ${r.machine.model}, Node ${r.machine.node}, ${r.date}`,
  )
  out.push('')
  out.push('Runtime and checkpoints (runtime from the end of the first superstep to the end of the run):')
  out.push(
    table(
      ['contents', 'ckpts', 'runtime ms min', 'median', 'max', 'overhead %', 'MiB/rank', 'MiB total', 'write ms', 'MiB/s', 'system MiB/rank', 'system / ckpt'],
      s.configs.map((c) => [
        c.contents,
        c.contents === 'none' ? '0' : `${c.placed}${c.placed !== c.requested ? ` of ${c.requested}` : ''}`,
        ms(c.runtime.min),
        ms(c.runtime.median),
        ms(c.runtime.max),
        c.contents === 'none' ? '-' : c.belowNoise ? 'below noise' : c.overheadPct.toFixed(1),
        mib(c.bytesPerRank),
        mib(c.bytesTotal),
        ms(c.writeMs),
        c.throughputMiBs === undefined ? '-' : c.throughputMiBs.toFixed(0),
        mib(c.systemBytesPerRank),
        c.systemBytesPerRank && c.bytesPerRank ? (c.systemBytesPerRank / c.bytesPerRank).toFixed(2) : '-',
      ]),
    ),
  )
  if (s.noiseMs !== undefined) {
    const base = s.configs.find((c) => c.contents === 'none')!.runtime.median
    out.push(
      `Noise: the runs without fault tolerance spread over ${ms(s.noiseMs)} ms (${((100 * s.noiseMs) / base).toFixed(1)} %); ` +
        'a difference within it reads "below noise" (more --repeats or a larger problem measure it).',
    )
  }
  const def = s.configs.find((c) => c.contents === 'default' && c.bytesPerRank)
  const min = s.configs.find((c) => c.contents === 'minimal' && c.bytesPerRank)
  if (def && min) {
    out.push('')
    out.push(
      `Checkpoint size per rank: minimal ${mib(min.bytesPerRank)} MiB, default ${mib(def.bytesPerRank)} MiB (minimal/default ${(min.bytesPerRank! / def.bytesPerRank!).toFixed(3)})` +
        (min.systemBytesPerRank ? `, system-level ${mib(min.systemBytesPerRank)} MiB (minimal/system ${(min.bytesPerRank! / min.systemBytesPerRank).toFixed(3)})` : ''),
    )
  }
  if (s.derived.length) {
    out.push('')
    out.push('Derived from the measured cost of one checkpoint (median of the pairwise slopes of median runtime against checkpoints per run, over all counts):')
    out.push(
      table(
        ['contents', 'cost/ckpt ms', 'overhead, every 2 s', 'Young/Daly interval (MTBF 1 h)', 'overhead there'],
        s.derived.map((d) =>
          d.belowNoise
            ? [d.contents, 'below noise', '-', `${d.youngDalyIntervalS.toFixed(1)} s`, '-']
            : [d.contents, d.costMs.toFixed(1), `${d.every2sPct.toFixed(2)} %`, `${d.youngDalyIntervalS.toFixed(1)} s`, `${d.youngDalyPct.toFixed(3)} %`],
        ),
      ),
    )
  }
  const measured = s.recoveryBySpares.filter((x) => x.median)
  if (measured.length) {
    out.push('')
    out.push(`Recovery after a failure injected at superstep ${measured[0].runs[0].failedStep} (median of ${measured[0].runs.length}; failure → end of the first new superstep, and its phases):`)
    out.push(
      table(
        ['ranks after the failure', 'failure → 1st step', 'detection', 'stop', 'spawn/spare', 'negotiate', 'load', 'replay', 'restore', '1st step', 'work lost', 'same result'],
        measured.map(({ spares, median: m, allSame }) => [
          spares ? `${spares} warm spare(s), survivors kept` : 'all spawned (no spares)',
          `${ms(m!.toFirstStepMs)} ms`,
          `${ms(m!.detectionMs)} ms`,
          `${ms(m!.stopMs)} ms`,
          `${ms(m!.spawnMs)} ms`,
          `${ms(m!.negotiateMs)} ms`,
          `${ms(m!.loadMs)} ms`,
          `${ms(m!.replayMs)} ms`,
          `${ms(m!.restoreMs)} ms`,
          `${ms(m!.firstStepMs)} ms`,
          `${m!.lostSteps} steps (${ms(m!.lostMs)} ms)`,
          allSame ? 'yes' : 'NO',
        ]),
      ),
    )
  }
  if (r.notes.length) {
    out.push('')
    for (const n of r.notes) out.push(`note: ${n}`)
  }
  return out.join('\n')
}
