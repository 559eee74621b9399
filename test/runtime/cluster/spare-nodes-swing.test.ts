// Spare nodes for swing under a real cluster launcher, as spare-nodes.test.ts
// does for Jacobi: `mpirun --enable-recovery` keeps the other nodes when one
// node's processes die (and exits 0 whatever they return, so the outcome is
// read from --status-file). Every "node" runs on this host with its own
// checkpoint and memory directories ({node}), one rank per node. Swing's
// supersteps are the decision dates, computed backwards; its checkpoints hold
// the value function of the date just computed (a box of volume levels ×
// lattice nodes), so a shrink restores it on fewer ranks as an elastic
// restart does.
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { after, eventsIn, freePort, haveMpirun, jsonOf, killAll, loseNode, MOLOTOF_RUN, MPIRUN, startMpirun, statusOf, swingValue, until } from './mpirun-job.js'

if (!haveMpirun) console.log(`swing spare-node tests skipped: ${MPIRUN} is missing (apt-get install openmpi-bin)`)

const root = mkdtempSync(join(tmpdir(), 'molotof-spares-swing-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
const secret = 'a secret of the swing spare-node tests'

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
      ...MOLOTOF_RUN,
      'examples/swing/swing.ts', '--preset', preset, '--n', String(dates),
      '--spare-nodes', '1',
      '--checkpoint', 'every:100', '--checkpoint-dir', `${marker}{node}`, '--memory-checkpoint', 'every:20', '--memory-dir', `${memory}{node}`, '--hang-timeout', '20000',
      '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', status, '--events', events, '--log', 'all', '--json',
    ], { secret, recovery: true })
    try {
      await until(run.out, /checkpoint 2 committed to partner/, run.ended)
      expect(run.ended(), run.out()).toBe(false)
      // The spare node computes nothing: no directory of its own yet.
      expect(existsSync(`${marker}3`), run.out()).toBe(false)
      loseNode(1, marker, run.out(), { memory })
      await until(run.out, /first superstep \d+ ms after the loss of node 1/, run.ended)
      expect(run.out()).toMatch(/node 1 lost( at step \d+)? \(the connection closed\); spare node 3 took rank 1 \(0 spare nodes left\)/)

      // A second loss once the new placement has partner copies of its own: no spare left, the run shrinks.
      const afterFirst = after(run.out, /first superstep \d+ ms after the loss of node 1/)
      await until(afterFirst, /committed to partner[\s\S]*committed to partner/, run.ended)
      expect(run.ended(), run.out()).toBe(false)
      loseNode(2, marker, run.out(), { memory })

      const code = await run.code
      const out = run.out()
      // mpirun --enable-recovery exits 0 whatever: the status file says how the run ended.
      expect(code, out).toBe(0)
      expect(statusOf(status), out).toMatchObject({ state: 'ended', exitCode: 0, outcome: 'done' })
      expect(out).toMatch(/node 2 lost( at step \d+)? \(the connection closed\); no spare node left: the run goes on with 2 ranks/)
      expect(out).toMatch(/resuming a checkpoint of 3 ranks on 2/)
      expect(out).toMatch(/first superstep \d+ ms after the loss of node 2/)
      expect(out).not.toMatch(/checksum mismatch/)
      // The reference: the serial valuation of the same parameters, one process, no checkpoints.
      const { value } = jsonOf<{ value: number }>(out)
      expect(Object.is(value, swingValue(preset, { N: dates })), `${value}\n${out}`).toBe(true)

      const seen = eventsIn(events)
      expect(seen.filter((e) => e.event === 'node-lost')).toMatchObject([
        { node: 1, outcome: 'replaced', spare: 3, ranks: [1], sparesLeft: 0 },
        { node: 2, outcome: 'shrunk', ranks: [2], size: 2 },
      ])
      // Each loss restored the recovery line from memory: the survivors' own level, the lost rank's partner copy.
      expect(seen.filter((e) => e.event === 'resume'), out).toMatchObject([{ requested: false, level: 'memory+partner' }, { requested: false, level: 'memory+partner' }])
      expect(seen.filter((e) => e.event === 'start').map((e) => e.ranks)).toEqual([3, 3, 2])
    } finally {
      killAll(4, marker)
    }
  }, 120_000)
})
