/**
 * Elastic restart: bytes read / bytes needed when a checkpoint of P ranks is
 * resumed on P′ (target ≤ 1.05 for 4 → 3), with the header bytes and the bytes
 * read only to verify checksums beside, and the restore time. In-process ranks
 * (runLocal): the figures are bytes, not speed.
 *
 *   npm run bench:elastic -- [--n 2048]
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { benchArgs } from './args.js'
import { openRecord } from './record.js'
import { runLocal, RunInterruptedError, type Program } from '../src/index.js'
import jacobi, { type JacobiResult } from '../examples/jacobi/jacobi.js'
import blocks from './programs/block-jacobi.js'

const USAGE = 'npm run bench:elastic -- [--n 2048]'
const { values } = benchArgs(USAGE, () => parseArgs({ options: { n: { type: 'string', default: '2048' } } }))
const n = Number(values.n)
const root = mkdtempSync(join(tmpdir(), 'molotof-bench-elastic-'))
const mib = (b: number) => (b / 2 ** 20).toFixed(2)
const record = openRecord('elastic', 'Elastic restart: bytes read against bytes needed')

interface Row {
  program: string
  from: number
  to: number
  needed: number
  read: number
  headers: number
  verify: number
  restoreMs: number
  same: boolean
}

/** Checkpoint `program` on `from` ranks (stopped after step 3), resume on `to`, and read the figures rank 0 logs. */
async function measure(name: string, program: Program, argv: string[], from: number, to: number, result: (r: unknown) => unknown): Promise<Row> {
  const dir = join(root, `${name}-${from}-${to}`)
  const cfg = { dir, policy: { every: 2 }, keep: 1, resume: false }
  await runLocal(program, { ranks: from, argv, checkpoint: { ...cfg, interrupt: { skeleton: 0, step: 3 } } }).catch((e: unknown) => {
    if (!(e instanceof RunInterruptedError)) throw e
  })
  const logs: string[] = []
  const resumed = await runLocal(program, { ranks: to, argv, checkpoint: { ...cfg, resume: true }, onLog: (r, t) => r === 0 && logs.push(t) })
  const reference = await runLocal(program, { ranks: to, argv })
  const text = logs.join('\n')
  const m = /read (\d+) payload bytes for (\d+) needed .*?, (\d+) header bytes, (\d+) bytes read only to verify/.exec(text)
  const t = /restored in ([\d.]+) ms/.exec(text)
  if (!m || !t) throw new Error(`no elastic restore figures in the log:\n${text}`)
  rmSync(dir, { recursive: true, force: true })
  return {
    program: name,
    from,
    to,
    read: Number(m[1]),
    needed: Number(m[2]),
    headers: Number(m[3]),
    verify: Number(m[4]),
    restoreMs: Number(t[1]),
    same: JSON.stringify(result(resumed[0])) === JSON.stringify(result(reference[0])),
  }
}

try {
  const rows: Row[] = []
  const stripArgv = ['--n', String(n), '--iterations', '6']
  for (const [from, to] of [[4, 3], [3, 4], [4, 1], [4, 5]]) rows.push(await measure('jacobi (row strips)', jacobi as Program, stripArgv, from, to, (r) => {
      const { checksum, residual } = r as JacobiResult
      return [checksum, residual]
    }))
  for (const [from, to] of [[4, 3], [4, 6]]) rows.push(await measure('block-jacobi (2-D blocks)', blocks as Program, ['--n', String(n), '--iterations', '6'], from, to, (r) => r))
  console.log(`elastic restart, ${n}×${n} float64 interior (${mib(n * n * 8)} MiB), checkpoint after step 3, in-process ranks`)
  console.log('program                     P → P′  needed MiB  read MiB  read/needed  (read+headers)/needed  verify-only B  restore ms  result')
  for (const r of rows) {
    console.log(
      `${r.program.padEnd(27)} ${`${r.from} → ${r.to}`.padEnd(7)} ${mib(r.needed).padStart(10)} ${mib(r.read).padStart(9)} ${(r.read / r.needed).toFixed(4).padStart(12)} ` +
        `${((r.read + r.headers) / r.needed).toFixed(4).padStart(22)} ${String(r.verify).padStart(14)} ${r.restoreMs.toFixed(1).padStart(11)}  ${r.same ? 'same as uninterrupted' : 'DIFFERS'}`,
    )
  }
  const target = rows[0]
  for (const r of rows) record.figure(`${r.program} ${r.from} → ${r.to}: bytes read / bytes needed`, r.read / r.needed, '×', r === target ? { headline: `elastic restart ${r.from} → ${r.to} ranks, Jacobi ${n}²: bytes read / needed`, target: '≤ 1.05' } : {})
  for (const r of rows) record.figure(`${r.program} ${r.from} → ${r.to}: restore`, r.restoreMs, 'ms')
  console.log(`\n4 → 3 ranks (jacobi): bytes read / bytes needed = ${(target.read / target.needed).toFixed(4)} (target ≤ 1.05), with headers ${((target.read + target.headers) / target.needed).toFixed(4)}`)
} finally {
  rmSync(root, { recursive: true, force: true })
}
record.save()
