// A lost node under `mpirun --enable-recovery`, each node in its own network
// namespace (namespaces.ts): its link taken down, a partition, a slow link, its
// whole process tree killed. The run's outcome is read from --status-file
// (mpirun --enable-recovery exits 0 whatever); the bits are checked against
// serial references written without molotof (examples/*/serial.ts).
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { alive, checksumIn, endedByNode0, eventsIn, haveMpirun, type Job, jacobiBits, killAll, MPIRUN, processesOfNode, startInNamespaces, swingValue, until as waitFor } from './mpirun-job.js'
import { delayingProxy, namespacesUnavailable, NodeNamespaces } from './namespaces.js'

const unavailable = haveMpirun ? namespacesUnavailable() : `${MPIRUN} is missing (apt-get install openmpi-bin)`
if (unavailable !== undefined) console.log(`network-namespace node-loss tests skipped: ${unavailable}`)

const root = mkdtempSync(join(tmpdir(), 'molotof-netns-'))
const networks: NodeNamespaces[] = []
afterAll(() => {
  for (const net of networks) net.remove()
  rmSync(root, { recursive: true, force: true })
})

/** Fresh namespaces for one test, removed in afterAll whatever happens ('nns' + pid: other engineers' runs use other names). */
function network(tag: string, nodes: number, hostOnBridge = false): NodeNamespaces {
  // With the host on the bridge, a subnet of this process's own: the host routes it.
  const subnet = hostOnBridge ? `10.79.${process.pid % 250}` : '10.77.0'
  const net = new NodeNamespaces(`nns${process.pid % 100000}${tag}`, nodes, subnet, hostOnBridge)
  networks.push(net)
  net.remove()
  net.create()
  return net
}

// The harness's calls (mpirun-job.ts) under the names these tests use.
const startRun = (net: NodeNamespaces, args: string[], rendezvous?: string): Job => startInNamespaces(net, args, 'a secret of the namespace tests', rendezvous)
const until = (text: () => string, pattern: RegExp, run: Job, ms?: number): Promise<number> => waitFor(text, pattern, run.ended, ms)
const ended = endedByNode0

describe.skipIf(unavailable !== undefined)('a node whose link goes down (each node in its own network namespace)', () => {
  it("3 working nodes + 1 spare, node 1's interface down: lost after --node-timeout (not before), spare node 3 takes rank 1; exit 0, the serial bits", async () => {
    const net = network('a', 4)
    const n = 40
    const iterations = 2000
    const marker = join(root, 'down-spare-')
    const status = join(root, 'down-spare-status.json')
    const events = join(root, 'down-spare-events.jsonl')
    const run = startRun(net, [
      'examples/jacobi/jacobi.ts', '--n', String(n), '--iterations', String(iterations), '--spare-nodes', '1', '--node-timeout', '2s',
      '--checkpoint', 'every:100', '--checkpoint-dir', `${marker}{node}`, '--memory-checkpoint', 'every:20', '--hang-timeout', '20000',
      '--status-file', status, '--events', events, '--log', 'all',
    ])
    try {
      await until(run.out, /checkpoint 2 committed to partner/, run)
      expect(run.out()).not.toMatch(/checksum/)
      net.linkDown(1)
      // Node 1's processes live on behind the cut and may still be writing there: retry a directory refilled under the removal.
      rmSync(`${marker}1`, { recursive: true, force: true, maxRetries: 20 })
      const detected = await until(run.out, /node 1 lost/, run)
      // Silence, not a reset: the loss is told only once --node-timeout has passed (2 s), and soon after.
      expect(detected, run.out()).toBeGreaterThanOrEqual(2000)
      expect(detected, run.out()).toBeLessThan(2000 + 3000)
      const written = await ended(status, run)
      const out = run.out()
      expect(written, out).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done', node: 0 })
      expect(out).toMatch(/node 1 lost( at step \d+)? \(silent for \d+\.\d s \(--node-timeout 2\.0 s\)\); spare node 3 took rank 1 \(0 spare nodes left\)/)
      expect(Object.is(checksumIn(out), jacobiBits(n, iterations)), out).toBe(true)
      expect(eventsIn(events).filter((e) => e.event === 'node-lost')).toMatchObject([{ node: 1, outcome: 'replaced', spare: 3, ranks: [1] }])
      // Node 1, cut off, found node 0 silent and left with 76 on its own: it did not compute on.
      expect(out).toMatch(/node 1: lost node 0, the coordinator \(silent for more than 2\.0 s \(--node-timeout\)\)/)
      await run.code
      expect(run.out()).toMatch(/node 1 exited with 76/)
      expect(run.out()).toMatch(/node 0 exited with 0/)
    } finally {
      killAll(4, marker)
    }
  }, 60_000)

  it("3 nodes, no spare, node 2's interface down: the run shrinks to 2 ranks; exit 0, the serial bits", async () => {
    const net = network('b', 3)
    const n = 40
    const iterations = 2000
    const marker = join(root, 'down-shrink-')
    const status = join(root, 'down-shrink-status.json')
    const run = startRun(net, [
      'examples/jacobi/jacobi.ts', '--n', String(n), '--iterations', String(iterations), '--node-timeout', '2s',
      '--checkpoint', 'every:100', '--checkpoint-dir', `${marker}{node}`, '--memory-checkpoint', 'every:20', '--hang-timeout', '20000',
      '--status-file', status, '--log', 'all',
    ])
    try {
      await until(run.out, /checkpoint 2 committed to partner/, run)
      expect(run.out()).not.toMatch(/checksum/)
      net.linkDown(2)
      const written = await ended(status, run)
      const out = run.out()
      expect(written, out).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done', node: 0 })
      expect(out).toMatch(/node 2 lost( at step \d+)? \(silent for \d+\.\d s \(--node-timeout 2\.0 s\)\); no spare node left: the run goes on with 2 ranks/)
      expect(out).toMatch(/resuming a checkpoint of 3 ranks on 2/)
      expect(Object.is(checksumIn(out), jacobiBits(n, iterations)), out).toBe(true)
    } finally {
      killAll(3, marker)
    }
  }, 60_000)
})

/** What node `i`'s rate limiter did: packets held back (overlimits) and dropped, on both ends of its link. */
function limiterStats(net: NodeNamespaces, i: number): { overlimits: number; dropped: number } {
  let overlimits = 0
  let dropped = 0
  for (const where of [['-n', net.ns(i), '-s', 'qdisc', 'show', 'dev', 'eth0'], ['-s', 'qdisc', 'show', 'dev', net.hostEnd(i)]]) {
    const text = execFileSync('tc', where, { encoding: 'utf8' })
    overlimits += Number(/overlimits (\d+)/.exec(text)?.[1] ?? 0)
    dropped += Number(/dropped (\d+)/.exec(text)?.[1] ?? 0)
  }
  return { overlimits, dropped }
}

describe.skipIf(unavailable !== undefined)('a slow link for a whole run (each node in its own network namespace)', () => {
  it("node 1's link rate-limited both ways (tc tbf) from the start: no node is taken for lost under a 3 s --node-timeout, exit 0, the serial bits", async () => {
    const net = network('c', 3)
    net.rateLimit(1, '1mbit')
    const n = 80
    const iterations = 600
    const marker = join(root, 'slow-')
    const status = join(root, 'slow-status.json')
    const events = join(root, 'slow-events.jsonl')
    const started = Date.now()
    const run = startRun(net, [
      'examples/jacobi/jacobi.ts', '--n', String(n), '--iterations', String(iterations), '--node-timeout', '3s',
      '--checkpoint', 'every:100', '--checkpoint-dir', `${marker}{node}`, '--memory-checkpoint', 'every:50', '--hang-timeout', '20000',
      '--status-file', status, '--events', events, '--log', 'all',
    ])
    try {
      const written = await ended(status, run)
      const out = run.out()
      expect(written, out).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done', node: 0 })
      expect(out).not.toMatch(/lost|fell silent/)
      expect(eventsIn(events).filter((e) => e.event === 'node-lost' || e.event === 'restart')).toEqual([])
      expect(Object.is(checksumIn(out), jacobiBits(n, iterations)), out).toBe(true)
      // The link was really the bottleneck: the limiter held packets back, for longer than the node timeout in all.
      const held = limiterStats(net, 1)
      expect(held.overlimits, JSON.stringify(held)).toBeGreaterThan(0)
      expect(Date.now() - started).toBeGreaterThan(3000)
    } finally {
      killAll(3, marker)
    }
  }, 60_000)

  it("node 1's control connection delayed 100 ms and stalled 1.5 s every 4 s (a proxy at the rendezvous): no node is taken for lost under a 3 s --node-timeout, nor a rank for hung under the default --hang-timeout", async () => {
    const net = network('g', 3, true)
    const proxy = await delayingProxy({ host: net.hostAddress, port: 29500 }, { host: net.address(0), port: 29500 }, { from: net.address(1), delayMs: 100, stallEveryMs: 4000, stallMs: 1500 })
    const n = 40
    const iterations = 8000
    const marker = join(root, 'stall-')
    const status = join(root, 'stall-status.json')
    const events = join(root, 'stall-events.jsonl')
    // Node 0 cannot listen at the proxy's address: it listens on every interface at that port, and the others reach it through the proxy.
    const run = startRun(net, [
      'examples/jacobi/jacobi.ts', '--n', String(n), '--iterations', String(iterations), '--node-timeout', '3s',
      '--checkpoint', 'every:100', '--checkpoint-dir', `${marker}{node}`, '--memory-checkpoint', 'every:20',
      '--status-file', status, '--events', events, '--log', 'all',
    ], `${net.hostAddress}:29500`)
    try {
      const written = await ended(status, run)
      const out = run.out()
      expect(written, out).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done', node: 0 })
      expect(out).not.toMatch(/lost|fell silent|hung/)
      expect(eventsIn(events).filter((e) => e.event === 'node-lost' || e.event === 'restart')).toEqual([])
      expect(Object.is(checksumIn(out), jacobiBits(n, iterations)), out).toBe(true)
      // The stalls held node 1's traffic back while the run went on.
      expect(proxy.stalls(), out).toBeGreaterThanOrEqual(2)
    } finally {
      proxy.close()
      killAll(3, marker)
    }
  }, 60_000)
})

describe.skipIf(unavailable !== undefined)('a partition of 2 | 1 nodes (each node in its own network namespace)', () => {
  it('node 2 cut off from nodes 0 and 1: it stops with 76 within --node-timeout + 3 s (every member below it asked at once), nodes 0 and 1 finish with the serial bits; a later --resume of the same directories continues their line', async () => {
    const net = network('d', 3)
    const n = 40
    const iterations = 2000
    const marker = join(root, 'split-')
    const status = join(root, 'split-status.json')
    const events = join(root, 'split-events.jsonl')
    const args = [
      'examples/jacobi/jacobi.ts', '--n', String(n), '--iterations', String(iterations), '--node-timeout', '2s',
      '--checkpoint', 'every:100', '--checkpoint-dir', `${marker}{node}`, '--memory-checkpoint', 'every:20', '--hang-timeout', '20000',
      '--status-file', status, '--log', 'all',
    ]
    const run = startRun(net, [...args, '--events', events])
    try {
      await until(run.out, /checkpoint 3 committed to partner/, run)
      expect(run.out()).not.toMatch(/checksum/)
      // Node 2's supervisor and rank processes; not the TypeScript loader's esbuild helper (run from the sources), which lingers a second after its parent is gone.
      const minority = processesOfNode(2, marker).filter((pid) => !readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('esbuild'))
      expect(minority.length, run.out()).toBeGreaterThan(0)
      net.cutOff(2)
      const cut = Date.now()
      // The minority stops on its own (node 0 is silent to it): it asks node 1, the only member below it, whether it
      // leads (unanswered: 1 s to connect under a 2 s --node-timeout), then finds it holds no majority: every process of node 2 gone.
      // Measured about 3.2 s after the cut (the code that asked candidates one by one and waited for node 1 to join took 5 s or more).
      while (minority.some(alive) && Date.now() - cut < 25_000) await new Promise((r) => setTimeout(r, 20))
      const stoppedAfter = Date.now() - cut
      expect(minority.filter(alive), run.out()).toEqual([])
      expect(stoppedAfter, run.out()).toBeLessThan(2000 + 3000)
      expect(run.out()).toMatch(/node 2: node 0 was lost \(silent for more than 2\.0 s \(--node-timeout\)\), and this side holds 1 of the 3 nodes of the last membership \(nodes 2 of 0, 1, 2\): not a majority/)
      expect(run.out()).toMatch(/node 2 exited with 76/)
      const written = await ended(status, run)
      const out = run.out()
      expect(written, out).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done', node: 0 })
      expect(out).toMatch(/node 2 lost( at step \d+)? \(silent for \d+\.\d s \(--node-timeout 2\.0 s\)\); no spare node left: the run goes on with 2 ranks/)
      expect(Object.is(checksumIn(out), jacobiBits(n, iterations)), out).toBe(true)
      await run.code
      const lastLine = [...out.matchAll(/checkpoint (\d+) committed to disk: skeleton 0, step (\d+)/g)].pop()
      expect(lastLine, out).toBeDefined()

      // The partition healed, the same directories: the resume takes the majority's last line (2 ranks), not node 2's older one.
      // The first run's end, removed: waiting for node 0's end must wait for the second run's, not find the first's.
      rmSync(status, { force: true })
      const again = startRun(network('e', 3), [...args, '--events', events, '--resume'])
      const second = await ended(status, again)
      const out2 = again.out()
      expect(second, out2).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done', node: 0 })
      expect(out2).toMatch(/resuming a checkpoint of 2 ranks on 3/)
      const resume = eventsIn(events).find((e) => e.event === 'resume')
      expect(resume, out2).toMatchObject({ seq: Number(lastLine![1]), step: Number(lastLine![2]) })
      expect(Object.is(checksumIn(out2), jacobiBits(n, iterations)), out2).toBe(true)
    } finally {
      killAll(3, marker)
    }
  }, 60_000)
})

describe.skipIf(unavailable !== undefined)('swing with a spare node (each node in its own network namespace)', () => {
  it("3 working nodes + 1 spare, node 2's whole process tree SIGKILLed: spare node 3 takes rank 2; exit 0, the serial valuation's bits", async () => {
    const net = network('f', 4)
    const marker = join(root, 'swing-')
    // The memory level in a directory of the test's own, so that the lost node's goes with it (its RAM).
    const memory = join(root, 'swing-memory-')
    const status = join(root, 'swing-status.json')
    const events = join(root, 'swing-events.jsonl')
    // daily-g over 4 years: 1500 decision dates, long enough to lose a node in the middle.
    const model = ['--preset', 'daily-g', '--n', '1500', '--t', '4']
    const run = startRun(net, [
      'examples/swing/swing.ts', ...model, '--spare-nodes', '1', '--node-timeout', '5s',
      '--checkpoint', 'every:100', '--checkpoint-dir', `${marker}{node}`, '--memory-checkpoint', 'every:20', '--memory-dir', `${memory}{node}`, '--hang-timeout', '20000',
      '--status-file', status, '--events', events, '--log', 'all', '--json',
    ])
    try {
      await until(run.out, /checkpoint 2 committed to partner/, run)
      expect(run.out()).not.toMatch(/"value"/)
      const tree = processesOfNode(2, marker)
      expect(tree.length, run.out()).toBeGreaterThan(1)
      for (const pid of tree) process.kill(pid, 'SIGKILL')
      rmSync(`${marker}2`, { recursive: true, force: true })
      rmSync(`${memory}2`, { recursive: true, force: true })
      const written = await ended(status, run)
      const out = run.out()
      expect(written, out).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done', node: 0 })
      // Killed: its connections reset, no waiting for the node timeout.
      expect(out).toMatch(/node 2 lost( at step \d+)? \(the connection closed\); spare node 3 took rank 2 \(0 spare nodes left\)/)
      expect(eventsIn(events).filter((e) => e.event === 'node-lost')).toMatchObject([{ node: 2, outcome: 'replaced', spare: 3, ranks: [2] }])
      const { value } = JSON.parse(out.slice(out.indexOf('{\n'), out.lastIndexOf('\n}') + 2)) as { value: number }
      expect(Object.is(value, swingValue('daily-g', { N: 1500, T: 4 })), out).toBe(true)
    } finally {
      killAll(4, marker)
    }
  }, 60_000)
})
