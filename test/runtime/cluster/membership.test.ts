import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { decideSide, Membership, membersOf, ranksText } from '../../../src/runtime/cluster/membership.js'

describe('Membership: which node carries which ranks after losses', () => {
  it('4 nodes, 1 spare, 2 ranks per node: node 1 lost → spare node 3 takes ranks 2–3; then no spare is left: a shrink to 2 nodes, and no further', () => {
    const m = new Membership(4, 1, 2)
    expect(m.slotCount).toBe(3)
    expect(m.placement()).toEqual([0, 1, 2])
    expect(m.lose(1)).toEqual({ kind: 'replaced', node: 1, epoch: 1, spare: 3, ranks: [2, 3], sparesLeft: 0 })
    expect(m.placement()).toEqual([0, 3, 2])
    expect(m.lose(1)).toBeUndefined()
    // Node 3 carried ranks 2–3: the run goes on with 4 ranks, node 2's renumbered 2–3.
    expect(m.lose(3)).toEqual({ kind: 'shrunk', node: 3, epoch: 2, ranks: [2, 3], size: 4 })
    expect(m.placement()).toEqual([0, 2])
    // One node would be left: no partner for its copies.
    expect(m.lose(2)).toMatchObject({ kind: 'unrecoverable', node: 2, ranks: [2, 3], why: expect.stringMatching(/no spare node is left, and a run shrunk to one node would keep no copy/) })
    expect(m.placement()).toEqual([0, 2])
  })

  it('node 0 may be lost like any node: a spare takes ranks 0–1, or the others shrink; a successor goes on from the view it was sent', () => {
    const m = new Membership(4, 1, 2)
    expect(m.lose(0)).toEqual({ kind: 'replaced', node: 0, epoch: 1, spare: 3, ranks: [0, 1], sparesLeft: 0 })
    expect(m.placement()).toEqual([3, 1, 2])
    expect(m.view()).toEqual({ epoch: 1, slots: [3, 1, 2], spares: [] })
    const successor = new Membership(4, 1, 2, m.view())
    expect(successor.lose(3)).toEqual({ kind: 'shrunk', node: 3, epoch: 2, ranks: [0, 1], size: 4 })
    expect(successor.placement()).toEqual([1, 2])
    expect(successor.members()).toEqual([1, 2])
  })

  it('an idle spare lost changes no placement', () => {
    const m = new Membership(5, 2, 1)
    expect(m.lose(4)).toEqual({ kind: 'spare-lost', node: 4, epoch: 1, sparesLeft: 1 })
    expect(m.lose(2)).toEqual({ kind: 'replaced', node: 2, epoch: 2, spare: 3, ranks: [2], sparesLeft: 0 })
    expect(m.placement()).toEqual([0, 1, 3])
  })

  it('over any sequence of losses (node 0 included): ranks move only with their slot, slots sit on distinct nodes never lost, each spare replaces once, and a shrink happens only with no spare left and leaves two nodes', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 8 }).chain((nodes) =>
          fc.tuple(fc.constant(nodes), fc.integer({ min: 0, max: nodes - 1 }), fc.integer({ min: 1, max: 3 }), fc.array(fc.integer({ min: 0, max: nodes - 1 }), { maxLength: 12 })),
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
            expect(new Set(now).size).toBe(now.length)
            for (const n of now) expect(lost.has(n)).toBe(false)
          }
          expect(replaced).toBeLessThanOrEqual(spares)
        },
      ),
    )
  })

  it('decideSide: a strict majority goes on; a half only holding the lowest-numbered member; the lowest member of the side coordinates', () => {
    expect(decideSide([0, 1, 2], new Set([1, 2]))).toEqual({ goesOn: true, coordinator: 1 })
    expect(decideSide([0, 1, 2], new Set([0]))).toEqual({ goesOn: false, coordinator: 0 })
    expect(decideSide([0, 1, 2, 3], new Set([0, 3]))).toEqual({ goesOn: true, coordinator: 0 })
    expect(decideSide([0, 1, 2, 3], new Set([1, 2]))).toMatchObject({ goesOn: false })
    // Node 0 lost in a run of two: the survivor cannot tell a crash from a partition, and stops.
    expect(decideSide([0, 1], new Set([1]))).toMatchObject({ goesOn: false })
    // Nodes outside the membership (dropped earlier) do not count.
    expect(decideSide([1, 2, 3], new Set([0, 4, 3]))).toEqual({ goesOn: false, coordinator: 3 })
  })

  it('over random sequences of node losses and partitions: never two sides go on; a partition into two halves always lets exactly one go on; the whole membership always goes on, coordinated by its lowest member', () => {
    // A step: a node's crash (index into the live nodes), or a partition (each live node's side, 0–2).
    const step = fc.oneof(fc.record({ crash: fc.nat() }), fc.record({ sides: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 12, maxLength: 12 }) }))
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 9 }), fc.integer({ min: 0, max: 3 }), fc.array(step, { maxLength: 10 }), (nodes, spareCount, steps) => {
        const spares = Math.min(spareCount, nodes - 1)
        // The settled membership every live node agrees on: working and spare nodes alike.
        let members = membersOf(new Membership(nodes, spares, 1).view())
        expect(members).toEqual(Array.from({ length: nodes }, (_, i) => i))
        const all = decideSide(members, new Set(members))
        expect(all).toEqual({ goesOn: true, coordinator: 0 })
        for (const s of steps) {
          const groups: number[][] =
            'crash' in s ? [members.filter((_, i) => i !== s.crash % members.length)] : [0, 1, 2].map((g) => members.filter((_, i) => s.sides[i] === g))
          const decisions = groups.map((g) => ({ side: g, d: decideSide(members, new Set(g)) }))
          const going = decisions.filter((x) => x.d.goesOn)
          expect(going.length).toBeLessThanOrEqual(1)
          for (const { side, d } of decisions) {
            if (side.length === 0) expect(d).toEqual({ goesOn: false, coordinator: undefined })
            else {
              expect(side).toContain(d.coordinator)
              for (const n of side) expect(d.coordinator!).toBeLessThanOrEqual(n)
            }
            // A side holding more than the others together goes on.
            if (side.length > members.length - side.length) expect(d.goesOn).toBe(true)
          }
          const nonEmpty = groups.filter((g) => g.length > 0)
          if (nonEmpty.length === 2 && nonEmpty[0].length + nonEmpty[1].length === members.length) expect(going).toHaveLength(1)
          if (going.length === 0) return // The run stops: every side exits 76.
          // The side that goes on settles a membership of its own nodes; the others are out.
          members = going[0].side
        }
      }),
    )
  })

  it('names ranks for a log line', () => {
    expect(ranksText([5])).toBe('rank 5')
    expect(ranksText([2, 3])).toBe('ranks 2–3')
    expect(ranksText([1, 4])).toBe('ranks 1, 4')
  })
})
