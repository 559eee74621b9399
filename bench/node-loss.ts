/**
 * A node lost inside the run, under `mpirun --enable-recovery` with every
 * "node" on this host (`{node}` directories): Jacobi, 2 ranks per node, the
 * memory level on; one working node's whole process tree (its supervisor and
 * its ranks) SIGKILLed (or SIGSTOPped: hung) mid-run, its directories deleted with it. Time from
 * the fault to the end of the first new superstep, split by the times of the
 * events node 0 writes (this host's clock, as the bench's): detection (fault
 * → `node-lost`), decision (→ the new attempt's `start`: the membership
 * chosen, the survivors stopped), restore (→ `resume`: ranks started or
 * taken from the spare node, recovery line agreed, read and restored; the
 * ranks' own figures split it) and the first superstep (→ `recovered`). For
 * the relaunch the decision runs to the first run's end (exit 76, mpirun
 * gone) and the restore from there to the relaunched run's `resume`. Where
 * the ranks read the line comes from the `resume` event's levels, the rank
 * files' size (`checkpoint` events) and the elastic restore's log line.
 * Four ways:
 *
 *   spare     3 working nodes + 1 spare node (--spare-nodes 1), node 1 lost: the spare takes its ranks
 *   silent    as spare, but node 1's processes SIGSTOPped (hung): no connection resets, node 0 counts it lost
 *             once it has been silent past --node-timeout. The run's default --node-timeout (30 s) is kept, as
 *             a batch script would (--node-timeout to change it; 3 s with --quick): the figure is read against
 *             it (printed next to it), target ≤ timeout + 1 s.
 *             Once the run has ended the stopped processes are continued (a stopped node that wakes reads that
 *             it was dropped and exits 76) and whatever is left is killed, so that mpirun ends.
 *   shrink    3 working nodes, node 1 lost: the other two go on with 4 ranks (elastic, in the run)
 *   relaunch  today's other path: 2 nodes, node 1 lost, exit 76 (status file), then `mpirun -np 1 … --resume`
 *             with the same 4 ranks; fault → the relaunched run's first superstep
 *
 *   npm run bench:node-loss -- [--repeats 5] [--mib 16] [--cases spare,silent,shrink,relaunch] [--node-timeout 30s] [--quick]
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { benchArgs } from './args.js'
import { openRecord } from './record.js'
import { summary, table } from '../src/bench/stats.js'
import { processesOfNode } from './mpirun-nodes.js'

const USAGE = 'npm run bench:node-loss -- [--repeats 5] [--mib 16] [--iterations 150] [--cases spare,silent,shrink,relaunch] [--node-timeout 30s] [--quick] [--keep]'
const { values } = benchArgs(USAGE, () =>
  parseArgs({
    options: {
      repeats: { type: 'string', default: '5' },
      mib: { type: 'string', default: '16' },
      iterations: { type: 'string' },
      every: { type: 'string' },
      cases: { type: 'string', default: 'spare,silent,shrink,relaunch' },
      'node-timeout': { type: 'string' },
      quick: { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
    },
  }),
)
const MPIRUN = '/usr/bin/mpirun'
const quick = values.quick!
const repeats = quick ? 1 : Number(values.repeats)
/** Checkpointed bytes per rank (Jacobi keeps one n × n/P grid of float64 in a checkpoint). */
const bytesPerRank = quick ? 64 * 1024 : Number(values.mib) * 2 ** 20
const iterations = Number(values.iterations ?? (quick ? 300 : 150))
const memoryEvery = Number(values.every ?? (quick ? 20 : 10))
/** The runs' --node-timeout: the run's default unless given; 3 s in the quick mode, whose silent case would otherwise wait 30 s. */
const nodeTimeout = values['node-timeout'] ?? (quick ? '3s' : undefined)
const RANKS_PER_NODE = 2
if (!existsSync(MPIRUN)) {
  console.error(`bench:node-loss needs ${MPIRUN} (apt-get install openmpi-bin)`)
  process.exit(2)
}
if (!(repeats >= 1) || !(bytesPerRank > 0) || !(iterations > 0) || !(memoryEvery > 0)) {
  console.error(`bad option\n\nusage: ${USAGE}`)
  process.exit(2)
}

interface Case {
  name: string
  label: string
  nodes: number
  spareNodes: number
  /** The lost node's ranks end the run (exit 76) and the bench relaunches it with --resume. */
  relaunch: boolean
  /** How node 1 is lost: its processes killed (connections reset) or stopped (hung, silent). */
  fault: 'SIGKILL' | 'SIGSTOP'
}
const known: Record<string, Case> = {
  spare: { name: 'spare', label: 'spare node (3 + 1 spare, node 1 lost)', nodes: 4, spareNodes: 1, relaunch: false, fault: 'SIGKILL' },
  silent: { name: 'silent', label: 'silent node, spare (3 + 1 spare, node 1 stopped)', nodes: 4, spareNodes: 1, relaunch: false, fault: 'SIGSTOP' },
  shrink: { name: 'shrink', label: 'shrink (3 nodes, node 1 lost, 6 → 4 ranks)', nodes: 3, spareNodes: 0, relaunch: false, fault: 'SIGKILL' },
  relaunch: { name: 'relaunch', label: 'exit 76 + relaunch --resume (2 nodes, node 1 lost)', nodes: 2, spareNodes: 0, relaunch: true, fault: 'SIGKILL' },
}
const cases = values.cases!.split(',').map((c) => {
  const k = known[c.trim()]
  if (!k) {
    console.error(`unknown case ${c} (spare, silent, shrink, relaunch)\n\nusage: ${USAGE}`)
    process.exit(2)
  }
  return k
})

/** mpirun as root needs these; the nodes share this host, so mpirun may place more processes than cores. */
const MPI_ENV = {
  OMPI_ALLOW_RUN_AS_ROOT: '1',
  OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1',
  OMPI_MCA_rmaps_base_oversubscribe: '1',
  // A cluster run's connections start with a challenge on a secret every node shares (as a batch script exports it).
  MOLOTOF_SECRET: process.env.MOLOTOF_SECRET ?? 'the secret of bench:node-loss on this host',
}

/** The interior size giving `bytesPerRank` of checkpoint per rank on `ranks` ranks. */
const gridFor = (ranks: number): number => Math.round(Math.sqrt((bytesPerRank * ranks) / 8))

async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()))
  const port = (s.address() as { port: number }).port
  await new Promise((r) => s.close(r))
  return port
}

interface Launched {
  out: () => string
  code: Promise<number | null>
  ended: () => boolean
}

function mpirun(flags: string[], nodes: number, args: string[]): Launched {
  const child = spawn(MPIRUN, [...flags, '--bind-to', 'none', '-np', String(nodes), 'node', 'bin/molotof.mjs', 'run', ...args], {
    env: { ...process.env, ...MPI_ENV },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let ended = false
  child.stdout.on('data', (b: Buffer) => (out += b.toString()))
  child.stderr.on('data', (b: Buffer) => (out += b.toString()))
  const code = new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)))
  void code.then(() => (ended = true))
  return { out: () => out, code, ended: () => ended }
}


function signalAll(pids: number[], signal: NodeJS.Signals = 'SIGKILL'): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal)
    } catch {
      // Ended already.
    }
  }
}

type Event = { event: string; time: string; [k: string]: unknown }
const eventsIn = (file: string): Event[] =>
  existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Event)
    : []
const at = (e: Event): number => Date.parse(e.time)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
/** `p`, or nothing after `ms`; the timer is cleared, so that the bench exits as soon as its work is done. */
async function within(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  await Promise.race([p, new Promise((r) => (timer = setTimeout(r, ms)))])
  clearTimeout(timer)
}

/** Wait until `ready()` holds, the run ended or `ms` passed; whether it holds. */
async function until(ready: () => boolean, run: Launched, ms: number): Promise<boolean> {
  for (const limit = Date.now() + ms; !ready() && !run.ended() && Date.now() < limit; ) await sleep(20)
  return ready()
}

/** One loss, measured (ms, and bytes read by where from). */
export interface Measured {
  totalMs: number
  detectionMs: number
  decisionMs: number
  restoreMs: number
  firstStepMs: number
  /** restore, split: ranks started (spawned, or the spare node's), line agreed, files read, state restored. */
  startMs: number
  negotiateMs: number
  loadMs: number
  restoreStateMs: number
  /** Levels the ranks read the recovery line from, as the `resume` event names them. */
  level: string
  /** Bytes of the recovery line read from disk, from the memory level, over the network (undefined: the events do not tell). */
  diskBytes: number | undefined
  memoryBytes: number | undefined
  networkBytes: number | undefined
  /** The elastic restore's own count of payload bytes read (a shrink), from its log line. */
  elasticBytes: number | undefined
  exitCode: number | undefined
  checksum: number | undefined
  /** --node-timeout (ms) as node 0 named it in the `node-lost` event's reason (a silent node), else undefined. */
  nodeTimeoutMs?: number
  /** Where the new attempt's ranks came from (the `recovered` event's ranksFrom): kept processes, a spare node's warm ones, new ones. */
  ranksFrom?: { kept: number; spares: number; spawned: number }
}

function checkpointBytes(events: Event[], seq: number): number | undefined {
  // Every rank file of a line has the same size in these runs (equal strips): the checkpoint event's bytes per rank.
  const c = events.find((e) => e.event === 'checkpoint' && e.seq === seq)
  return c ? (c.bytes as number) : undefined
}

function statusOf(file: string): { state?: string; exitCode?: number } {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as { state?: string; exitCode?: number }
  } catch {
    // Not written yet, or being written.
    return {}
  }
}

/** One run of case `c`: start, lose node 1 after two partner copies, wait for the end; the figures from events and log lines. */
async function once(c: Case, root: string, tag: string): Promise<Measured> {
  const ranks = (c.nodes - c.spareNodes) * RANKS_PER_NODE
  const n = gridFor(ranks)
  const marker = join(root, `${tag}-ckpt-`)
  const memory = join(root, `${tag}-memory-`)
  const status = join(root, `${tag}-status.json`)
  const events = join(root, `${tag}-events.jsonl`)
  const common = (ranksPerNode: number) => [
    'examples/jacobi/jacobi.ts', '--n', String(n), '--iterations', String(iterations),
    '--ranks-per-node', String(ranksPerNode),
    // The disk level in the background, rarely: the memory level holds the recovery line.
    '--checkpoint', `every:${memoryEvery * 10}`, '--checkpoint-dir', `${marker}{node}`,
    '--memory-checkpoint', `every:${memoryEvery}`, '--memory-dir', `${memory}{node}`,
    '--hang-timeout', '60000', '--log', 'all',
    ...(nodeTimeout !== undefined ? ['--node-timeout', nodeTimeout] : []),
  ]
  const run = mpirun(['--enable-recovery'], c.nodes, [
    ...common(RANKS_PER_NODE),
    ...(c.spareNodes > 0 ? ['--spare-nodes', String(c.spareNodes)] : []),
    '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', status, '--events', events,
  ])
  const started: number[] = []
  try {
    const copied = await until(() => (run.out().match(/committed to partner/g)?.length ?? 0) >= 2, run, 180_000)
    if (!copied) throw new Error(`${c.name}: no partner copy before the run ended\n${run.out().slice(-3000)}`)
    // A little later, so that the fault falls between checkpoints rather than on one.
    await sleep(200)
    const lost = processesOfNode(1, marker)
    if (lost.length === 0) throw new Error(`${c.name}: node 1's processes not found\n${run.out().slice(-3000)}`)
    const faultAt = Date.now()
    signalAll(lost, c.fault)
    // Its disk and its memory go with it.
    rmSync(`${marker}1`, { recursive: true, force: true })
    rmSync(`${memory}1`, { recursive: true, force: true })

    if (!c.relaunch) {
      await until(() => eventsIn(events).some((e) => e.event === 'recovered'), run, 180_000)
      await until(() => statusOf(status).state === 'ended', run, 600_000)
      if (c.fault === 'SIGSTOP') {
        // mpirun waits for every node: wake the stopped one (it reads that it was dropped and exits 76), kill what stays.
        signalAll(lost, 'SIGCONT')
        await within(run.code, 5_000)
        signalAll(processesOfNode(1, marker))
      }
      await within(run.code, 30_000)
      const seen = eventsIn(events)
      const nodeLost = seen.find((e) => e.event === 'node-lost')
      const recovered = seen.find((e) => e.event === 'recovered')
      const resume = seen.find((e) => e.event === 'resume' && e.requested === false)
      if (!nodeLost || !recovered || !resume) throw new Error(`${c.name}: the run did not recover\n${run.out().slice(-3000)}`)
      // The phases by the node-0 clock's event times (this host's clock): they add up to the whole.
      const restart = seen.find((e) => e.event === 'start' && at(e) >= at(nodeLost))
      if (!restart) throw new Error(`${c.name}: no attempt started after the loss\n${run.out().slice(-3000)}`)
      const level = resume.level as string
      const fileBytes = checkpointBytes(seen, resume.seq as number)
      const elasticBytes = Number(/elastic restore from \d+ ranks: read (\d+) payload bytes/.exec(run.out())?.[1] ?? NaN)
      const bytes = bytesByPlace(c, level, fileBytes, ranks)
      return {
        totalMs: at(recovered) - faultAt,
        detectionMs: at(nodeLost) - faultAt,
        decisionMs: at(restart) - at(nodeLost),
        restoreMs: at(resume) - at(restart),
        firstStepMs: at(recovered) - at(resume),
        // The restore as the ranks measured it.
        startMs: recovered.startMs as number,
        negotiateMs: recovered.negotiateMs as number,
        loadMs: recovered.loadMs as number,
        restoreStateMs: (recovered.replayMs as number) + (recovered.restoreMs as number),
        level,
        ...bytes,
        elasticBytes: Number.isFinite(elasticBytes) ? elasticBytes : undefined,
        exitCode: statusOf(status).exitCode,
        checksum: checksumIn(run.out()),
        ranksFrom: recovered.ranksFrom as Measured['ranksFrom'],
        nodeTimeoutMs: timeoutNamedIn(String(nodeLost.why ?? '')),
      }
    }

    // Today's path: every survivor exits 76 (the status file says so: mpirun --enable-recovery exits 0), then a relaunch.
    await until(() => statusOf(status).state === 'ended', run, 180_000)
    await run.code
    const first = eventsIn(events)
    const nodeLost = first.find((e) => e.event === 'node-lost')
    const exit = statusOf(status).exitCode
    if (exit !== 76 || !nodeLost) throw new Error(`relaunch: the first run did not end with 76 (${exit})\n${run.out().slice(-3000)}`)
    const endedAt = Date.now()
    const again = mpirun([], 1, [
      // The same ranks on the one node left.
      ...common(ranks),
      '--resume', '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', `${status}.2`, '--events', `${events}.2`,
    ])
    const second = () => eventsIn(`${events}.2`)
    const resumedStep = () => {
      const s = second()
      const r = s.findIndex((e) => e.event === 'resume')
      return r >= 0 && s.slice(r).some((e) => e.event === 'progress')
    }
    await until(resumedStep, again, 180_000)
    await again.code
    const s = second()
    const r = s.findIndex((e) => e.event === 'resume')
    if (r < 0) throw new Error(`relaunch: the second run did not resume\n${again.out().slice(-3000)}`)
    const resume = s[r]
    const progress = s.slice(r).find((e) => e.event === 'progress')!
    const startEvent = s.find((e) => e.event === 'start')!
    const level = resume.level as string
    return {
      totalMs: at(progress) - faultAt,
      detectionMs: at(nodeLost) - faultAt,
      // Until the relaunched launcher starts: the survivors' exit 76 and mpirun's end.
      decisionMs: endedAt - at(nodeLost),
      // The relaunch: mpirun, the CLI, the program compiled, the rendezvous, the ranks spawned, the line agreed and read.
      restoreMs: at(resume) - endedAt,
      firstStepMs: at(progress) - at(resume),
      startMs: at(startEvent) - endedAt + (resume.spawnMs as number),
      negotiateMs: resume.negotiateMs as number,
      loadMs: resume.loadMs as number,
      restoreStateMs: (resume.replayMs as number) + (resume.restoreMs as number),
      level,
      ...bytesByPlace(c, level, checkpointBytes(first, resume.seq as number), ranks),
      elasticBytes: undefined,
      exitCode: statusOf(`${status}.2`).exitCode,
      checksum: checksumIn(again.out()),
    }
  } finally {
    for (let node = 0; node < c.nodes; node++) started.push(...processesOfNode(node, marker))
    signalAll(started)
    if (!run.ended()) await within(run.code, 10_000)
  }
}

/** The --node-timeout a `node-lost` event's reason names ("silent for 30.1 s (--node-timeout 30.0 s)"), in ms. */
function timeoutNamedIn(why: string): number | undefined {
  const m = /--node-timeout ([\d.]+) s/.exec(why)
  return m ? Number(m[1]) * 1000 : undefined
}

function checksumIn(out: string): number | undefined {
  const m = /checksum (\S+)/.exec(out)
  return m ? Number(m[1]) : undefined
}

/**
 * Bytes of the recovery line by where they were read, from the levels the
 * `resume` event names and the rank files' size: with a spare node, the
 * survivors' ranks read their own files and the lost node's ranks their
 * partner copies (over TCP); a shrink reads through the elastic restore
 * (its own count is in `elasticBytes`), split by level only when one level
 * served it all. A level the events name but cannot be split to: undefined.
 */
function bytesByPlace(c: Case, level: string, fileBytes: number | undefined, ranks: number): Pick<Measured, 'diskBytes' | 'memoryBytes' | 'networkBytes'> {
  const levels = level.split('+')
  const unknown = { diskBytes: undefined, memoryBytes: undefined, networkBytes: undefined }
  if (fileBytes === undefined) return unknown
  const zeroIfAbsent = (l: string) => (levels.includes(l) ? undefined : 0)
  if (c.relaunch || c.spareNodes === 0) {
    // A relaunch or a shrink: every rank reads through the elastic or own-file path; one level alone is all of it.
    const all = fileBytes * ranks
    if (levels.length === 1) return { diskBytes: level === 'disk' ? all : 0, memoryBytes: level === 'memory' ? all : 0, networkBytes: level === 'partner' ? all : 0 }
    return { diskBytes: zeroIfAbsent('disk'), memoryBytes: zeroIfAbsent('memory'), networkBytes: zeroIfAbsent('partner') }
  }
  // A spare node: the lost node's RANKS_PER_NODE ranks have no file of their own but the partner copies.
  const lost = RANKS_PER_NODE
  const own = levels.filter((l) => l !== 'partner')
  if (own.length > 1) return { ...unknown, networkBytes: levels.includes('partner') ? fileBytes * lost : 0 }
  return {
    diskBytes: own[0] === 'disk' ? fileBytes * (ranks - lost) : 0,
    memoryBytes: own[0] === 'memory' ? fileBytes * (ranks - lost) : 0,
    networkBytes: levels.includes('partner') ? fileBytes * lost : 0,
  }
}

const loadAtStart = loadavg()
const record = openRecord('node-loss', 'A node lost: fault to the first new superstep (spare node, shrink, relaunch)')
const root = mkdtempSync(join(tmpdir(), 'molotof-node-loss-'))
const rows = new Map<Case, Measured[]>(cases.map((c) => [c, []]))
try {
  for (let rep = 0; rep < repeats; rep++) {
    for (const c of cases) {
      const m = await once(c, root, `${c.name}-${rep}`)
      rows.get(c)!.push(m)
      process.stderr.write(`${c.label}, repeat ${rep + 1}: ${m.totalMs.toFixed(0)} ms (detection ${m.detectionMs.toFixed(0)}, decision ${m.decisionMs.toFixed(0)}${m.ranksFrom ? `; ranks kept ${m.ranksFrom.kept}, from a spare ${m.ranksFrom.spares}, new ${m.ranksFrom.spawned}` : ''}), exit ${m.exitCode}\n`)
    }
  }
} finally {
  if (!values.keep) rmSync(root, { recursive: true, force: true })
}

const med = (xs: number[]) => summary(xs).median
const ms = (x: number) => x.toFixed(0)
const mib = (x: number | undefined) => (x === undefined ? '?' : (x / 2 ** 20).toFixed(1))
console.log(
  `Jacobi, ${(bytesPerRank / 2 ** 20).toFixed(bytesPerRank < 2 ** 20 ? 3 : 0)} MiB per rank, ${RANKS_PER_NODE} ranks per node, every node on this host under mpirun --enable-recovery; ` +
    `memory checkpoint every ${memoryEvery} steps, disk every ${memoryEvery * 10}; node 1's processes SIGKILLed (silent: SIGSTOPped) and its directories deleted; median of ${repeats} (ms, MiB)`,
)
console.log(
  table(
    ['case', 'fault → 1st step', 'min–max', 'detection', 'decision', 'restore', '(start', 'negotiate', 'load', 'replay+restore)', '1st step', 'levels', 'disk MiB', 'memory MiB', 'network MiB'],
    cases.map((c) => {
      const rs = rows.get(c)!
      const total = rs.map((x) => x.totalMs)
      const last = rs[rs.length - 1]
      return [
        c.label, ms(med(total)), `${ms(Math.min(...total))}–${ms(Math.max(...total))}`,
        ms(med(rs.map((x) => x.detectionMs))), ms(med(rs.map((x) => x.decisionMs))), ms(med(rs.map((x) => x.restoreMs))),
        ms(med(rs.map((x) => x.startMs))), ms(med(rs.map((x) => x.negotiateMs))), ms(med(rs.map((x) => x.loadMs))), ms(med(rs.map((x) => x.restoreStateMs))),
        ms(med(rs.map((x) => x.firstStepMs))), [...new Set(rs.map((x) => x.level))].join(', '),
        mib(last.diskBytes), mib(last.memoryBytes), mib(last.networkBytes),
      ]
    }),
  ),
)
for (const c of cases) {
  const e = rows.get(c)!.map((x) => x.elasticBytes).filter((x): x is number => x !== undefined)
  if (e.length > 0) console.log(`${c.label}: the elastic restore read ${mib(med(e))} MiB of payload (its own count, every level together)`)
}
const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(' / ')
console.log(`load average (1 / 5 / 15 min) at the start ${load(loadAtStart)}, at the end ${load(loadavg())} on ${cpus().length} cores: the machine is shared, figures vary with what else runs`)
const sums = new Set(cases.flatMap((c) => rows.get(c)!.filter((x) => !c.relaunch).map((x) => x.checksum)))
console.log(`every in-run recovery ended with exit 0 and one checksum: ${cases.every((c) => rows.get(c)!.every((x) => x.exitCode === 0)) && sums.size <= 1 ? 'yes' : 'NO'}`)
const spare = rows.get(known.spare)
if (spare && spare.length > 0) {
  const worst = Math.max(...spare.map((x) => x.totalMs))
  const disk = spare.map((x) => x.diskBytes)
  console.log(`target, killed processes with a spare node, fault → first superstep ≤ 1 s: median ${ms(med(spare.map((x) => x.totalMs)))} ms, worst ${ms(worst)} ms`)
  console.log(`target, survivors read 0 bytes from disk when the memory level holds the line: ${disk.every((d) => d === 0) ? 'yes' : `no (${disk.map((d) => d ?? '?').join(', ')})`}`)
}
const silent = rows.get(known.silent)
if (silent && silent.length > 0) {
  const timeouts = [...new Set(silent.map((x) => x.nodeTimeoutMs))]
  const timeout = timeouts.length === 1 ? timeouts[0] : undefined
  const total = silent.map((x) => x.totalMs)
  console.log(
    `target, a silent node (stopped) with a spare node, fault → first superstep ≤ --node-timeout + 1 s: median ${ms(med(total))} ms, worst ${ms(Math.max(...total))} ms, ` +
      `detection median ${ms(med(silent.map((x) => x.detectionMs)))} ms; --node-timeout ${timeout === undefined ? `? (${timeouts.join(', ')})` : `${ms(timeout)} ms: over it by ${ms(med(total) - timeout)} ms`}`,
  )
}

/** The record's headline figures: the in-run recoveries next to the relaunch path's cost, each with its target. */
function headlineOf(c: Case): { headline?: string; target?: string } {
  if (c.name === 'spare') return { headline: `a node lost (killed), spare node: fault → first superstep, Jacobi ${values.mib} MiB/rank`, target: '≤ 1000 ms' }
  if (c.name === 'silent') {
    const t = rows.get(c)!.find((m) => m.nodeTimeoutMs !== undefined)?.nodeTimeoutMs
    return { headline: `a node lost (hung, silent), spare node: fault → first superstep, Jacobi ${values.mib} MiB/rank`, target: t === undefined ? '≤ --node-timeout + 1 s' : `≤ ${ms(t + 1000)} ms` }
  }
  if (c.name === 'relaunch') return { headline: 'a node lost, exit 76 + relaunch --resume: fault → first superstep' }
  return {}
}
const inMiB = (x: number | undefined) => (x === undefined ? undefined : x / 2 ** 20)
const figureOf = (c: Case, name: string, pick: (m: Measured) => number | undefined, unit: string, options = {}) => {
  const xs = rows.get(c)!.map(pick).filter((x): x is number => x !== undefined)
  record.figure(`${c.label}: ${name}`, xs, unit, options)
}
for (const c of cases) {
  figureOf(c, 'fault → first superstep', (m) => m.totalMs, 'ms', headlineOf(c))
  figureOf(c, 'detection', (m) => m.detectionMs, 'ms')
  if (c.fault === 'SIGSTOP') figureOf(c, '--node-timeout', (m) => m.nodeTimeoutMs, 'ms')
  figureOf(c, 'decision', (m) => m.decisionMs, 'ms')
  figureOf(c, 'restore', (m) => m.restoreMs, 'ms')
  figureOf(c, 'first superstep', (m) => m.firstStepMs, 'ms')
  figureOf(c, 'read from disk', (m) => inMiB(m.diskBytes), 'MiB', c.name === 'spare' ? { target: '0' } : {})
  figureOf(c, 'read from memory', (m) => inMiB(m.memoryBytes), 'MiB')
  figureOf(c, 'read over the network', (m) => inMiB(m.networkBytes), 'MiB')
  figureOf(c, 'elastic restore, payload read', (m) => inMiB(m.elasticBytes), 'MiB')
}
record.save()
