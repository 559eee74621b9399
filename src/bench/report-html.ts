import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import type { BenchReport } from './runner.js'
import { repeatsOf, type BenchSummary } from './summarize.js'

// The built CLI carries Chart.js as this constant (tsup.config.ts `define`), so
// an installed molotof does not depend on chart.js; run from the sources, it is
// read from node_modules, where chart.js is a devDependency.
declare const __MOLOTOF_CHART_JS__: string | undefined

/** Chart.js, inlined so the report is one self-contained file that opens offline. */
function chartJsSource(): string {
  if (typeof __MOLOTOF_CHART_JS__ === 'string') return __MOLOTOF_CHART_JS__
  const entry = createRequire(import.meta.url).resolve('chart.js')
  return readFileSync(join(dirname(entry), 'chart.umd.min.js'), 'utf8')
}

const esc = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!)

/**
 * A self-contained HTML report: three charts (checkpoint size per rank for
 * default / minimal / system-level; runtime and overhead against the number
 * of checkpoints; the recovery breakdown) and the tables, data embedded.
 */
export function htmlReport(r: BenchReport, s: BenchSummary, text: string): string {
  const mib = (b: number | undefined) => (b === undefined ? null : b / 2 ** 20)
  const def = s.configs.filter((c) => c.contents === 'default')
  const min = s.configs.filter((c) => c.contents === 'minimal')
  const none = s.configs.find((c) => c.contents === 'none')!
  const firstDef = def.find((c) => c.bytesPerRank)
  const firstMin = min.find((c) => c.bytesPerRank)
  const sizes = {
    labels: ['default', 'minimal', 'system-level'],
    values: [mib(firstDef?.bytesPerRank), mib(firstMin?.bytesPerRank), mib(firstMin?.systemBytesPerRank ?? firstDef?.systemBytesPerRank)],
  }
  const counts = [0, ...def.map((c) => c.placed)]
  const runtime = {
    labels: counts.map(String),
    defaultMs: [none.runtime.median, ...def.map((c) => c.runtime.median)],
    minimalMs: [none.runtime.median, ...min.map((c) => c.runtime.median)],
    // An overhead within the noise is no figure: a gap in its line.
    defaultPct: [0, ...def.map((c) => (c.belowNoise ? null : c.overheadPct))],
    minimalPct: [0, ...min.map((c) => (c.belowNoise ? null : c.overheadPct))],
  }
  // One bar per row of the recovery table (cold restart, warm spares), its phases stacked up to the first superstep.
  const rows = s.recoveryBySpares.filter((x) => x.median)
  const phases: [string, (m: NonNullable<BenchSummary['recovery']['median']>) => number][] = [
    ['detection', (m) => m.detectionMs],
    // stopMs runs from the failure: the detection is in it.
    ['stop', (m) => Math.max(0, (m.stopMs ?? 0) - m.detectionMs)],
    ['spawn / spare', (m) => m.spawnMs],
    ['negotiate', (m) => m.negotiateMs],
    ['load', (m) => m.loadMs],
    ['replay', (m) => m.replayMs],
    ['restore', (m) => m.restoreMs],
  ]
  const recovery = {
    labels: rows.map(({ spares }) => (spares ? `${spares} warm spare(s), survivors kept` : 'all spawned (no spares)')),
    phases: [
      ...phases.map(([label, of]) => [label, rows.map((x) => of(x.median!))] as const),
      [
        'first superstep',
        rows.map(({ median: m }) => Math.max(0, m!.toFirstStepMs - phases.reduce((sum, [, of]) => sum + (Number.isFinite(of(m!)) ? of(m!) : 0), 0))),
      ] as const,
    ],
  }
  const data = { sizes, runtime, recovery }
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>molotof bench — ${esc(r.program)}</title>
<style>
 body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222 }
 h1 { font-size: 1.4rem } h2 { font-size: 1.1rem; margin-top: 2rem }
 .chart { position: relative; height: 320px } pre { background: #f6f6f6; padding: 1rem; overflow-x: auto; font-size: 12px }
 .meta { color: #555 }
</style></head><body>
<h1>molotof bench: ${esc(r.program)} ${esc(r.argv.join(' '))}</h1>
<p class="meta">${r.ranks} ranks (${r.transport}), ${r.steps} supersteps, ${repeatsOf(r)} repeats · ${r.machine.cpus} × ${esc(r.machine.model)}, ${r.machine.memoryGiB} GiB, Node ${esc(r.machine.node)} · ${esc(r.date)}</p>
<h2>Checkpoint size per rank (MiB)</h2><div class="chart"><canvas id="sizes"></canvas></div>
<h2>Runtime and overhead against the number of checkpoints per run</h2><div class="chart"><canvas id="runtime"></canvas></div>
<h2>Recovery breakdown (ms, median)</h2><div class="chart"><canvas id="recovery"></canvas></div>
<h2>Figures</h2><pre>${esc(text)}</pre>
<script>${chartJsSource()}</script>
<script id="bench-data" type="application/json">${JSON.stringify(data).replace(/</g, '\\u003c')}</script>
<script>
(function () {
  const data = JSON.parse(document.getElementById('bench-data').textContent)
  Chart.defaults.animation = false
  const charts = []
  charts.push(new Chart(document.getElementById('sizes'), {
    type: 'bar',
    data: { labels: data.sizes.labels, datasets: [{ label: 'MiB per rank', data: data.sizes.values, backgroundColor: ['#e07b39', '#3a7dc9', '#8a8a8a'] }] },
    options: { maintainAspectRatio: false, plugins: { legend: { display: false } }, scales: { y: { beginAtZero: true, title: { display: true, text: 'MiB' } } } },
  }))
  charts.push(new Chart(document.getElementById('runtime'), {
    type: 'line',
    data: {
      labels: data.runtime.labels,
      datasets: [
        { label: 'runtime, default (ms)', data: data.runtime.defaultMs, borderColor: '#e07b39', yAxisID: 'ms' },
        { label: 'runtime, minimal (ms)', data: data.runtime.minimalMs, borderColor: '#3a7dc9', yAxisID: 'ms' },
        { label: 'overhead, default (%)', data: data.runtime.defaultPct, borderColor: '#e07b39', borderDash: [5, 4], yAxisID: 'pct' },
        { label: 'overhead, minimal (%)', data: data.runtime.minimalPct, borderColor: '#3a7dc9', borderDash: [5, 4], yAxisID: 'pct' },
      ],
    },
    options: { maintainAspectRatio: false, scales: {
      x: { title: { display: true, text: 'checkpoints per run' } },
      ms: { position: 'left', title: { display: true, text: 'runtime (ms)' } },
      pct: { position: 'right', title: { display: true, text: 'overhead (%)' }, grid: { drawOnChartArea: false } },
    } },
  }))
  charts.push(new Chart(document.getElementById('recovery'), {
    type: 'bar',
    data: { labels: data.recovery.labels, datasets: data.recovery.phases.map(([label, v], i) => ({ label, data: v, backgroundColor: ['#c0392b', '#d35400', '#8e44ad', '#2980b9', '#16a085', '#27ae60', '#f39c12', '#7f8c8d'][i % 8] })) },
    options: { indexAxis: 'y', maintainAspectRatio: false, scales: { x: { stacked: true, title: { display: true, text: 'ms' } }, y: { stacked: true } } },
  }))
  // For automated checks: what each chart drew.
  window.__molotofCharts = charts.map((c) => ({ id: c.canvas.id, labels: c.data.labels, points: c.data.datasets.reduce((n, d) => n + d.data.filter((x) => x !== null && Number.isFinite(x)).length, 0) }))
})()
</script>
</body></html>
`
}
