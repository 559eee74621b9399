// molotof under a real cluster launcher: Debian's Open MPI `mpirun` (package
// openmpi-bin; `npm test` installs it as root, see scripts/ensure-openmpi.mjs).
// Every "node" runs on this host with its own checkpoint directory ({node});
// as root, also in its own Linux network namespace, so that TCP between ranks
// crosses real (virtual) interfaces. Grids are small: each run costs a few
// seconds of node starts.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { JacobiResult } from '../../../examples/jacobi/jacobi.js'
import { main } from '../../../src/cli/main.js'
import { launch } from '../../../src/runtime/launch/launcher.js'
import {
  eventsIn, freePort, haveMpirun, jsonOf, MOLOTOF_RUN, MPIRUN, mpirun as mpirunJob, poll, processesOfNode, signalEach, signalNode, startMpirun, statusOf, swingValue, until,
} from './mpirun-job.js'
import { namespacesUnavailable, NodeNamespaces } from './namespaces.js'

if (!haveMpirun) console.log(`mpirun tests skipped: ${MPIRUN} is missing (apt-get install openmpi-bin; npm test installs it as root, see scripts/ensure-openmpi.mjs)`)

const root = mkdtempSync(join(tmpdir(), 'molotof-mpirun-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
const secret = 'a secret of the mpirun tests'

/** `mpirun -np <nodes> <command…>` (without --enable-recovery: a node's loss ends the job); its code and output. */
const mpirun = (nodes: number, command: string[]) => mpirunJob(nodes, command, { secret })
const molotof = MOLOTOF_RUN

describe.skipIf(!haveMpirun)('under mpirun', () => {
  let reference: JacobiResult
  const jacobi = ['examples/jacobi/jacobi.ts', '--n', '48', '--iterations', '60']
  beforeAll(async () => {
    // One host, threads: the bits every cluster layout must give.
    reference = (await launch<JacobiResult>(jacobi[0], { ranks: 4, argv: jacobi.slice(1), onLog: () => {} })).value
  })

  it('Jacobi on 2 nodes × 2 ranks gives the bits of one host; each node keeps its own {node} directory', async () => {
    const dir = join(root, 'jac-{node}')
    const port = await freePort()
    const r = await mpirun(2, [...molotof, ...jacobi, '--ranks-per-node', '2', '--rendezvous', `127.0.0.1:${port}`, '--checkpoint', 'every:20', '--checkpoint-dir', dir, '--json', '--hang-timeout', '20000'])
    expect(r.code, r.out).toBe(0)
    const got = jsonOf<JacobiResult>(r.out)
    expect(got.checksum).toBe(reference.checksum)
    expect(got.residual).toBe(reference.residual)
    for (const [node, ranks] of [[0, ['rank-0.mlf', 'rank-1.mlf']], [1, ['rank-2.mlf', 'rank-3.mlf']]] as const) {
      const d = join(root, `jac-${node}`)
      const newest = readdirSync(d).filter((n) => n.startsWith('ckpt-')).sort().pop()!
      expect(readdirSync(join(d, newest)).sort()).toEqual(['COMMIT', ...ranks])
    }
    // Partner copies: each node keeps the other node's rank files of the newest checkpoint, the same bytes, committed.
    for (const [node, other, ranks] of [[0, 1, ['rank-2.mlf', 'rank-3.mlf']], [1, 0, ['rank-0.mlf', 'rank-1.mlf']]] as const) {
      const own = join(root, `jac-${other}`)
      const newest = readdirSync(own).filter((n) => n.startsWith('ckpt-')).sort().pop()!
      const copy = join(root, `jac-${node}`, 'partner', newest)
      expect(readdirSync(copy).sort()).toEqual(['COMMIT', ...ranks])
      for (const f of ranks) expect(readFileSync(join(copy, f)).equals(readFileSync(join(own, newest, f)))).toBe(true)
    }
    // inspect reads the {node} directories as one run; a rank file lost from them is named.
    const said: string[] = []
    expect(await main(['inspect', dir], (t) => said.push(t))).toBe(0)
    const last = readdirSync(join(root, 'jac-1')).filter((n) => n.startsWith('ckpt-')).sort().pop()!
    rmSync(join(root, 'jac-1', last, 'rank-3.mlf'))
    expect(await main(['inspect', dir], (t) => said.push(t))).toBe(1)
    expect(said.join('\n')).toMatch(/no directory holds the file of rank 3/)
  })

  it('swing on 3 nodes × 1 rank gives the bits of the serial valuation', async () => {
    const port = await freePort()
    const r = await mpirun(3, [...molotof, 'examples/swing/swing.ts', '--preset', 'small-g', '--rendezvous', `127.0.0.1:${port}`, '--checkpoint-dir', join(root, 'swing-{node}'), '--json', '--quiet', '--hang-timeout', '20000'])
    expect(r.code, r.out).toBe(0)
    const { value } = jsonOf<{ value: number }>(r.out)
    expect(Object.is(value, swingValue('small-g'))).toBe(true)
  })

  it('a rank killed on node 1 is recovered inside the run', async () => {
    const port = await freePort()
    const events = join(root, 'kill-events.jsonl')
    const r = await mpirun(2, [
      ...molotof,
      ...jacobi,
      '--ranks-per-node', '2',
      '--rendezvous', `127.0.0.1:${port}`,
      '--checkpoint', 'every:10',
      '--checkpoint-dir', join(root, 'kill-{node}'),
      '--inject', 'rank=3,step=35',
      '--events', events,
      '--json',
      '--hang-timeout', '20000',
    ])
    expect(r.code, r.out).toBe(0)
    const got = jsonOf<JacobiResult>(r.out)
    expect(got.checksum).toBe(reference.checksum)
    const seen = eventsIn(events)
    expect(seen.filter((e) => e.event === 'failure')).toMatchObject([{ rank: 3, step: 35 }])
    expect(seen.find((e) => e.event === 'resume')).toMatchObject({ step: 29 })
  })
})


describe.skipIf(!haveMpirun)('under mpirun, a lost node', () => {
  it.each([
    [1, 0],
    [0, 1],
  ])("node %i killed outright: mpirun exits 137, node %i's --status-file says 76 (resumable), and README's batch loop reads 76 from it", async (lost, left) => {
    const status = join(root, `killed-${lost}-status.json`)
    const command = [
      ...molotof,
      'examples/jacobi/jacobi.ts', '--n', '40', '--iterations', '500000',
      '--checkpoint', 'every:50', '--checkpoint-dir', join(root, `killed-${lost}-{node}`), '--hang-timeout', '20000',
      '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', status,
    ]
    const job = startMpirun(2, command, { secret })
    await until(job.out, /checkpoint 2 committed to partner/, job.ended)
    expect(statusOf(status), job.out()).toMatchObject({ state: 'running', exitCode: null })
    // The whole node dies at once, as with the OOM killer or a reboot: its supervisor and its ranks.
    signalNode(lost, join(root, `killed-${lost}-`), 'SIGKILL', job.out())
    expect(await job.code, job.out()).toBe(137)
    const written = statusOf(status)
    expect(written, job.out()).toMatchObject({ state: 'ended', exitCode: 76, outcome: 'node-lost', resumable: true, node: left })
    expect(written?.resume).toMatch(/^molotof run examples\/jacobi\/jacobi\.ts .*--status-file \S+ --resume$/)

    // README's loop: the line that reads the status file turns mpirun's 137 into 76 (a missing file leaves the code).
    const loop = /<!-- readme-test: batch-loop -->\n```sh\n([\s\S]*?)```/.exec(readFileSync('README.md', 'utf8'))?.[1] ?? ''
    const line = loop.split('\n').find((l) => l.includes('.exitCode')) ?? ''
    expect(line).toContain('"$status"')
    const codeAfter = (file: string) => execFileSync('bash', ['-c', `status=${file}; code=137; ${line}\necho $code`], { encoding: 'utf8' }).trim()
    expect(codeAfter(status)).toBe('76')
    expect(codeAfter(join(root, 'no-such-status.json'))).toBe('137')
  })

  it('node 1 hung and its directory lost: mpirun ends with 76, and `mpirun -np 1 … --resume` goes on from the partner copies, on the node left, bit-identical', async () => {
    const dir = join(root, 'gone-{node}')
    const events = join(root, 'gone-events.jsonl')
    const program = ['examples/jacobi/jacobi.ts', '--n', '40', '--iterations', '5000']
    const common = [...molotof, ...program, '--checkpoint', 'every:50', '--checkpoint-dir', dir, '--hang-timeout', '20000', '--json']
    const job = startMpirun(2, [...common, '--rendezvous', `127.0.0.1:${await freePort()}`, '--node-timeout', '3s'], { secret })
    await until(job.out, /checkpoint 2 committed to partner/, undefined, 60_000)
    expect(job.out()).not.toMatch(/"checksum"/)
    // A node that stops answering (as a crashed machine does): node 0 finds it silent past --node-timeout.
    const stopped = signalNode(1, join(root, 'gone-'), 'SIGSTOP', job.out())
    rmSync(join(root, 'gone-1'), { recursive: true, force: true })
    expect(await job.code, job.out()).toBe(76)
    expect(job.out()).toMatch(/node 1 was lost/)
    // Ended already, most of them (mpirun tears the job down).
    signalEach(stopped, 'SIGKILL')

    // The node left runs on: node 0's directory holds its own file and the copy of node 1's.
    const again = await mpirun(1, [...common, '--rendezvous', `127.0.0.1:${await freePort()}`, '--resume', '--events', events])
    expect(again.code, again.out).toBe(0)
    expect(again.out).toMatch(/resuming a checkpoint of 2 ranks on 1/)
    const resume = eventsIn(events).find((e) => e.event === 'resume')
    expect(resume?.level).toBe('disk+partner')
    const straight = (await launch<JacobiResult>(program[0], { ranks: 1, argv: program.slice(1), onLog: () => {} })).value
    expect(jsonOf<JacobiResult>(again.out).checksum).toBe(straight.checksum)
  })
})

describe.skipIf(!haveMpirun)('under mpirun, mpirun itself killed', () => {
  // The node supervisors run in process groups of their own: nothing signals them when mpirun dies outright. Each
  // notices that its parent (mpirun, or its daemon on other hosts) is gone, and the run checkpoints and stops.
  it('SIGKILL to mpirun: both node supervisors checkpoint and stop within seconds, not orphaned to the end', async () => {
    const marker = join(root, 'launcher-gone-')
    const status = join(root, 'launcher-gone-status.json')
    const events = join(root, 'launcher-gone.jsonl')
    const command = [
      ...molotof,
      'examples/jacobi/jacobi.ts', '--n', '40', '--iterations', '5000000', '--ranks-per-node', '1',
      '--checkpoint-dir', `${marker}{node}`, '--hang-timeout', '20000', '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', status, '--events', events,
    ]
    const job = startMpirun(2, command, { secret })
    const left = () => [...processesOfNode(0, marker), ...processesOfNode(1, marker)]
    try {
      await until(job.out, /step [1-9]\d* /)
      expect(left().length, job.out()).toBeGreaterThan(0)
      process.kill(job.pid, 'SIGKILL')
      await job.code
      await poll(() => left().length === 0, 20_000, 50)
      expect(left(), job.out()).toEqual([])
      expect(statusOf(status), job.out()).toMatchObject({ state: 'ended', exitCode: 75, resumable: true })
      const stop = eventsIn(events)
      // Node 0 notices its own launcher is gone, or hears first from node 1, which noticed its own and passed the stop on.
      expect(stop.find((e) => e.event === 'preempt-requested')?.why).toMatch(/launcher process that started this node supervisor .* is gone|on node 1/)
      for (const node of [0, 1]) {
        const d = `${marker}${node}`
        const committed = readdirSync(d).filter((n) => n.startsWith('ckpt-') && existsSync(join(d, n, 'COMMIT')))
        expect(committed.length, `${d}: ${readdirSync(d).join(' ')}`).toBeGreaterThan(0)
      }
    } finally {
      for (const pid of left()) process.kill(pid, 'SIGKILL')
    }
  }, 90_000)
})

describe.skipIf(!haveMpirun)('under mpirun, node 0 lost with its directory', () => {
  it('`mpirun -np 1 … --resume` on the node left resumes from what it holds (its own directory, numbered 1, and its partner copies), not from step 0', async () => {
    const dir = join(root, 'first-{node}')
    const events = join(root, 'first-events.jsonl')
    const program = ['examples/jacobi/jacobi.ts', '--n', '40', '--iterations', '5000']
    const common = [...molotof, ...program, '--ranks-per-node', '2', '--checkpoint', 'every:50', '--checkpoint-dir', dir, '--hang-timeout', '20000', '--json']
    const job = startMpirun(2, [...common, '--rendezvous', `127.0.0.1:${await freePort()}`, '--node-timeout', '3s'], { secret })
    await until(job.out, /checkpoint 2 committed to partner/, undefined, 60_000)
    expect(job.out()).not.toMatch(/"checksum"/)
    // Node 0 (the rendezvous, and the directory the run's record is in) stops answering, and its disk is lost.
    const stopped = signalNode(0, join(root, 'first-'), 'SIGSTOP', job.out())
    rmSync(join(root, 'first-0'), { recursive: true, force: true })
    expect(await job.code, job.out()).not.toBe(0)
    // Node 1 alone holds half of the two nodes, without node 0: it cannot tell a crash from a partition, and stops.
    expect(job.out()).toMatch(/node 1: lost node 0, the coordinator \(silent for more than 3\.0 s \(--node-timeout\)\)/)
    expect(job.out()).toMatch(/this side holds 1 of the 2 nodes of the last membership .*not a majority/)
    // Ended already, most of them (mpirun tears the job down).
    signalEach(stopped, 'SIGKILL')

    // The relaunch on the node left: it is node 0 now, its directory first-0 is new; first-1 holds everything.
    const again = await mpirun(1, [...common, '--rendezvous', `127.0.0.1:${await freePort()}`, '--resume', '--events', events])
    expect(again.code, again.out).toBe(0)
    expect(again.out).toMatch(/resuming a checkpoint of 4 ranks on 2/)
    const resume = eventsIn(events).find((e) => e.event === 'resume')
    expect(resume?.seq, again.out).toBeGreaterThanOrEqual(2)
    expect(resume?.step).toBeGreaterThanOrEqual(149)
    const straight = (await launch<JacobiResult>(program[0], { ranks: 2, argv: program.slice(1), onLog: () => {} })).value
    expect(jsonOf<JacobiResult>(again.out).checksum).toBe(straight.checksum)
  })
})

const noNetns = haveMpirun ? namespacesUnavailable() : undefined
const canNetns = haveMpirun && noNetns === undefined
if (haveMpirun && !canNetns) console.log(`mpirun network-namespace test skipped: ${noNetns}`)

describe.skipIf(!canNetns)('under mpirun, each node in its own network namespace', () => {
  const net = new NodeNamespaces(`mlt${process.pid % 100000}`, 3)
  beforeAll(() => net.create())
  afterAll(() => net.remove())

  it('3 nodes talk over TCP across veth interfaces and give the bits of one host', async () => {
    const argv = ['--n', '60', '--iterations', '40']
    const reference = (await launch<JacobiResult>('examples/jacobi/jacobi.ts', { ranks: 3, argv, onLog: () => {} })).value
    const before = [0, 1, 2].map((i) => net.sentBy(i))
    const cmd = `${net.exec} ${molotof.join(' ')} examples/jacobi/jacobi.ts ${argv.join(' ')} --rendezvous ${net.address(0)}:29500 --checkpoint every:10 --checkpoint-dir ${join(root, 'ns-{node}')} --json --quiet --hang-timeout 20000`
    const r = await mpirun(3, ['sh', '-c', cmd])
    expect(r.code, r.out).toBe(0)
    const got = jsonOf<JacobiResult>(r.out)
    expect(got.checksum).toBe(reference.checksum)
    expect(got.residual).toBe(reference.residual)
    // Each node sent its halos (40 steps × a row of 62 doubles to each neighbour) out through its own interface.
    const sent = [0, 1, 2].map((i) => net.sentBy(i) - before[i])
    for (const s of sent) expect(s).toBeGreaterThan(40 * 60 * 8)
  })
})
