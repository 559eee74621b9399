// Saves the charts of a bench report as PNG files (the README's docs/results/*.png):
//
//   node scripts/report-charts.mjs bench-out/jacobi/bench-report.html docs/results/jacobi
//
// writes docs/results/jacobi-sizes.png, -runtime.png and -recovery.png. Opens the
// report in Debian's headless Chromium (as the HTML report test does) and
// screenshots each chart once Chart.js has drawn it.
import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { chromium } from 'playwright-core'

const [report, prefix] = process.argv.slice(2)
if (!report || !prefix) {
  console.error('usage: node scripts/report-charts.mjs <bench-report.html> <output prefix, e.g. docs/results/jacobi>')
  process.exit(2)
}
if (!existsSync(report)) {
  console.error(`report-charts: ${report} does not exist (run molotof bench first)`)
  process.exit(2)
}
const CHROMIUM = '/usr/bin/chromium'
if (!existsSync(CHROMIUM)) {
  console.error(`report-charts: ${CHROMIUM} is missing (apt-get install chromium)`)
  process.exit(1)
}

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] })
try {
  const page = await browser.newPage({ viewport: { width: 1000, height: 1800 }, deviceScaleFactor: 1 })
  await page.goto(`file://${resolve(report)}`)
  await page.waitForFunction(() => window.__molotofCharts !== undefined, null, { timeout: 10_000 })
  const charts = await page.evaluate(() => window.__molotofCharts)
  for (const { id, points } of charts) {
    // Charts with no data (e.g. a report made with --no-failure has no recovery) are skipped.
    if (points === 0) continue
    const file = `${prefix}-${id}.png`
    await page.locator(`#${id}`).screenshot({ path: file })
    console.log(`wrote ${file}`)
  }
} finally {
  await browser.close()
}
