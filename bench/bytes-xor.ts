/**
 * The XOR part of `npm run bench:bytes`: what redundancy holds and costs,
 * `partner` against `xor:G`.
 *
 * 1. Per checkpoint, in a real run (Jacobi on `nodes` thread ranks, each a
 *    "node" with its own directory, as the tests make them): the bytes of a
 *    rank's own file, of the partner copy it holds, of the parity slice it
 *    holds with xor:G — measured on the files the run left.
 * 2. The time to rebuild a lost node's files at --resume (from the log line
 *    of the rebuild: transfers, XOR, checksums, write).
 * 3. The XOR itself, in one thread (no transfers): parity of a set of 16 MiB
 *    files and the rebuild of a lost node's 2 × 16 MiB, for G = 4.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import type { FaultToleranceConfig } from '../src/checkpoint/config.js'
import type { CheckpointEvent } from '../src/checkpoint/events.js'
import { encodeParity, rebuildMember } from '../src/checkpoint/redundancy/xor.js'
import { launch } from '../src/runtime/launch/launcher.js'
import { summary } from '../src/bench/stats.js'
import type { Recorder } from './record.js'

export interface XorBenchOptions {
  /** Jacobi grid side (each of `nodes` ranks holds n/nodes rows). */
  n: number
  nodes: number
  setSize: number
  repeats: number
}

const MiB = 2 ** 20
const JACOBI = 'examples/jacobi/jacobi.ts'

/** A lost node's 2 × 16 MiB rebuilt, in a run and in one thread, into `record` (the matrix of bench/bytes.ts measures the rest). */
export async function xorRebuildFigures(record: Recorder, repeats: number): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'molotof-bench-xor-'))
  try {
    await nodeRebuild(record, root, repeats)
    xorAlone(record, repeats)
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
}

/** Run the XOR figures into `record`: partner against xor:G on Jacobi alone, then xorRebuildFigures' parts. */
export async function xorFigures(record: Recorder, o: XorBenchOptions): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'molotof-bench-xor-'))
  try {
    console.log(`\n## Redundancy: partner against xor:${o.setSize} (Jacobi ${o.n}², ${o.nodes} nodes of 1 rank, each its own directory)\n`)
    const held: Record<'own' | 'partner' | 'xor', number[]> = { own: [], partner: [], xor: [] }
    const rebuildMs: number[] = []
    // Checkpoint point to the copies' commit, in the background: partner copies against the parity exchange.
    const copyMs: Record<'partner' | 'xor', number[]> = { partner: [], xor: [] }
    const iterations = 20
    const argv = ['--n', String(o.n), '--iterations', String(iterations)]
    for (let rep = 0; rep < o.repeats; rep++) {
      for (const kind of ['partner', 'xor'] as const) {
        const name = `${kind}${rep}-`
        const cfg: FaultToleranceConfig = {
          dir: join(root, `${name}{rank}`),
          policy: { every: 10 },
          keep: 1,
          resume: false,
          ...(kind === 'partner' ? { partner: { ranksPerNode: 1 } } : { xor: { setSize: o.setSize, ranksPerNode: 1 } }),
        }
        const onCheckpoint = (e: CheckpointEvent) => {
          if (e.level === kind) copyMs[kind].push(e.ms)
        }
        await launch(JACOBI, { ranks: o.nodes, argv, onLog: () => {}, onCheckpoint, checkpoint: { ...cfg, interrupt: { skeleton: 0, step: 2 * 10 - 1 } } }).catch(() => undefined)
        const d = join(root, `${name}0`)
        const newest = readdirSync(d).filter((f) => f.startsWith('ckpt-')).sort().pop()!
        if (kind === 'partner') {
          held.own.push(statSync(join(d, newest, 'rank-0.mlf')).size)
          held.partner.push(statSync(join(d, 'partner', newest, `rank-${o.nodes - 1}.mlf`)).size)
        } else {
          held.xor.push(statSync(join(d, 'xor', newest, 'rank-0.mlf')).size)
          // Node 1 lost with its directory: --resume rebuilds its file from the others.
          rmSync(join(root, `${name}1`), { recursive: true })
          const logs: string[] = []
          await launch(JACOBI, { ranks: o.nodes, argv, onLog: (_r, t) => logs.push(t), checkpoint: { ...cfg, resume: true } })
          const m = /rebuilt the lost files of checkpoint \d+ from their XOR sets: .* \((\d+) ms, checksums verified\)/.exec(logs.join('\n'))
          if (m) rebuildMs.push(Number(m[1]))
        }
      }
    }
    const own = held.own[0]
    console.log('| per rank and checkpoint | bytes | share of its own file |')
    console.log('|---|---:|---:|')
    console.log(`| own file | ${own} | 1 |`)
    console.log(`| partner copy held | ${held.partner[0]} | ${(held.partner[0] / own).toFixed(3)} |`)
    console.log(`| xor:${o.setSize} parity slice held | ${held.xor[0]} | ${(held.xor[0] / own).toFixed(3)} (1/(G−1) = ${(1 / (o.setSize - 1)).toFixed(3)}) |`)
    record.figure(`redundancy held per rank, partner (share of a checkpoint)`, held.partner.map((b, i) => b / held.own[i]), '×')
    record.figure(`redundancy held per rank, xor:${o.setSize} (share of a checkpoint)`, held.xor.map((b, i) => b / held.own[i]), '×', { target: `≤ 1/(G−1) = ${(1 / (o.setSize - 1)).toFixed(3)} (+ a header)` })
    console.log(`\nbackground, checkpoint point to copies committed: partner median ${median(copyMs.partner).toFixed(0)} ms, xor:${o.setSize} median ${median(copyMs.xor).toFixed(0)} ms`)
    record.figure('partner copies: checkpoint point to committed (background)', copyMs.partner, 'ms')
    record.figure(`xor:${o.setSize} parity slices: checkpoint point to committed (background)`, copyMs.xor, 'ms')
    if (rebuildMs.length > 0) {
      console.log(`\nrebuild of a lost node's file at --resume (${(own / MiB).toFixed(1)} MiB, a file's worth from each of ${o.setSize - 1} nodes, XOR, checksums, write): median ${median(rebuildMs)} ms`)
      record.figure(`rebuild of a lost node's file at --resume (${(own / MiB).toFixed(1)} MiB, xor:${o.setSize})`, rebuildMs, 'ms')
    }
    await nodeRebuild(record, root, o.repeats)
    xorAlone(record, o.repeats)
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
}

/**
 * A lost node's 2 × 16 MiB rebuilt in a run: Jacobi 4096² on 4 "nodes" of 2
 * ranks (16 MiB files), xor:4; node 1's two directories deleted, the
 * --resume's log line gives the rebuild's time (contributions sent by the
 * three other nodes, XOR, checksums of the rebuilt files, their writes).
 */
async function nodeRebuild(record: Recorder, root: string, repeats: number): Promise<void> {
  const argv = ['--n', '4096', '--iterations', '10']
  const ms: number[] = []
  let bytes = 0
  for (let rep = 0; rep < repeats; rep++) {
    const cfg: FaultToleranceConfig = { dir: join(root, `node${rep}-{rank}`), policy: { every: 5 }, keep: 1, resume: false, xor: { setSize: 4, ranksPerNode: 2 } }
    await launch(JACOBI, { ranks: 8, argv, onLog: () => {}, checkpoint: { ...cfg, interrupt: { skeleton: 0, step: 4 } } }).catch(() => undefined)
    bytes = statSync(join(root, `node${rep}-2`, 'ckpt-00000000', 'rank-2.mlf')).size
    for (const r of [2, 3]) rmSync(join(root, `node${rep}-${r}`), { recursive: true })
    const logs: string[] = []
    await launch(JACOBI, { ranks: 8, argv, onLog: (_r, t) => logs.push(t), checkpoint: { ...cfg, resume: true, resumeRequest: 'required' } })
    const m = /rebuilt the lost files of checkpoint \d+ from their XOR sets: rank 2 from .* \((\d+) ms, checksums verified\)/.exec(logs.join('\n'))
    if (m) ms.push(Number(m[1]))
    for (let r = 0; r < 8; r++) rmSync(join(root, `node${rep}-${r}`), { recursive: true, force: true })
  }
  if (ms.length === 0) return
  console.log(`\nrebuild of a lost node's 2 × ${(bytes / MiB).toFixed(1)} MiB at --resume (4 nodes × 2 ranks, xor:4, threads): median ${median(ms)} ms`)
  record.figure(`rebuild of a lost node's 2 × ${(bytes / MiB).toFixed(0)} MiB in a run (4 nodes × 2 ranks, xor:4)`, ms, 'ms', { headline: `a lost node's 2 × ${(bytes / MiB).toFixed(0)} MiB rebuilt from XOR parity (xor:4, at --resume)`, target: '≤ 300 ms' })
}

/** Parity and rebuild of float64 grids in one thread, G = 4: a set of 4 nodes of 2 × 16 MiB each. */
function xorAlone(record: Recorder, repeats: number): void {
  const g = 4
  const perNode = 2
  const bytes = 16 * MiB
  // Two files per node (its two ranks), each in its own set: set k holds rank k of every node.
  const sets = Array.from({ length: perNode }, () =>
    Array.from({ length: g }, () => {
      const grid = new Float64Array(bytes / 8)
      for (let i = 0; i < grid.length; i++) grid[i] = Math.sin(i * 1e-3) + i * 1e-9
      return new Uint8Array(grid.buffer)
    }),
  )
  const encodeMs: number[] = []
  const rebuildMs: number[] = []
  for (let rep = 0; rep < Math.max(3, repeats); rep++) {
    let t = performance.now()
    const slices = sets.map((files) => encodeParity(files))
    encodeMs.push((performance.now() - t) / (g * perNode))
    t = performance.now()
    // Node 1 lost: one member of each set.
    for (const [k, files] of sets.entries()) {
      const back = rebuildMember(1, files.map((f, i) => (i === 1 ? undefined : f)), slices[k].map((s, i) => (i === 1 ? undefined : s)), files.map((f) => f.byteLength))
      if (back.byteLength !== bytes || back[12345] !== files[1][12345]) throw new Error('bench: the rebuild gave other bytes')
    }
    rebuildMs.push(performance.now() - t)
  }
  console.log(`\nXOR alone (one thread, no transfers), G = ${g}: parity work per rank file of 16 MiB ${median(encodeMs).toFixed(1)} ms; a lost node's 2 × 16 MiB rebuilt in ${median(rebuildMs).toFixed(1)} ms`)
  record.figure('XOR parity work per 16 MiB rank file (one thread, G = 4)', encodeMs, 'ms')
  record.figure("rebuild of a lost node's 2 × 16 MiB (one thread, G = 4, no transfers)", rebuildMs, 'ms', { target: '≤ 300 ms' })
}

/** The project's median (src/bench/stats.ts), as every bench reports it. */
const median = (xs: readonly number[]): number => summary([...xs]).median
