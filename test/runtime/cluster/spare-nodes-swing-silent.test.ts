// A silent node replaced by a spare, for swing, as spare-nodes.test.ts (SIGSTOP)
// and netns.test.ts (link down) do it for Jacobi; spare-nodes-swing.test.ts
// kills the node outright. `mpirun --enable-recovery` keeps the other nodes and
// exits 0 whatever they return: the outcome is read from --status-file. One
// rank per node, 3 working nodes + 1 spare, the memory level in a directory of
// the test's own so that the lost node's goes with it (its RAM).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import {
  endedByNode0, eventsIn, freePort, haveMpirun, jsonOf, killAll, loseNode, MOLOTOF_RUN, MPIRUN, signalEach, startInNamespaces, startMpirun, statusEnded, statusOf, swingValue, until,
} from './mpirun-job.js'
import { namespacesUnavailable, NodeNamespaces } from './namespaces.js'

if (!haveMpirun) console.log(`swing silent-node tests skipped: ${MPIRUN} is missing (apt-get install openmpi-bin)`)
const noNetns = haveMpirun ? namespacesUnavailable() : 'no mpirun'
if (haveMpirun && noNetns !== undefined) console.log(`swing link-down test skipped: ${noNetns}`)

const root = mkdtempSync(join(tmpdir(), 'molotof-swing-silent-'))
const networks: NodeNamespaces[] = []
afterAll(() => {
  for (const net of networks) net.remove()
  rmSync(root, { recursive: true, force: true })
})
const secret = 'a secret of the swing silent-node tests'

// daily-g over 4 years: 1500 decision dates, long enough to lose a node in the middle.
const model = ['examples/swing/swing.ts', '--preset', 'daily-g', '--n', '1500', '--t', '4']
const reference = () => swingValue('daily-g', { N: 1500, T: 4 })

describe.skipIf(!haveMpirun)('swing: a silent node replaced by a spare', () => {
  it("node 1 stopped (SIGSTOP) with its directories deleted: replaced after --node-timeout, spare node 3 takes rank 1; exit 0 in the status file, the serial valuation's bits; woken, node 1 leaves without replacing the status file", async () => {
    const marker = join(root, 'stop-')
    const memory = join(root, 'stop-memory-')
    const status = join(root, 'stop-status.json')
    const events = join(root, 'stop-events.jsonl')
    const run = startMpirun(4, [
      ...MOLOTOF_RUN, ...model, '--spare-nodes', '1', '--node-timeout', '3s',
      '--checkpoint', 'every:100', '--checkpoint-dir', `${marker}{node}`, '--memory-checkpoint', 'every:20', '--memory-dir', `${memory}{node}`, '--hang-timeout', '20000',
      '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', status, '--events', events, '--log', 'all', '--json',
    ], { secret, recovery: true })
    const stopped: number[] = []
    try {
      await until(run.out, /checkpoint 2 committed to partner/, run.ended)
      expect(run.out()).not.toMatch(/"value"/)
      stopped.push(...loseNode(1, marker, run.out(), { memory, signal: 'SIGSTOP' }))
      // mpirun waits for the stopped node: the others' outcome is in the status file.
      await statusEnded(status)
      expect(statusOf(status), run.out()).toMatchObject({ state: 'ended', exitCode: 0 })
      expect(run.out()).toMatch(/node 1 lost( at step \d+)? \(silent for \d+\.\d s \(--node-timeout 3\.0 s\)\); spare node 3 took rank 1 \(0 spare nodes left\)/)
      expect(eventsIn(events).filter((e) => e.event === 'node-lost')).toMatchObject([{ node: 1, outcome: 'replaced', spare: 3, ranks: [1] }])
      // Node 1 wakes up: it reads that it was dropped and exits; the status file still says 0.
      signalEach(stopped, 'SIGCONT')
      expect(await run.code, run.out()).toBe(0)
      const out = run.out()
      expect(out).toMatch(/node 1: node 0 counted this node as lost \(silent for/)
      expect(statusOf(status), out).toMatchObject({ state: 'ended', exitCode: 0, node: 0 })
      const { value } = jsonOf<{ value: number }>(out)
      expect(Object.is(value, reference()), `${value}\n${out}`).toBe(true)
    } finally {
      signalEach(stopped, 'SIGKILL')
      killAll(4, marker)
    }
  }, 90_000)
})

describe.skipIf(noNetns !== undefined)('swing: a node whose link goes down, replaced by a spare (each node in its own network namespace)', () => {
  it("node 1's interface down with its directories deleted: lost after --node-timeout, spare node 3 takes rank 1; exit 0, the serial valuation's bits; node 1, cut off, leaves with 76", async () => {
    const net = new NodeNamespaces(`nsw${process.pid % 100000}`, 4, '10.78.0')
    networks.push(net)
    net.remove()
    net.create()
    const marker = join(root, 'down-')
    const memory = join(root, 'down-memory-')
    const status = join(root, 'down-status.json')
    const events = join(root, 'down-events.jsonl')
    const run = startInNamespaces(net, [
      ...model, '--spare-nodes', '1', '--node-timeout', '2s',
      '--checkpoint', 'every:100', '--checkpoint-dir', `${marker}{node}`, '--memory-checkpoint', 'every:20', '--memory-dir', `${memory}{node}`, '--hang-timeout', '20000',
      '--status-file', status, '--events', events, '--log', 'all', '--json',
    ], secret)
    try {
      await until(run.out, /checkpoint 2 committed to partner/, run.ended)
      expect(run.out()).not.toMatch(/"value"/)
      net.linkDown(1)
      // Node 1's processes live on behind the cut and may still be writing there: retry a directory refilled under the removal.
      rmSync(`${marker}1`, { recursive: true, force: true, maxRetries: 20 })
      rmSync(`${memory}1`, { recursive: true, force: true, maxRetries: 20 })
      const written = await endedByNode0(status, run)
      expect(written, run.out()).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done', node: 0 })
      expect(run.out()).toMatch(/node 1 lost( at step \d+)? \(silent for \d+\.\d s \(--node-timeout 2\.0 s\)\); spare node 3 took rank 1 \(0 spare nodes left\)/)
      expect(eventsIn(events).filter((e) => e.event === 'node-lost')).toMatchObject([{ node: 1, outcome: 'replaced', spare: 3, ranks: [1] }])
      await run.code
      const out = run.out()
      expect(out).toMatch(/node 1 exited with 76/)
      expect(out).toMatch(/node 0 exited with 0/)
      const { value } = jsonOf<{ value: number }>(out)
      expect(Object.is(value, reference()), `${value}\n${out}`).toBe(true)
    } finally {
      killAll(4, marker)
    }
  }, 90_000)
})
