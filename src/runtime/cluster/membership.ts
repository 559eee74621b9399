/**
 * What the leader decided about one lost node:
 * - `replaced`: a spare node takes the lost node's global ranks (`ranks`), the run goes on in a new attempt;
 * - `shrunk`: no spare is left; the run goes on with the lost node's slot removed (`size` ranks, renumbered
 *   0…size−1 in slot order), restoring its checkpoint elastically;
 * - `spare-lost`: an idle spare node was lost, nothing else changes;
 * - `unrecoverable`: the run cannot go on without it (`why`: no spare node left, or too few nodes left to go on).
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
 * the changes. Any node may be lost, node 0 included (the coordinator that
 * decides is never the lost one: see `decideSide` for who coordinates). With
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
    /** Where an earlier coordinator left it (a successor taking over); else the start. */
    from?: MembershipView,
  ) {
    const working = nodes - spareNodes
    this.slots = from ? [...from.slots] : Array.from({ length: working }, (_, i) => i)
    this.standby = from ? [...from.spares] : Array.from({ length: spareNodes }, (_, i) => working + i)
    this.changes = from?.epoch ?? 0
  }

  /** What every node is told with each change (and a successor starts from). */
  view(): MembershipView {
    return { epoch: this.changes, slots: [...this.slots], spares: [...this.standby] }
  }

  /** Every member, working or standing by, lowest first: the majority of a partition is counted among them. */
  members(): number[] {
    return membersOf(this.view())
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

/** A membership as nodes send it: its epoch, slot → node, and the spare nodes standing by. */
export interface MembershipView {
  epoch: number
  slots: number[]
  spares: number[]
}

/** The members of a view (working and standing by), lowest first. */
export function membersOf(view: MembershipView): number[] {
  return [...view.slots, ...view.spares].sort((a, b) => a - b)
}

/** What one side of a loss or partition may do: go on (coordinated by `coordinator`), or stop (exit 76). */
export interface SideDecision {
  goesOn: boolean
  /** The lowest-numbered member of the side: it coordinates when the side goes on. */
  coordinator: number | undefined
}

/**
 * Whether the nodes a side can reach (itself included) go on after a loss or
 * a partition of the last settled membership `members` (working + spare
 * nodes): a strict majority goes on; an exact half goes on only when it
 * holds the lowest-numbered member (the tie rule); any other side stops. Two
 * disjoint sides can never both go on. The lowest-numbered member of the
 * side that goes on coordinates.
 *
 * ```ts
 * decideSide([0, 1, 2], new Set([1, 2]))   // { goesOn: true, coordinator: 1 }: node 0 lost, node 1 takes over
 * decideSide([0, 1, 2], new Set([0]))      // { goesOn: false, … }: node 0 alone is a minority
 * decideSide([0, 1, 2, 3], new Set([0, 3])) // { goesOn: true, coordinator: 0 }: a tie, holding node 0
 * ```
 */
export function decideSide(members: readonly number[], reachable: ReadonlySet<number>): SideDecision {
  const side = members.filter((n) => reachable.has(n))
  const lowest = Math.min(...members)
  const goesOn = 2 * side.length > members.length || (2 * side.length === members.length && side.includes(lowest))
  return { goesOn, coordinator: side.length > 0 ? Math.min(...side) : undefined }
}

/** A shrink leaves at least this many working nodes: partner copies need a second node. */
const MIN_NODES_TO_SHRINK_TO = 2

/** Ranks for a line of text: "rank 5", "ranks 2–3", or "ranks 1, 4". */
export function ranksText(ranks: readonly number[]): string {
  if (ranks.length === 1) return `rank ${ranks[0]}`
  const contiguous = ranks.every((r, i) => i === 0 || r === ranks[i - 1] + 1)
  return `ranks ${contiguous ? `${ranks[0]}–${ranks[ranks.length - 1]}` : ranks.join(', ')}`
}
