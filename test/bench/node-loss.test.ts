// bench:node-loss in its quick mode (one repeat, a small grid): it runs under mpirun --enable-recovery and writes a
// record whose figures are the phases of each recovery, by case. A smoke check of the record's shape and sanity,
// not a timing test: no figure is compared with a target here.
import { execFile } from 'node:child_process'
import { existsSync, readFileSync, rmSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import type { BenchRecord } from '../../bench/record.js'

const MPIRUN = '/usr/bin/mpirun'
const haveMpirun = existsSync(MPIRUN)
if (!haveMpirun) console.log(`bench:node-loss smoke test skipped: ${MPIRUN} is missing (apt-get install openmpi-bin)`)

function runBench(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('npx', ['tsx', 'bench/node-loss.ts', ...args], { maxBuffer: 2 ** 26 }, (e, stdout, stderr) => resolve({ code: e ? ((e as { code?: number }).code ?? 1) : 0, stdout, stderr }))
  })
}

describe.skipIf(!haveMpirun)('bench:node-loss --quick', () => {
  it('records, for a spare node, a silent node, a shrink and a relaunch, positive phases that add up, and where the survivors read the line', async () => {
    const r = await runBench(['--quick'])
    const out = r.stdout + r.stderr
    expect(r.code, out).toBe(0)
    const file = /record: (\S+\.json)/.exec(r.stderr)?.[1]
    expect(file, out).toBeDefined()
    const record = JSON.parse(readFileSync(file!, 'utf8')) as BenchRecord
    rmSync(file!)
    expect(record.bench).toBe('node-loss')
    const figure = (name: string) => record.figures.find((f) => f.name === name)
    for (const c of ['spare node (3 + 1 spare, node 1 lost)', 'silent node, spare (3 + 1 spare, node 1 stopped)', 'shrink (3 nodes, node 1 lost, 6 → 4 ranks)', 'exit 76 + relaunch --resume (2 nodes, node 1 lost)']) {
      const total = figure(`${c}: fault → first superstep`)
      expect(total, out).toMatchObject({ unit: 'ms', n: 1 })
      const phases = ['detection', 'decision', 'restore', 'first superstep'].map((p) => figure(`${c}: ${p}`)!.median)
      for (const p of phases) expect(p, `${c}: ${phases}`).toBeGreaterThan(0)
      // The phases are measured apart (event times against the bench's clock, the ranks' own figures): they add up to the whole within clock grain.
      expect(Math.abs(phases.reduce((a, b) => a + b, 0) - total!.median), `${c}: ${phases} against ${total!.median}`).toBeLessThan(50)
      // A loss detected by a closed connection: well under the whole recovery.
      expect(phases[0], c).toBeLessThan(total!.median)
    }
    // A stopped node is noticed by its silence only: past the run's --node-timeout (3 s in the quick mode, counted from the last message heard, a beat before the stop), which the record holds next to it.
    const silent = 'silent node, spare (3 + 1 spare, node 1 stopped)'
    expect(figure(`${silent}: --node-timeout`)?.median, out).toBe(3_000)
    expect(figure(`${silent}: detection`)!.median, out).toBeGreaterThan(2_900)
    expect(figure(`${silent}: fault → first superstep`)?.headline, out).toMatch(/hung, silent/)
    expect(r.stdout).toMatch(/a silent node \(stopped\) with a spare node, fault → first superstep ≤ --node-timeout \+ 1 s: median \d+ ms.*--node-timeout 3000 ms/)
    // The spare node's ranks got their files over the network; when the events name only the memory level besides the
    // partner copies, the survivors read nothing from disk, and the record says 0.
    const spareLevels = /spare node \(3 \+ 1 spare, node 1 lost\)\s+\d+.*?\s(\S+)\s+\S+\s+\S+\s+\S+\s*$/m.exec(r.stdout)?.[1]
    expect(spareLevels, r.stdout).toBeDefined()
    const network = figure('spare node (3 + 1 spare, node 1 lost): read over the network')
    expect(network?.median, out).toBeGreaterThan(0)
    if (spareLevels === 'memory+partner') expect(figure('spare node (3 + 1 spare, node 1 lost): read from disk')?.median, out).toBe(0)
    // The shrink restores elastically: its own count of payload bytes read covers at least the 6 old rank files' payloads.
    expect(figure('shrink (3 nodes, node 1 lost, 6 → 4 ranks): elastic restore, payload read')?.median, out).toBeGreaterThanOrEqual((6 * 64 * 0.9) / 1024)
    expect(r.stdout).toMatch(/every in-run recovery ended with exit 0 and one checksum: yes/)
  }, 240_000)
})
