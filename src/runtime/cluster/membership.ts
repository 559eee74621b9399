/**
 * What the leader decided about one lost node:
 * - `replaced`: a spare node takes the lost node's global ranks (`ranks`), the run goes on in a new attempt;
 * - `shrunk`: no spare is left; the run goes on with the lost node's slot removed (`size` ranks, renumbered
 *   0…size−1 in slot order), restoring its checkpoint elastically;
 * - `spare-lost`: an idle spare node was lost, nothing else changes;
 * - `unrecoverable`: the run cannot go on without it (`why`: node 0, or no spare node left).
 */
export type MembershipChange =
  | { kind: 'replaced'; node: number; epoch: number; spare: number; ranks: readonly number[]; sparesLeft: number }
  | { kind: 'shrunk'; node: number; epoch: number; ranks: readonly number[]; size: number }
  | { kind: 'spare-lost'; node: number; epoch: number; sparesLeft: number }
  | { kind: 'unrecoverable'; node: number; epoch: number; ranks: readonly number[]; why: string }

/**
 * The membership of a cluster run: which node carries which global ranks
 * (working nodes, one *slot* of `ranksPerNode` ranks each: slot s holds ranks
 * s·rpn … s·rpn+rpn−1) and which nodes stand by (spare nodes). Node i starts
 * in slot i; the last `spareNodes` nodes start as spares. The epoch counts
 * the changes. Node 0 runs the run's supervisor and is never replaced. With
 * no spare left, a lost node's slot is removed (a shrink: the slots after it
 * move down, and so do their rank numbers) while two working nodes remain.
 *
 * ```ts
 * const m = new Membership(4, 1, 2)      // nodes 0–2 work (ranks 0–5), node 3 stands by
 * m.lose(1)                              // { kind: 'replaced', node: 1, spare: 3, ranks: [2, 3], epoch: 1, sparesLeft: 0 }
 * m.nodeOfSlot(1)                        // 3
 * ```
 */
export class Membership {
  /** Slot → the node carrying its ranks. */
  private readonly slots: number[]
  /** Spare nodes still standing by, lowest first. */
  private readonly standby: number[]
  private changes = 0

  constructor(
    readonly nodes: number,
    readonly spareNodes: number,
    readonly ranksPerNode: number,
  ) {
    const working = nodes - spareNodes
    this.slots = Array.from({ length: working }, (_, i) => i)
    this.standby = Array.from({ length: spareNodes }, (_, i) => working + i)
  }

  /** Working nodes (slots): the run's ranks are slots × ranks per node. */
  get slotCount(): number {
    return this.slots.length
  }

  /** How many membership changes there were (0 at start). */
  get epoch(): number {
    return this.changes
  }

  /** The spare nodes still standing by. */
  get spares(): readonly number[] {
    return this.standby
  }

  /** The node carrying slot `slot`. */
  nodeOfSlot(slot: number): number {
    return this.slots[slot]
  }

  /** The slot `node` carries, or -1 (a spare, or lost). */
  slotOf(node: number): number {
    return this.slots.indexOf(node)
  }

  /** A copy of slot → node, for one attempt (later changes do not move its ranks). */
  placement(): number[] {
    return [...this.slots]
  }

  /** The global ranks of slot `slot`. */
  ranksOfSlot(slot: number): number[] {
    return Array.from({ length: this.ranksPerNode }, (_, i) => slot * this.ranksPerNode + i)
  }

  /** Node `node` is lost: decide what happens (see MembershipChange); undefined for a node already out of the membership. */
  lose(node: number): MembershipChange | undefined {
    const idle = this.standby.indexOf(node)
    if (idle >= 0) {
      this.standby.splice(idle, 1)
      return { kind: 'spare-lost', node, epoch: ++this.changes, sparesLeft: this.standby.length }
    }
    const slot = this.slots.indexOf(node)
    if (slot < 0) return undefined
    const ranks = this.ranksOfSlot(slot)
    if (slot === 0) return { kind: 'unrecoverable', node, epoch: this.changes, ranks, why: 'node 0 runs the run\'s supervisor, and another node taking that role over is not supported yet' }
    const spare = this.standby.shift()
    if (spare === undefined) {
      // Shrink: the others go on without this slot, as long as two working nodes are left (a run on one node keeps no partner copies).
      if (this.slots.length - 1 >= MIN_NODES_TO_SHRINK_TO) {
        this.slots.splice(slot, 1)
        return { kind: 'shrunk', node, epoch: ++this.changes, ranks, size: this.slots.length * this.ranksPerNode }
      }
      const none = this.spareNodes > 0 ? 'no spare node is left' : 'the run has no spare node (--spare-nodes)'
      return { kind: 'unrecoverable', node, epoch: this.changes, ranks, why: `${none}, and a run shrunk to one node would keep no copy of its checkpoints on another node` }
    }
    this.slots[slot] = spare
    return { kind: 'replaced', node, epoch: ++this.changes, spare, ranks, sparesLeft: this.standby.length }
  }
}

/** A shrink leaves at least this many working nodes: partner copies need a second node. */
const MIN_NODES_TO_SHRINK_TO = 2

/** Ranks for a line of text: "rank 5", "ranks 2–3", or "ranks 1, 4". */
export function ranksText(ranks: readonly number[]): string {
  if (ranks.length === 1) return `rank ${ranks[0]}`
  const contiguous = ranks.every((r, i) => i === 0 || r === ranks[i - 1] + 1)
  return `ranks ${contiguous ? `${ranks[0]}–${ranks[ranks.length - 1]}` : ranks.join(', ')}`
}
