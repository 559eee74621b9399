// Cluster runs started by hand with a launcher's variables (PMI_RANK/PMI_SIZE),
// for what mpirun cannot easily produce: bad input at the rendezvous and a
// lost node. test/runtime/cluster/mpirun.test.ts runs the real launcher.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import type { JacobiResult } from '../../examples/jacobi/jacobi.js'
import { launch } from '../../src/runtime/launch/launcher.js'
import { freePort, jacobiResultOf, type Job, startNode as startNodeWith, until } from '../runtime/cluster/mpirun-job.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-cluster-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
const JACOBI = 'examples/jacobi/jacobi.ts'

/** One node supervisor as a launcher starts it, with the batch script's secret (every node the same): a cluster run without one is refused. */
const startNode = (node: number, nodes: number, args: string[]): Job => startNodeWith(node, nodes, args, 'a secret of the cluster tests')

const common = (port: number, dir: string) => [JACOBI, '--rendezvous', `127.0.0.1:${port}`, '--checkpoint-dir', dir, '--node-timeout', '20s', '--hang-timeout', '20000']

describe('cluster runs: bad input is refused, never a hang', () => {
  it('nodes started with different program options are refused, naming the difference', async () => {
    const port = await freePort()
    const dir = join(root, 'opts-{node}')
    const a = startNode(0, 2, [...common(port, dir), '--n', '16', '--iterations', '4'])
    const b = startNode(1, 2, [...common(port, dir), '--n', '32', '--iterations', '4'])
    expect(await a.code).toBe(2)
    expect(await b.code).toBe(2)
    for (const n of [a, b]) expect(n.out()).toMatch(/node 1 was started differently from node 0[\s\S]*program options: node 0 has "--n 16 --iterations 4", node 1 has "--n 32 --iterations 4"/)
  })

  it('inconsistent launcher sizes across nodes are refused', async () => {
    const port = await freePort()
    const dir = join(root, 'sizes-{node}')
    const a = startNode(0, 2, [...common(port, dir), '--n', '16', '--iterations', '4'])
    const b = startNode(1, 3, [...common(port, dir), '--n', '16', '--iterations', '4'])
    expect(await a.code).toBe(2)
    expect(a.out()).toMatch(/inconsistent launcher sizes: node 0 was started as one of 2 nodes, node 1 as one of 3/)
    expect(await b.code).toBe(2)
  })

  it('two nodes on one machine with one checkpoint directory are refused: put {node} in it', async () => {
    const port = await freePort()
    const dir = join(root, 'shared-dir')
    const a = startNode(0, 2, [...common(port, dir), '--n', '16', '--iterations', '4'])
    const b = startNode(1, 2, [...common(port, dir), '--n', '16', '--iterations', '4'])
    expect(await a.code).toBe(2)
    expect(await b.code).toBe(2)
    expect(a.out()).toMatch(/run on one machine with one checkpoint directory .*their files would collide. Put \{node\} in --checkpoint-dir/)
  })

  it('an unreachable rendezvous fails within --node-timeout', async () => {
    const port = await freePort()
    const t0 = performance.now()
    const b = startNode(1, 2, [JACOBI, '--rendezvous', `127.0.0.1:${port}`, '--node-timeout', '1s', '--checkpoint-dir', join(root, 'unreach-{node}')])
    expect(await b.code).toBe(1)
    const seconds = (performance.now() - t0) / 1000
    expect(b.out()).toMatch(new RegExp(`node 1: cannot reach node 0's rendezvous at 127.0.0.1:${port} within 1.0 s \\(--node-timeout\\)`))
    expect(seconds).toBeLessThan(15) // 1 s of trying plus a node start on a loaded machine
  })

  it('a rendezvous port in use is refused, naming it', async () => {
    const busy: Server = createServer()
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', () => r()))
    const port = (busy.address() as { port: number }).port
    try {
      const a = startNode(0, 2, [...common(port, join(root, 'busy-{node}')), '--n', '16'])
      expect(await a.code).toBe(2)
      expect(a.out()).toMatch(new RegExp(`cannot listen at the rendezvous 127.0.0.1:${port}: the port is in use`))
    } finally {
      busy.close()
    }
  })
})

/**
 * Two nodes running Jacobi with checkpoints in `<name>-{node}`: node 1 is killed whole (its supervisor and its
 * rank) once a checkpoint and its partner copies exist, and its disk is lost. Node 0 is returned, still running.
 */
async function loseNode1(name: string): Promise<Job> {
  const args = [...common(await freePort(), join(root, `${name}-{node}`)), '--node-timeout', '3s', '--n', '40', '--iterations', '2000', '--checkpoint', 'every:50', '--json']
  const a = startNode(0, 2, args)
  const b = startNode(1, 2, args)
  await until(a.out, /checkpoint 2 committed to partner/, undefined, 60_000)
  expect(a.out()).not.toMatch(/"checksum"/) // still running
  process.kill(-b.pid, 'SIGKILL')
  rmSync(join(root, `${name}-1`), { recursive: true, force: true })
  return a
}

describe('cluster runs: a lost node', () => {
  it('ends the run with 76 "node lost", and a relaunch with --resume gives the bits of an uninterrupted run, its directory gone too', async () => {
    const dir = join(root, 'lost-{node}')
    const a = await loseNode1('lost')
    expect(await a.code).toBe(76)
    expect(a.out()).toMatch(/node 1 was lost/)

    const port2 = await freePort()
    const again = [...common(port2, dir), '--n', '40', '--iterations', '2000', '--checkpoint', 'every:50', '--json', '--quiet', '--resume']
    const events = join(root, 'lost-events.jsonl')
    const a2 = startNode(0, 2, [...again, '--events', events])
    const b2 = startNode(1, 2, again)
    expect(await a2.code).toBe(0)
    expect(await b2.code).toBe(0)
    const straight = (await launch<JacobiResult>(JACOBI, { ranks: 2, argv: ['--n', '40', '--iterations', '2000'], onLog: () => {} })).value
    const pick = (r: { residual: number; checksum: number }) => ({ residual: r.residual, checksum: r.checksum })
    // It did resume, from a checkpoint written before the loss.
    const resumed = readFileSync(events, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { event: string; seq?: number; level?: string })
    const resume = resumed.find((e) => e.event === 'resume')
    expect(resume?.seq, a2.out()).toBeGreaterThanOrEqual(2)
    // Node 1's rank read its file from the copy node 0 kept.
    expect(resume?.level).toBe('disk+partner')
    expect(jacobiResultOf(a2.out())).toEqual(pick(straight))

    // Node 1's directory and the partner copies node 0 kept lost: --resume refuses, naming what is missing, instead of starting afresh.
    rmSync(join(root, 'lost-1'), { recursive: true })
    rmSync(join(root, 'lost-0', 'partner'), { recursive: true })
    const port3 = await freePort()
    const third = [...common(port3, dir), '--n', '40', '--iterations', '2000', '--checkpoint', 'every:50', '--quiet', '--resume']
    const a3 = startNode(0, 2, third)
    const b3 = startNode(1, 2, third)
    expect(await a3.code).toBe(2)
    await b3.code
    expect(a3.out()).toMatch(/cannot resume: rank 0 holds checkpoint \d+, but rank 1 finds no checkpoint at all .*missing: .*lost-1\/ckpt-\d+\/rank-1\.mlf \(and no partner or shared copy of them was found\)/)
  })

  it('node 0 and the partner holding its copies lost: the relaunch resumes from --shared-dir, bit-identical', async () => {
    const port = await freePort()
    const dir = join(root, 'both-{node}')
    const shared = join(root, 'shared')
    const copies = ['--shared-dir', shared, '--shared-checkpoint', 'every:2']
    const args = [...common(port, dir), ...copies, '--node-timeout', '3s', '--n', '40', '--iterations', '2000', '--checkpoint', 'every:50', '--json']
    const a = startNode(0, 2, args)
    const b = startNode(1, 2, args)
    await until(a.out, /checkpoint 2 committed to shared/, undefined, 60_000)
    // Node 0 lost (the supervisor of the run, and the directory the lineage is read from); with two nodes
    // node 1 holds node 0's copies, so both directories go.
    process.kill(-a.pid, 'SIGKILL')
    for (const n of [0, 1]) rmSync(join(root, `both-${n}`), { recursive: true, force: true })
    expect(await b.code).toBe(76)
    expect(b.out()).toMatch(/lost node 0/)

    const port2 = await freePort()
    const again = [...common(port2, dir), ...copies, '--n', '40', '--iterations', '2000', '--checkpoint', 'every:50', '--json', '--quiet', '--resume']
    const events = join(root, 'both-events.jsonl')
    const a2 = startNode(0, 2, [...again, '--events', events])
    const b2 = startNode(1, 2, again)
    expect(await a2.code).toBe(0)
    expect(await b2.code).toBe(0)
    const resume = readFileSync(events, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { event: string; seq?: number; level?: string }).find((e) => e.event === 'resume')
    expect(resume?.level).toBe('shared')
    expect(resume?.seq).toBeGreaterThanOrEqual(2)
    const straight = (await launch<JacobiResult>(JACOBI, { ranks: 2, argv: ['--n', '40', '--iterations', '2000'], onLog: () => {} })).value
    expect(jacobiResultOf(a2.out())).toEqual({ residual: straight.residual, checksum: straight.checksum })
  })
})

describe('cluster runs: copy levels refuse bad input', () => {
  it('--shared-checkpoint without --shared-dir, and partner copies on one node, are refused', async () => {
    const noDir = startNode(0, 1, [JACOBI, '--shared-checkpoint', 'every:2', '--checkpoint-dir', join(root, 'nodir')])
    expect(await noDir.code).toBe(2)
    expect(noDir.out()).toMatch(/--shared-checkpoint copies checkpoints to the shared directory: give --shared-dir DIR too/)
    const one = startNode(0, 1, [JACOBI, '--partner-copies', 'on', '--checkpoint-dir', join(root, 'one')])
    expect(await one.code).toBe(2)
    expect(one.out()).toMatch(/--partner-copies on: this run has one node, so there is no partner on another node/)
  })
})
