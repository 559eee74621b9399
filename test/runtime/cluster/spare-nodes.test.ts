// Spare nodes under a real cluster launcher: Open MPI's `mpirun --enable-recovery`
// keeps the other processes when one node's die (without it, mpirun aborts the
// whole job), and then exits 0 whatever they return, so the run's outcome is
// read from --status-file. Every "node" runs on this host with its own
// checkpoint directory ({node}). Small grids, one rank per node. When no
// spare is left, the others go on with fewer ranks (a shrink, restored
// elastically inside the run).
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { main } from '../../../src/cli/main.js'
import {
  after, alive, childrenOf, eventsIn, freePort, haveMpirun, killAll, loseNode, MOLOTOF_RUN, MPIRUN, rankProcessesOf, sameJacobiBits, signalEach, startMpirun, statusEnded, statusOf, supervisorOf, until,
} from './mpirun-job.js'

if (!haveMpirun) console.log(`spare-node tests skipped: ${MPIRUN} is missing (apt-get install openmpi-bin)`)

const root = mkdtempSync(join(tmpdir(), 'molotof-spares-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
const secret = 'a secret of the spare-node tests'
const molotof = MOLOTOF_RUN

describe.skipIf(!haveMpirun)('spare nodes under mpirun --enable-recovery', () => {
  it('3 working nodes + 1 spare: node 1 killed outright with its directory, spare node 3 takes its rank; then node 2 killed, no spare left, the run shrinks to 2 ranks; exit 0, the serial bits', async () => {
    const n = 40
    const iterations = 2500
    const marker = join(root, 'spare-')
    // The memory level in a directory of the test's own, so that the lost node's goes with it (its RAM).
    const memory = join(root, 'spare-memory-')
    const status = join(root, 'spare-status.json')
    const events = join(root, 'spare-events.jsonl')
    const run = startMpirun(4, [
      ...molotof,
      'examples/jacobi/jacobi.ts', '--n', String(n), '--iterations', String(iterations),
      '--spare-nodes', '1',
      // Disk checkpoints only well after the losses: a survivor still in a disk flush's fsync when a loss lands
      // may take longer than the abort timeout (1 s) to stop on a machine busy writing (CI, after the unit
      // tests), and is then replaced by a new process by design, which these tests' pid checks would call a failure.
      '--checkpoint', 'every:1000', '--checkpoint-dir', `${marker}{node}`, '--memory-checkpoint', 'every:20', '--memory-dir', `${memory}{node}`, '--hang-timeout', '20000',
      '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', status, '--events', events, '--log', 'all',
    ], { secret, recovery: true })
    try {
      await until(run.out, /checkpoint 2 committed to partner/, run.ended)
      expect(run.out()).not.toMatch(/checksum/)
      // The spare node computes nothing (no directory of its own yet), in a rank process started ahead with the program loaded.
      expect(existsSync(`${marker}3`), run.out()).toBe(false)
      const warm = childrenOf(supervisorOf(3, marker)!, 'spare-boot.mjs')
      expect(warm, run.out()).toHaveLength(1)
      // The survivors' rank processes (nodes 0 and 2): the same processes run the next attempts.
      const survivors = [rankProcessesOf(0, marker), rankProcessesOf(2, marker)]
      expect(survivors.flat(), run.out()).toHaveLength(2)
      // The whole node dies at once (its supervisor and its rank), and its disk with it.
      loseNode(1, marker, run.out(), { memory })
      // Rank 1 runs in that warm process: it is still there once the run computes again (one not taken is killed).
      await until(run.out, /first superstep \d+ ms after the loss of node 1/, run.ended)
      expect(alive(warm[0]), run.out()).toBe(true)
      expect([rankProcessesOf(0, marker), rankProcessesOf(2, marker), rankProcessesOf(3, marker)], run.out()).toEqual([...survivors, warm])
      expect(run.out()).toMatch(/node 1 lost( at step \d+)? \(the connection closed\); spare node 3 took rank 1 \(0 spare nodes left\)/)
      expect(run.out()).not.toMatch(/checksum/)

      // A second loss once the new placement has partner copies of its own (rank 1's now made on node 3): no spare left.
      const afterFirst = after(run.out, /first superstep \d+ ms after the loss of node 1/)
      await until(afterFirst, /committed to partner[\s\S]*committed to partner/, run.ended)
      expect(run.out()).not.toMatch(/checksum/)
      loseNode(2, marker, run.out(), { memory })
      // After the shrink, node 0 and node 3 still compute in the processes they had.
      await until(run.out, /first superstep \d+ ms after the loss of node 2/, run.ended)
      expect([rankProcessesOf(0, marker), rankProcessesOf(3, marker)], run.out()).toEqual([survivors[0], warm])

      const code = await run.code
      const out = run.out()
      // mpirun --enable-recovery exits 0 whatever: the status file says how the run ended.
      expect(code, out).toBe(0)
      expect(statusOf(status), out).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done' })
      expect(sameJacobiBits(out, n, iterations), out).toBe(true)
      // The step is the lost rank's last heartbeat in this attempt: unknown (and left out) when the loss lands while
      // the attempt is being started (node 2's rank process may die a moment before its supervisor).
      expect(out).toMatch(/node 2 lost( at step \d+)? \(the connection closed\); no spare node left: the run goes on with 2 ranks/)
      expect(out).toMatch(/resuming a checkpoint of 3 ranks on 2/)
      expect(out).toMatch(/first superstep \d+ ms after the loss of node 2/)
      // Checkpoint lines after the shrink count the ranks that wrote them (2), not the ranks the run started with.
      const afterShrink = out.split(/first superstep \d+ ms after the loss of node 2/)[1] ?? ''
      expect(afterShrink.split('\n').filter((l) => /committed to .* on 3 rank\(s\)/.test(l))).toEqual([])
      expect(out).toMatch(/\(4 nodes \(openmpi\), 2 ranks, tcp, wall [\d.]+ s, 2 restarts, 2 nodes lost\)/)

      const seen = eventsIn(events)
      expect(seen.filter((e) => e.event === 'node-lost')).toMatchObject([
        { node: 1, outcome: 'replaced', spare: 3, ranks: [1], sparesLeft: 0 },
        { node: 2, outcome: 'shrunk', ranks: [2], size: 2 },
      ])
      expect(seen.filter((e) => e.event === 'membership')).toMatchObject([
        { epoch: 1, working: [0, 3, 2], spares: [] },
        { epoch: 2, working: [0, 3], spares: [] },
      ])
      // The others restored from their own memory level; after the first loss rank 1's file came from the memory copy
      // node 2 kept, after the second old rank 2's from node 0's.
      const resumes = seen.filter((e) => e.event === 'resume')
      expect(resumes, out).toMatchObject([{ requested: false, level: 'memory+partner' }, { requested: false, level: 'memory+partner' }])
      expect(resumes[0].step as number).toBeGreaterThan(0)
      expect(seen.filter((e) => e.event === 'start').map((e) => e.ranks)).toEqual([3, 3, 2])
      // Rank 1 came from the spare node's warm process; the survivors' ranks ran again in their own processes.
      expect(seen.filter((e) => e.event === 'recovered').map((e) => e.ranksFrom)).toEqual([
        { kept: 2, spares: 1, spawned: 0 },
        { kept: 2, spares: 0, spawned: 0 },
      ])
      // Node 3 ran rank 1, then rank 1 of two: its checkpoints are in its own directory.
      const own = readdirSync(`${marker}3`).filter((d) => d.startsWith('ckpt-'))
      expect(readdirSync(join(`${marker}3`, own.sort().pop()!)).sort()).toEqual(['COMMIT', 'rank-1.mlf'])
    } finally {
      killAll(4, marker)
    }
  }, 90_000)
})

describe.skipIf(!haveMpirun)('a shrink renumbers the kept ranks', () => {
  it('3 nodes, no spare, node 1 killed: node 2 goes on as rank 1 of 2 in the process it had; exit 0, the serial bits', async () => {
    const n = 40
    const iterations = 2500
    const marker = join(root, 'renumber-')
    const memory = join(root, 'renumber-memory-')
    const status = join(root, 'renumber-status.json')
    const events = join(root, 'renumber-events.jsonl')
    const run = startMpirun(3, [
      ...molotof,
      'examples/jacobi/jacobi.ts', '--n', String(n), '--iterations', String(iterations),
      // Disk checkpoints only well after the losses: a survivor still in a disk flush's fsync when a loss lands
      // may take longer than the abort timeout (1 s) to stop on a machine busy writing (CI, after the unit
      // tests), and is then replaced by a new process by design, which these tests' pid checks would call a failure.
      '--checkpoint', 'every:1000', '--checkpoint-dir', `${marker}{node}`, '--memory-checkpoint', 'every:20', '--memory-dir', `${memory}{node}`, '--hang-timeout', '20000',
      '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', status, '--events', events, '--log', 'all',
    ], { secret, recovery: true })
    try {
      await until(run.out, /checkpoint 2 committed to partner/, run.ended)
      const survivors = [rankProcessesOf(0, marker), rankProcessesOf(2, marker)]
      expect(survivors.flat(), run.out()).toHaveLength(2)
      loseNode(1, marker, run.out(), { memory })
      await until(run.out, /first superstep \d+ ms after the loss of node 1/, run.ended)
      expect([rankProcessesOf(0, marker), rankProcessesOf(2, marker)], run.out()).toEqual(survivors)
      const code = await run.code
      const out = run.out()
      expect(code, out).toBe(0)
      expect(statusOf(status), out).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done' })
      expect(out).toMatch(/resuming a checkpoint of 3 ranks on 2/)
      expect(sameJacobiBits(out, n, iterations), out).toBe(true)
      const seen = eventsIn(events)
      expect(seen.filter((e) => e.event === 'recovered').map((e) => e.ranksFrom)).toEqual([{ kept: 2, spares: 0, spawned: 0 }])
      // Node 2's process ran rank 2 of 3, then rank 1 of 2: its last checkpoint is rank 1's.
      const own = readdirSync(`${marker}2`).filter((d) => d.startsWith('ckpt-'))
      expect(readdirSync(join(`${marker}2`, own.sort().pop()!)).sort()).toEqual(['COMMIT', 'rank-1.mlf'])
    } finally {
      killAll(3, marker)
    }
  }, 90_000)
})

describe.skipIf(!haveMpirun)('a silent node (SIGSTOP): replaced by a spare, or the run shrinks', () => {
  it.each([
    {
      title: 'node 1 stopped (SIGSTOP): replaced after --node-timeout, the serial bits; when it wakes up it leaves, without replacing the status file the others wrote',
      tag: 'silent-', nodes: 4, flags: ['--spare-nodes', '1'],
      // The step is said when node 0 knows where the lost node's first rank was; when it does not, the line leaves it out.
      lines: [/node 1 lost( at step \d+)? \(silent for \d+\.\d s \(--node-timeout 3\.0 s\)\); spare node 3 took rank 1/],
    },
    {
      title: '3 nodes, node 1 stopped (SIGSTOP) with its directory deleted: lost after --node-timeout, nodes 0 and 2 go on as 2 ranks; exit 0 in the status file, the serial bits; woken, node 1 leaves without replacing it',
      tag: 'silent-shrink-', nodes: 3, flags: [],
      lines: [/node 1 lost( at step \d+)? \(silent for \d+\.\d s \(--node-timeout 3\.0 s\)\); no spare node left: the run goes on with 2 ranks/, /resuming a checkpoint of 3 ranks on 2/],
    },
  ])('$title', async ({ tag, nodes, flags, lines }) => {
    const n = 40
    const iterations = 1500
    const marker = join(root, tag)
    const status = join(root, `${tag}status.json`)
    const run = startMpirun(nodes, [
      ...molotof,
      'examples/jacobi/jacobi.ts', '--n', String(n), '--iterations', String(iterations),
      ...flags, '--node-timeout', '3s',
      '--checkpoint', 'every:50', '--checkpoint-dir', `${marker}{node}`, '--hang-timeout', '20000',
      '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', status, '--log', 'all',
    ], { secret, recovery: true })
    const stopped: number[] = []
    try {
      await until(run.out, /checkpoint 2 committed to partner/, run.ended)
      stopped.push(...loseNode(1, marker, run.out(), { signal: 'SIGSTOP' }))
      // mpirun waits for the stopped node: the others' outcome is in the status file.
      await statusEnded(status)
      expect(statusOf(status), run.out()).toMatchObject({ state: 'ended', exitCode: 0 })
      for (const line of lines) expect(run.out()).toMatch(line)
      // Node 0 writes the status file before its result reaches mpirun's output.
      await until(run.out, /checksum \S+/, undefined, 10_000)
      expect(sameJacobiBits(run.out(), n, iterations), run.out()).toBe(true)
      // Node 1 wakes up: it reads that it was dropped and exits; the status file still says 0.
      for (const pid of stopped) process.kill(pid, 'SIGCONT')
      expect(await run.code, run.out()).toBe(0)
      expect(run.out()).toMatch(/node 1: node 0 counted this node as lost \(silent for/)
      expect(statusOf(status), run.out()).toMatchObject({ state: 'ended', exitCode: 0, node: 0 })
    } finally {
      signalEach(stopped, 'SIGKILL')
      killAll(nodes, marker)
    }
  }, 90_000)
})

describe.skipIf(!haveMpirun)('no spare node left, a program that cannot be re-sliced', () => {
  it('3 nodes, node 1 killed: the shrink refuses an array saved without its box, and the run ends with 76 (resumable) naming why', async () => {
    const marker = join(root, 'nobox-')
    const status = join(root, 'nobox-status.json')
    const run = startMpirun(3, [
      ...molotof,
      'test/fixtures/elastic.ts', '--n', '30', '--steps', '100000000', '--acc', 'nobox',
      '--checkpoint', 'every:50', '--checkpoint-dir', `${marker}{node}`, '--hang-timeout', '20000',
      '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', status, '--log', 'all',
    ], { secret, recovery: true })
    try {
      await until(run.out, /checkpoint 2 committed to partner/, run.ended)
      loseNode(1, marker, run.out())
      expect(await run.code, run.out()).toBe(0)
      const written = statusOf(status)
      expect(written, run.out()).toMatchObject({ state: 'ended', exitCode: 76, outcome: 'node-lost', resumable: true })
      expect(written?.message).toMatch(/node 1 was lost \(the connection closed\) and no spare node is left; the run cannot go on with 2 ranks: .*"acc" \(skeleton 0\) is an array saved without its global box/)
      expect(written?.message).toMatch(/run the launcher again with --resume/)
    } finally {
      killAll(3, marker)
    }
  }, 60_000)
})

describe.skipIf(!haveMpirun)('--spare-nodes refused before any rank starts (exit 2)', () => {
  const jacobi = ['examples/jacobi/jacobi.ts', '--n', '20', '--iterations', '5']

  it('as many spare nodes as nodes, or spares whose lost node would leave no copy (--partner-copies off), under mpirun', async () => {
    const all = startMpirun(2, [...molotof, ...jacobi, '--spare-nodes', '2', '--rendezvous', `127.0.0.1:${await freePort()}`, '--checkpoint-dir', join(root, 'all-{node}')], { secret })
    expect(await all.code, all.out()).toBe(2)
    expect(all.out()).toMatch(/--spare-nodes 2: the launcher started 2 node supervisors, so no node would be left to work \(at most 1\)/)
    const bare = startMpirun(3, [...molotof, ...jacobi, '--spare-nodes', '1', '--partner-copies', 'off', '--rendezvous', `127.0.0.1:${await freePort()}`, '--checkpoint-dir', join(root, 'bare-{node}')], { secret })
    expect(await bare.code, bare.out()).toBe(2)
    expect(bare.out()).toMatch(/--spare-nodes 1: .*a lost node's data would be gone/)
    // Neither started a rank: no checkpoint directory was made.
    expect(readdirSync(root).filter((d) => d.startsWith('all-') || d.startsWith('bare-'))).toEqual([])
  }, 60_000)

  it('without a cluster launcher, and negative', async () => {
    const said: string[] = []
    const say = (t: string) => said.push(t)
    expect(await main(['run', ...jacobi, '--spare-nodes', '1', '--checkpoint-dir', join(root, 'alone')], say, say)).toBe(2)
    expect(said.join('\n')).toMatch(/--spare-nodes 1: spare nodes are node supervisors a cluster launcher starts .* this run has no launcher/)
    said.length = 0
    expect(await main(['run', ...jacobi, '--spare-nodes', '-1', '--checkpoint-dir', join(root, 'alone')], say, say)).toBe(2)
    expect(said.join('\n')).toMatch(/--spare-nodes/)
    expect(existsSync(join(root, 'alone'))).toBe(false)
  })
})
