// Node 0 lost under a real cluster launcher (`mpirun --enable-recovery`, which keeps the other
// processes and exits 0 whatever they return: the run's outcome is read from --status-file). The
// lowest-numbered surviving member takes the coordinator's role over and finishes the run; a side
// without a majority of the last membership stops (exit 76) without writing the outcome. Every
// "node" runs on this host with its own checkpoint directory ({node}).
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  after, eventsIn, exited, freePort, haveMpirun, type Job, jacobiArgs, killAll, loseNode, MOLOTOF_RUN, MPIRUN, poll, processesOfNode, rankProcessesOf, sameJacobiBits, signalEach, startMpirun, statusEnded, statusOf, supervisorOf, until,
} from './mpirun-job.js'
import { NodeNamespaces } from './namespaces.js'

if (!haveMpirun) console.log(`takeover tests skipped: ${MPIRUN} is missing (apt-get install openmpi-bin)`)

const root = mkdtempSync(join(tmpdir(), 'molotof-takeover-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
const secret = 'a secret of the takeover tests'

// The harness's calls (mpirun-job.ts) under the names these tests use.
/** `mpirun --enable-recovery -np <nodes> molotof run <args…>` started. */
const startRun = (nodes: number, args: string[]): Job => startMpirun(nodes, [...MOLOTOF_RUN, ...args], { secret, recovery: true })
const sameBits = sameJacobiBits
const jacobi = jacobiArgs

/** The step of the last checkpoint the run said it committed (the tests kill a node after checkpoint 2). */
function lastCommittedStep(out: string): number {
  const steps = [...out.matchAll(/committed to \S+: skeleton 0, step (\d+)/g)].map((m) => Number(m[1]))
  expect(steps.length, out).toBeGreaterThan(0)
  return Math.max(...steps)
}

describe.skipIf(!haveMpirun)('node 0 lost under mpirun --enable-recovery: another node finishes the run', () => {
  it('3 working nodes + 1 spare: node 0 killed outright with its directory; node 1 takes the coordinator over, spare node 3 takes rank 0; exit 0 in the status file, the serial bits', async () => {
    const n = 40
    const iterations = 2000
    const marker = join(root, 'spare-')
    const memory = join(root, 'spare-memory-')
    const status = join(root, 'spare-status.json')
    const events = join(root, 'spare-events.jsonl')
    const run = startRun(4, [
      ...jacobi(n, iterations),
      '--spare-nodes', '1',
      '--checkpoint', 'every:100', '--checkpoint-dir', `${marker}{node}`, '--memory-checkpoint', 'every:20', '--memory-dir', `${memory}{node}`, '--hang-timeout', '20000',
      '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', status, '--events', events, '--log', 'all',
    ])
    try {
      await until(run.out, /checkpoint 2 committed to partner/, run.ended)
      // The rank processes of nodes 1 and 2, and spare node 3's warm one: the same processes run the attempt after the takeover.
      const kept = [rankProcessesOf(1, marker), rankProcessesOf(2, marker), rankProcessesOf(3, marker)]
      expect(kept.flat(), run.out()).toHaveLength(3)
      // Node 0's supervisor (the run's coordinator) and its rank die at once, with its disk and its memory.
      const killed = processesOfNode(0, marker)
      expect(killed.length, run.out()).toBeGreaterThan(1)
      const committed = lastCommittedStep(run.out())
      for (const pid of killed) process.kill(pid, 'SIGKILL')
      rmSync(`${marker}0`, { recursive: true, force: true })
      rmSync(`${memory}0`, { recursive: true, force: true })
      await until(run.out, /first superstep \d+ ms after the loss of node 0/, run.ended)
      expect([rankProcessesOf(1, marker), rankProcessesOf(2, marker), rankProcessesOf(3, marker)], run.out()).toEqual(kept)

      expect(await run.code, run.out()).toBe(0)
      const out = run.out()
      expect(statusOf(status), out).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done' })
      expect(sameBits(out, n, iterations), out).toBe(true)
      // Killed mid-run (after two partner checkpoints): its step is the one the survivors' ranks had reached, in the line and the event.
      const lostAt = /node 0 lost at step (\d+) \(the connection closed; node 1 took the coordinator's role over\); spare node 3 took rank 0 \(0 spare nodes left\)/.exec(out)
      expect(lostAt, out).not.toBeNull()
      const step = Number(lostAt![1])
      expect(step, out).toBeGreaterThanOrEqual(committed)
      expect(step, out).toBeLessThan(iterations)
      expect(out).toMatch(/first superstep \d+ ms after the loss of node 0/)
      // Node 1 prints the result and the summary.
      expect(out).toMatch(/\(4 nodes \(openmpi\), 3 ranks, tcp, wall [\d.]+ s, 1 restart, 1 node lost\)/)
      const seen = eventsIn(events)
      expect(seen.filter((e) => e.event === 'node-lost')).toMatchObject([{ node: 0, outcome: 'replaced', spare: 3, ranks: [0], skeleton: 0, step }])
      expect(seen.filter((e) => e.event === 'membership')).toMatchObject([{ epoch: 1, working: [3, 1, 2], spares: [] }])
      // Node 0's events up to its loss, then node 1's: one stream, one restart after the first attempt.
      expect(seen.filter((e) => e.event === 'start').map((e) => [e.attempt, e.ranks, e.resume])).toEqual([
        [0, 3, false],
        [1, 3, true],
      ])
      // The successor's own rank and node 2's ran on in their processes, rank 0 in the spare node's warm one.
      expect(seen.filter((e) => e.event === 'resume'), out).toMatchObject([{ requested: false, level: 'memory+partner', ranksFrom: { kept: 2, spares: 1, spawned: 0 } }])
      expect(seen.filter((e) => e.event === 'finish')).toMatchObject([{ restarts: 1 }])
    } finally {
      killAll(4, marker)
    }
  }, 90_000)

  it('3 nodes, no spare: node 0 killed; node 1 takes the coordinator over and the run shrinks to 2 ranks; exit 0, the serial bits', async () => {
    const n = 40
    const iterations = 1500
    const marker = join(root, 'shrink-')
    const status = join(root, 'shrink-status.json')
    const events = join(root, 'shrink-events.jsonl')
    const run = startRun(3, [
      ...jacobi(n, iterations),
      '--checkpoint', 'every:50', '--checkpoint-dir', `${marker}{node}`, '--hang-timeout', '20000',
      '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', status, '--events', events, '--log', 'all',
    ])
    try {
      await until(run.out, /checkpoint 2 committed to partner/, run.ended)
      const committed = lastCommittedStep(run.out())
      loseNode(0, marker, run.out())

      expect(await run.code, run.out()).toBe(0)
      const out = run.out()
      expect(statusOf(status), out).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done' })
      expect(sameBits(out, n, iterations), out).toBe(true)
      const lostAt = /node 0 lost at step (\d+) \(the connection closed; node 1 took the coordinator's role over\); no spare node left: the run goes on with 2 ranks/.exec(out)
      expect(lostAt, out).not.toBeNull()
      const step = Number(lostAt![1])
      expect(step, out).toBeGreaterThanOrEqual(committed)
      expect(step, out).toBeLessThan(iterations)
      expect(out).toMatch(/resuming a checkpoint of 3 ranks on 2/)
      expect(out).toMatch(/\(3 nodes \(openmpi\), 2 ranks, tcp, wall [\d.]+ s, 1 restart, 1 node lost\)/)
      const seen = eventsIn(events)
      expect(seen.filter((e) => e.event === 'node-lost')).toMatchObject([{ node: 0, outcome: 'shrunk', ranks: [0], size: 2, skeleton: 0, step }])
      expect(seen.filter((e) => e.event === 'membership')).toMatchObject([{ epoch: 1, working: [1, 2], spares: [] }])
      // Nodes 1 and 2 go on as ranks 0 and 1 in the processes they had.
      expect(seen.filter((e) => e.event === 'resume').map((e) => e.ranksFrom), out).toEqual([{ kept: 2, spares: 0, spawned: 0 }])
    } finally {
      killAll(3, marker)
    }
  }, 90_000)
})

describe.skipIf(!haveMpirun)('two coordinators lost in one run', () => {
  it('3 working nodes + 1 spare: node 0 killed (spare node 3 takes rank 0, node 1 coordinates), then node 1 killed (node 2 coordinates, the run shrinks to 2 ranks); exit 0, the serial bits', async () => {
    const n = 40
    const iterations = 3000
    const marker = join(root, 'twice-')
    const status = join(root, 'twice-status.json')
    const events = join(root, 'twice-events.jsonl')
    const run = startRun(4, [
      ...jacobi(n, iterations),
      '--spare-nodes', '1',
      '--checkpoint', 'every:50', '--checkpoint-dir', `${marker}{node}`, '--hang-timeout', '20000',
      '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', status, '--events', events, '--log', 'all',
    ])
    try {
      await until(run.out, /checkpoint 2 committed to partner/, run.ended)
      loseNode(0, marker, run.out())
      await until(run.out, /first superstep \d+ ms after the loss of node 0/, run.ended)
      // The new placement's partner copies made (rank 0's now on node 3), node 1 coordinating: it goes too.
      const afterFirst = after(run.out, /first superstep \d+ ms after the loss of node 0/)
      await until(afterFirst, /committed to partner[\s\S]*committed to partner/, run.ended)
      loseNode(1, marker, run.out())

      expect(await run.code, run.out()).toBe(0)
      const out = run.out()
      expect(statusOf(status), out).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done' })
      expect(sameBits(out, n, iterations), out).toBe(true)
      expect(out).toMatch(/node 1 lost at step \d+ \(the connection closed; node 2 took the coordinator's role over\); no spare node left: the run goes on with 2 ranks/)
      expect(out).toMatch(/\(4 nodes \(openmpi\), 2 ranks, tcp, wall [\d.]+ s, 2 restarts, 2 nodes lost\)/)
      const seen = eventsIn(events)
      expect(seen.filter((e) => e.event === 'node-lost')).toMatchObject([
        { node: 0, outcome: 'replaced', spare: 3 },
        { node: 1, outcome: 'shrunk', size: 2 },
      ])
      expect(seen.filter((e) => e.event === 'membership')).toMatchObject([
        { epoch: 1, working: [3, 1, 2] },
        { epoch: 2, working: [3, 2] },
      ])
    } finally {
      killAll(4, marker)
    }
  }, 90_000)
})

describe.skipIf(!haveMpirun)('node 0 silent under mpirun --enable-recovery', () => {
  it('node 0 stopped (SIGSTOP) with a spare: node 1 takes over after --node-timeout, the serial bits, exit 0 in the status file; woken, node 0 stops with 76 without replacing it', async () => {
    const n = 40
    const iterations = 1500
    const marker = join(root, 'silent0-')
    const status = join(root, 'silent0-status.json')
    const run = startRun(4, [
      ...jacobi(n, iterations),
      '--spare-nodes', '1', '--node-timeout', '3s',
      '--checkpoint', 'every:50', '--checkpoint-dir', `${marker}{node}`, '--hang-timeout', '20000',
      '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', status, '--log', 'all',
    ])
    const stopped: number[] = []
    try {
      await until(run.out, /checkpoint 2 committed to partner/, run.ended)
      stopped.push(...processesOfNode(0, marker))
      expect(stopped.length, run.out()).toBeGreaterThan(1)
      for (const pid of stopped) process.kill(pid, 'SIGSTOP')
      rmSync(`${marker}0`, { recursive: true, force: true })
      // mpirun waits for the stopped node: the run's outcome is in the status file.
      await statusEnded(status, run.ended)
      const out = run.out()
      expect(statusOf(status), out).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done' })
      expect(sameBits(out, n, iterations), out).toBe(true)
      expect(out).toMatch(/node 0 lost at step \d+ \(silent for more than 3\.0 s \(--node-timeout\); node 1 took the coordinator's role over\); spare node 3 took rank 0/)
      for (const pid of stopped) process.kill(pid, 'SIGCONT')
      expect(await run.code, run.out()).toBe(0)
      expect(run.out()).toMatch(/node 0: node \d was lost \(.*\), and this side holds 1 of the 4 nodes of the last membership/)
      expect(statusOf(status), run.out()).toMatchObject({ state: 'ended', exitCode: 0 })
    } finally {
      signalEach(stopped, 'SIGCONT')
      killAll(4, marker)
    }
  }, 90_000)
})

describe.skipIf(!haveMpirun)('no split brain: node 0 in a minority stops', () => {
  it('3 nodes, nodes 1 and 2 fall silent (SIGSTOP): node 0 holds 1 of 3 and stops with 76 within --node-timeout + a few seconds (no shrink to itself), writing 76 only because no other side wrote an outcome; woken, nodes 1 and 2 leave without writing', async () => {
    const marker = join(root, 'minority-')
    const status = join(root, 'minority-status.json')
    const run = startRun(3, [
      ...jacobi(40, 100_000),
      '--node-timeout', '3s',
      '--checkpoint', 'every:50', '--checkpoint-dir', `${marker}{node}`, '--hang-timeout', '20000',
      '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', status, '--log', 'all',
    ])
    const stopped: number[] = []
    try {
      await until(run.out, /checkpoint 2 committed to partner/, run.ended)
      const leader = supervisorOf(0, marker)
      stopped.push(...processesOfNode(1, marker), ...processesOfNode(2, marker))
      for (const pid of stopped) process.kill(pid, 'SIGSTOP')
      const at = Date.now()
      const gone = (): boolean => exited(leader!)
      await poll(gone, 30_000, 50)
      expect(gone(), run.out()).toBe(true)
      expect(Date.now() - at, run.out()).toBeLessThan(3000 + 5000)
      expect(run.out()).toMatch(/node 0: node \d was lost \(silent for [\d.]+ s \(--node-timeout 3\.0 s\)\), and this side holds 1 of the 3 nodes of the last membership \(nodes 0 of 0, 1, 2\): not a majority/)
      expect(run.out()).not.toMatch(/the run goes on with 1 rank/)
      // No side went on: node 0's 76 tells a batch loop to relaunch.
      const written = statusOf(status)
      expect(written, run.out()).toMatchObject({ state: 'ended', exitCode: 76, outcome: 'node-lost', node: 0 })
      expect(written?.message).toMatch(/not a majority/)
      for (const pid of stopped) process.kill(pid, 'SIGCONT')
      expect(await run.code, run.out()).toBe(0)
      expect(run.out()).toMatch(/node 1: node 0 counted this node as lost/)
      expect(statusOf(status), run.out()).toMatchObject({ state: 'ended', exitCode: 76, node: 0 })
    } finally {
      signalEach(stopped, 'SIGCONT')
      killAll(3, marker)
    }
  }, 90_000)
})

const canNetns = haveMpirun && process.getuid?.() === 0 && existsSync('/usr/sbin/ip')
if (haveMpirun && !canNetns) console.log('takeover partition test skipped: it needs root and iproute2 (ip netns, veth, bridge)')

/** The committed checkpoint numbers in a checkpoint directory (a `ckpt-<n>` with its COMMIT marker). */
function committed(dir: string): number[] {
  if (!existsSync(dir)) return []
  return readdirSync(dir)
    .filter((d) => /^ckpt-\d+$/.test(d) && existsSync(join(dir, d, 'COMMIT')))
    .map((d) => Number(d.slice(5)))
}

describe.skipIf(!canNetns)('no split brain: a partition of 2 | 1 nodes, each node in its own network namespace', () => {
  const net = new NodeNamespaces(`tko${process.pid % 100000}`, 3, '10.79.0')
  beforeAll(() => net.create())
  afterAll(() => net.remove())

  it("node 0's link taken down: node 0 (1 of 3) stops with 76 within --node-timeout + a few seconds and commits nothing after; nodes 1 and 2 go on, node 1 coordinating, the run shrinks; exit 0 in the status file, the serial bits", async () => {
    const n = 40
    const iterations = 1500
    const marker = join(root, 'part-')
    const status = join(root, 'part-status.json')
    const events = join(root, 'part-events.jsonl')
    const args = [
      ...jacobi(n, iterations),
      '--node-timeout', '3s',
      '--checkpoint', 'every:50', '--checkpoint-dir', `${marker}{node}`, '--hang-timeout', '20000',
      '--rendezvous', '10.79.0.1:29500', '--status-file', status, '--events', events, '--log', 'all',
    ]
    const run = startMpirun(3, ['sh', '-c', `${net.exec} ${MOLOTOF_RUN.join(' ')} ${args.join(' ')}`], { secret, recovery: true })
    try {
      await until(run.out, /checkpoint 3 committed to partner/, run.ended)
      const leader = supervisorOf(0, marker, 'bin/molotof.mjs')
      expect(leader, run.out()).toBeGreaterThan(0)
      // Node 0 cut off: its processes live on, the others stop hearing it, and it them.
      net.cutOff(0)
      const at = Date.now()
      const gone = (): boolean => exited(leader!)
      await poll(gone, 30_000, 50)
      expect(gone(), run.out()).toBe(true)
      expect(Date.now() - at, run.out()).toBeLessThan(3000 + 5000)
      const frozen = Math.max(...committed(`${marker}0`))
      expect(run.out()).toMatch(/node 0: node \d was lost \(silent for [\d.]+ s \(--node-timeout 3\.0 s\)\), and this side holds 1 of the 3 nodes of the last membership \(nodes 0 of 0, 1, 2\): not a majority/)

      expect(await run.code, run.out()).toBe(0)
      expect(statusOf(status), run.out()).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done' })
      expect(sameBits(run.out(), n, iterations), run.out()).toBe(true)
      expect(run.out()).toMatch(/node 0 lost at step \d+ \(silent for more than 3\.0 s \(--node-timeout\); node 1 took the coordinator's role over\); no spare node left: the run goes on with 2 ranks/)
      expect(run.out()).not.toMatch(/the run goes on with 1 rank/)
      // Node 0 committed nothing after it was cut off: the later checkpoints are the majority's only.
      expect(Math.max(...committed(`${marker}0`))).toBe(frozen)
      expect(Math.max(...committed(`${marker}1`))).toBeGreaterThan(frozen)
      // One events file on this host: node 0 reported no loss (the shrink it decided first never settled), node 1 one.
      const seen = eventsIn(events)
      expect(seen.filter((e) => e.event === 'node-lost')).toMatchObject([{ node: 0, outcome: 'shrunk', size: 2 }])
      expect(seen.filter((e) => e.event === 'membership')).toMatchObject([{ epoch: 1, working: [1, 2] }])
      expect(seen.filter((e) => e.event === 'finish')).toMatchObject([{ restarts: 1 }])
      expect(seen.filter((e) => e.event === 'failure').map((e) => e.message)).toEqual([expect.stringMatching(/^node 0 was lost .*node 1 took the coordinator's role over$/)])
    } finally {
      killAll(3, marker)
      net.reconnect(0)
    }
  }, 90_000)

  it("node 2's link taken down: node 2 (1 of 3, without the coordinator) asks node 1 (the only member below it), finds no answer, and stops with 76 within --node-timeout + 3 s; nodes 0 and 1 shrink and finish; exit 0 in the status file, the serial bits", async () => {
    const n = 40
    const iterations = 1500
    const marker = join(root, 'part2-')
    const status = join(root, 'part2-status.json')
    const args = [
      ...jacobi(n, iterations),
      '--node-timeout', '3s',
      '--checkpoint', 'every:50', '--checkpoint-dir', `${marker}{node}`, '--hang-timeout', '20000',
      '--rendezvous', '10.79.0.1:29500', '--status-file', status, '--log', 'all',
    ]
    const run = startMpirun(3, ['sh', '-c', `${net.exec} ${MOLOTOF_RUN.join(' ')} ${args.join(' ')}`], { secret, recovery: true })
    try {
      await until(run.out, /checkpoint 3 committed to partner/, run.ended)
      const cutOff = supervisorOf(2, marker, 'bin/molotof.mjs')
      expect(cutOff, run.out()).toBeGreaterThan(0)
      net.cutOff(2)
      const at = Date.now()
      const gone = (): boolean => exited(cutOff!)
      await poll(gone, 40_000, 50)
      expect(gone(), run.out()).toBe(true)
      // About 1.5 s to give up on node 1 (half the election wait under a 3 s --node-timeout), then alone: no majority.
      expect(Date.now() - at, run.out()).toBeLessThan(3000 + 3000)
      expect(run.out()).toMatch(/node 2: node 0 was lost \(silent for more than 3\.0 s \(--node-timeout\)\), and this side holds 1 of the 3 nodes of the last membership \(nodes 2 of 0, 1, 2\): not a majority/)

      expect(await run.code, run.out()).toBe(0)
      expect(statusOf(status), run.out()).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done' })
      expect(sameBits(run.out(), n, iterations), run.out()).toBe(true)
      expect(run.out()).toMatch(/node 2 lost( at step \d+)? \(silent for [\d.]+ s \(--node-timeout 3\.0 s\)\); no spare node left: the run goes on with 2 ranks/)
    } finally {
      killAll(3, marker)
      net.reconnect(2)
    }
  }, 90_000)
})
