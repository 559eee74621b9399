// XOR redundancy inside a run: a lost node's files rebuilt from its sets by
// the ranks that go on, on a spare node (mpirun --enable-recovery, as
// spare-nodes.test.ts runs it). 3 working nodes of 1 rank + 1 spare,
// xor:3: one set {0, 1, 2}. Every "node" runs on this host with its own
// checkpoint and memory directories ({node}).
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { after, eventsIn, freePort, haveMpirun, killAll, loseNode, MOLOTOF_RUN, sameJacobiBits, startMpirun, statusOf, until } from './mpirun-job.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-xor-spare-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
const secret = 'a secret of the xor spare-node test'

describe.skipIf(!haveMpirun)('XOR redundancy with a spare node (mpirun --enable-recovery)', () => {
  it("node 1 killed with its disk and RAM directories: spare node 3 takes rank 1, whose files the run rebuilds from its set inside the run; then node 2, no spare left: its files rebuilt beside rank 0's, the run goes on with 2 ranks; exit 0, the serial bits", async () => {
    const n = 40
    const iterations = 2500
    const marker = join(root, 'xs-')
    const memory = join(root, 'xs-memory-')
    const status = join(root, 'status.json')
    const events = join(root, 'events.jsonl')
    const run = startMpirun(4, [
      ...MOLOTOF_RUN,
      'examples/jacobi/jacobi.ts', '--n', String(n), '--iterations', String(iterations),
      '--spare-nodes', '1', '--redundancy', 'xor:3',
      '--checkpoint', 'every:100', '--checkpoint-dir', `${marker}{node}`, '--memory-checkpoint', 'every:20', '--memory-dir', `${memory}{node}`, '--hang-timeout', '20000',
      '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', status, '--events', events, '--log', 'all',
    ], { secret, recovery: true })
    try {
      await until(run.out, /checkpoint 3 committed to xor/, run.ended)
      expect(run.out()).not.toMatch(/partner/)
      // The whole node dies at once, its disk and its RAM with it.
      loseNode(1, marker, run.out(), { memory })
      // A second loss once rank 1's slices are made again on node 3: no spare left, the run goes on with 2 ranks.
      await until(run.out, /first superstep \d+ ms after the loss of node 1/, run.ended)
      const afterFirst = after(run.out, /first superstep \d+ ms after the loss of node 1/)
      await until(afterFirst, /committed to xor[\s\S]*committed to xor[\s\S]*committed to xor/, run.ended)
      loseNode(2, marker, run.out(), { memory })
      const code = await run.code
      const out = run.out()
      expect(code, out).toBe(0)
      expect(statusOf(status), out).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done' })
      expect(out).toMatch(/spare node 3 took rank 1/)
      // Rebuilt inside the run, into the spare node's directories (no --resume was given).
      expect(out).toMatch(/XOR redundancy: rebuilt the lost files of checkpoint \d+ from their XOR sets: rank 1 from ranks 0, 2/)
      // Rank 2's file rebuilt from the checkpoint's sets of 3 and written beside a survivor's; re-sliced for 2 ranks.
      expect(out).toMatch(/no spare node left: the run goes on with 2 ranks/)
      expect(out).toMatch(/XOR redundancy: rebuilt the lost files of checkpoint \d+ \(a checkpoint of 3 ranks, resumed on 2\) from their XOR sets: rank 2 from ranks 0, 1 \(beside rank 0's files\)/)
      expect(out).toMatch(/resuming a checkpoint of 3 ranks on 2/)
      expect(sameJacobiBits(out, n, iterations), out).toBe(true)
      const seen = eventsIn(events)
      expect(seen.filter((e) => e.event === 'node-lost'), out).toMatchObject([
        { node: 1, outcome: 'replaced', spare: 3, ranks: [1] },
        { node: 2, outcome: 'shrunk', ranks: [2], size: 2 },
      ])
      // Every rank restored from the memory level, the lost rank's file rebuilt there: no step lost to the disk level.
      const resumes = seen.filter((e) => e.event === 'resume')
      expect(resumes, out).toMatchObject([{ requested: false, level: 'memory' }, { requested: false, level: 'memory' }])
      expect(existsSync(`${marker}3`)).toBe(true)
    } finally {
      killAll(4, marker)
    }
  }, 90_000)
})
