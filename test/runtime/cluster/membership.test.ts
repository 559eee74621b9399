import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { Membership, ranksText } from '../../../src/runtime/cluster/membership.js'

describe('Membership: which node carries which ranks after losses', () => {
  it('4 nodes, 1 spare, 2 ranks per node: node 1 lost → spare node 3 takes ranks 2–3; then no spare is left: a shrink to 2 nodes, and no further', () => {
    const m = new Membership(4, 1, 2)
    expect(m.slotCount).toBe(3)
    expect(m.placement()).toEqual([0, 1, 2])
    expect(m.lose(1)).toEqual({ kind: 'replaced', node: 1, epoch: 1, spare: 3, ranks: [2, 3], sparesLeft: 0 })
    expect(m.placement()).toEqual([0, 3, 2])
    expect(m.lose(1)).toBeUndefined()
    expect(m.lose(0)).toMatchObject({ kind: 'unrecoverable', node: 0, ranks: [0, 1], why: expect.stringMatching(/node 0 runs the run's supervisor/) })
    // Node 3 carried ranks 2–3: the run goes on with 4 ranks, node 2's renumbered 2–3.
    expect(m.lose(3)).toEqual({ kind: 'shrunk', node: 3, epoch: 2, ranks: [2, 3], size: 4 })
    expect(m.placement()).toEqual([0, 2])
    // One node would be left: no partner for its copies.
    expect(m.lose(2)).toMatchObject({ kind: 'unrecoverable', node: 2, ranks: [2, 3], why: expect.stringMatching(/no spare node is left, and a run shrunk to one node would keep no copy/) })
    expect(m.placement()).toEqual([0, 2])
  })

  it('an idle spare lost changes no placement', () => {
    const m = new Membership(5, 2, 1)
    expect(m.lose(4)).toEqual({ kind: 'spare-lost', node: 4, epoch: 1, sparesLeft: 1 })
    expect(m.lose(2)).toEqual({ kind: 'replaced', node: 2, epoch: 2, spare: 3, ranks: [2], sparesLeft: 0 })
    expect(m.placement()).toEqual([0, 1, 3])
  })

  it('over any sequence of losses: ranks move only with their slot, slots sit on distinct nodes never lost, node 0 stays in slot 0, each spare replaces once, and a shrink happens only with no spare left and leaves two nodes', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 8 }).chain((nodes) =>
          fc.tuple(fc.constant(nodes), fc.integer({ min: 0, max: nodes - 1 }), fc.integer({ min: 1, max: 3 }), fc.array(fc.integer({ min: 1, max: nodes - 1 }), { maxLength: 12 })),
        ),
        ([nodes, spares, rpn, losses]) => {
          const m = new Membership(nodes, spares, rpn)
          const lost = new Set<number>()
          let replaced = 0
          for (const node of losses) {
            const before = m.placement()
            const c = m.lose(node)
            if (lost.has(node)) {
              expect(c).toBeUndefined()
              continue
            }
            if (c?.kind === 'unrecoverable') {
              // The run ends: nothing moved.
              expect(m.placement()).toEqual(before)
              continue
            }
            if (c === undefined) continue
            lost.add(node)
            const now = m.placement()
            if (c.kind === 'replaced') {
              replaced++
              expect(c.ranks).toEqual(Array.from({ length: rpn }, (_, i) => before.indexOf(node) * rpn + i))
              expect(before).not.toContain(c.spare)
              expect(now).toEqual(before.map((n) => (n === node ? c.spare : n)))
            } else if (c.kind === 'shrunk') {
              expect(m.spares).toEqual([])
              expect(now).toEqual(before.filter((n) => n !== node))
              expect(now.length).toBeGreaterThanOrEqual(2)
              expect(c.size).toBe(now.length * rpn)
            } else {
              expect(now).toEqual(before)
            }
            expect(now[0]).toBe(0)
            expect(new Set(now).size).toBe(now.length)
            for (const n of now) expect(lost.has(n)).toBe(false)
          }
          expect(replaced).toBeLessThanOrEqual(spares)
        },
      ),
    )
  })

  it('names ranks for a log line', () => {
    expect(ranksText([5])).toBe('rank 5')
    expect(ranksText([2, 3])).toBe('ranks 2–3')
    expect(ranksText([1, 4])).toBe('ranks 1, 4')
  })
})
