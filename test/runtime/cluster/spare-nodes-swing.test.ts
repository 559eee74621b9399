// Spare nodes for swing under a real cluster launcher, as spare-nodes.test.ts
// does for Jacobi: `mpirun --enable-recovery` keeps the other nodes when one
// node's processes die (and exits 0 whatever they return, so the outcome is
// read from --status-file). Every "node" runs on this host with its own
// checkpoint and memory directories ({node}), one rank per node. Swing's
// supersteps are the decision dates, computed backwards; its checkpoints hold
// the value function of the date just computed (a box of volume levels ×
// lattice nodes), so a shrink restores it on fewer ranks as an elastic
// restart does.
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { resolveParams } from '../../../examples/swing/model/params.js'
import { valueSwing } from '../../../examples/swing/model/serial.js'
import { processesOfNode } from '../../../bench/mpirun-nodes.js'

const MPIRUN = '/usr/bin/mpirun'
const haveMpirun = existsSync(MPIRUN)
if (!haveMpirun) console.log(`swing spare-node tests skipped: ${MPIRUN} is missing (apt-get install openmpi-bin)`)

const root = mkdtempSync(join(tmpdir(), 'molotof-spares-swing-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

/** mpirun as root needs these; --bind-to none: Open MPI would pin each node supervisor, and all its ranks, to one core. */
// MOLOTOF_SECRET as a batch script exports it: mpirun passes the environment to the nodes on this host.
const MPI_ENV = { OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1', OMPI_MCA_rmaps_base_oversubscribe: '1', MOLOTOF_SECRET: 'a secret of the swing spare-node tests' }

async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()))
  const port = (s.address() as { port: number }).port
  await new Promise((r) => s.close(r))
  return port
}

/** `mpirun --enable-recovery -np <nodes> <command…>` started; `out` grows with everything printed. */
function startMpirun(nodes: number, command: string[]): { out: () => string; code: Promise<number | null> } {
  const child = spawn(MPIRUN, ['--enable-recovery', '--bind-to', 'none', '-np', String(nodes), ...command], { env: { ...process.env, ...MPI_ENV }, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (b: Buffer) => (out += b.toString()))
  child.stderr.on('data', (b: Buffer) => (out += b.toString()))
  return { out: () => out, code: new Promise((resolve) => child.on('close', (c) => resolve(c))) }
}

/** Wait until `pattern` is in `out()` (or the run ended, or 45 s passed). */
async function until(out: () => string, pattern: RegExp, ended: () => boolean): Promise<void> {
  for (const limit = Date.now() + 45_000; !pattern.test(out()) && !ended() && Date.now() < limit; ) await new Promise((r) => setTimeout(r, 20))
}

/** SIGKILL node `node`'s supervisor and rank processes, as a node dies at once, and delete its directories (its disk, its memory). */
function loseNode(node: number, marker: string, memory: string, out: string): void {
  const killed = processesOfNode(node, marker)
  expect(killed.length, out).toBeGreaterThan(0)
  for (const pid of killed) process.kill(pid, 'SIGKILL')
  rmSync(`${marker}${node}`, { recursive: true, force: true })
  rmSync(`${memory}${node}`, { recursive: true, force: true })
}

/** The result --json prints, among the log lines. */
const jsonOf = <T>(out: string): T => JSON.parse(out.slice(out.indexOf('{\n'), out.lastIndexOf('\n}') + 2)) as T

type Event = { event: string; [k: string]: unknown }
const eventsIn = (file: string): Event[] => readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Event)

describe.skipIf(!haveMpirun)('swing: spare nodes under mpirun --enable-recovery', () => {
  it('3 working nodes + 1 spare: node 1 killed with its directories, spare node 3 takes its rank; then node 2 killed, no spare left, the run shrinks to 2 ranks; exit 0, the serial valuation\'s bits', async () => {
    // 2500 daily decision dates: long enough for two losses, each after partner copies of the placement it hits.
    const preset = 'daily-g'
    const dates = 2500
    const marker = join(root, 'swing-')
    const memory = join(root, 'swing-memory-')
    const status = join(root, 'swing-status.json')
    const events = join(root, 'swing-events.jsonl')
    const run = startMpirun(4, [
      'node', 'bin/molotof.mjs', 'run',
      'examples/swing/swing.ts', '--preset', preset, '--n', String(dates),
      '--spare-nodes', '1',
      '--checkpoint', 'every:100', '--checkpoint-dir', `${marker}{node}`, '--memory-checkpoint', 'every:20', '--memory-dir', `${memory}{node}`, '--hang-timeout', '20000',
      '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', status, '--events', events, '--log', 'all', '--json',
    ])
    let ended = false
    void run.code.then(() => (ended = true))
    try {
      await until(run.out, /checkpoint 2 committed to partner/, () => ended)
      expect(ended, run.out()).toBe(false)
      // The spare node computes nothing: no directory of its own yet.
      expect(existsSync(`${marker}3`), run.out()).toBe(false)
      loseNode(1, marker, memory, run.out())
      await until(run.out, /first superstep \d+ ms after the loss of node 1/, () => ended)
      expect(run.out()).toMatch(/node 1 lost( at step \d+)? \(the connection closed\); spare node 3 took rank 1 \(0 spare nodes left\)/)

      // A second loss once the new placement has partner copies of its own: no spare left, the run shrinks.
      const afterFirst = () => run.out().split(/first superstep \d+ ms after the loss of node 1/)[1] ?? ''
      await until(afterFirst, /committed to partner[\s\S]*committed to partner/, () => ended)
      expect(ended, run.out()).toBe(false)
      loseNode(2, marker, memory, run.out())

      const code = await run.code
      const out = run.out()
      // mpirun --enable-recovery exits 0 whatever: the status file says how the run ended.
      expect(code, out).toBe(0)
      expect(JSON.parse(readFileSync(status, 'utf8')), out).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done' })
      expect(out).toMatch(/node 2 lost( at step \d+)? \(the connection closed\); no spare node left: the run goes on with 2 ranks/)
      expect(out).toMatch(/resuming a checkpoint of 3 ranks on 2/)
      expect(out).toMatch(/first superstep \d+ ms after the loss of node 2/)
      expect(out).not.toMatch(/checksum mismatch/)
      // The reference: the serial valuation of the same parameters, one process, no checkpoints.
      const { value } = jsonOf<{ value: number }>(out)
      expect(Object.is(value, valueSwing(resolveParams(preset, { N: dates })).value), `${value}\n${out}`).toBe(true)

      const seen = eventsIn(events)
      expect(seen.filter((e) => e.event === 'node-lost')).toMatchObject([
        { node: 1, outcome: 'replaced', spare: 3, ranks: [1], sparesLeft: 0 },
        { node: 2, outcome: 'shrunk', ranks: [2], size: 2 },
      ])
      // Each loss restored the recovery line from memory: the survivors' own level, the lost rank's partner copy.
      expect(seen.filter((e) => e.event === 'resume'), out).toMatchObject([{ requested: false, level: 'memory+partner' }, { requested: false, level: 'memory+partner' }])
      expect(seen.filter((e) => e.event === 'start').map((e) => e.ranks)).toEqual([3, 3, 2])
    } finally {
      for (const node of [0, 1, 2, 3]) for (const pid of processesOfNode(node, marker)) process.kill(pid, 'SIGKILL')
    }
  }, 120_000)
})
