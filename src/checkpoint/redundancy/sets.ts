import { ConfigError } from '../../errors.js'

/**
 * Which ranks form each XOR set (`--redundancy xor:G`). Nodes are numbered
 * as `{node}` numbers them (rank r on node ⌊r / ranksPerNode⌋); consecutive
 * nodes are grouped G by G (nodes 0..G−1, G..2G−1, …; when the node count is
 * not a multiple of G the last group takes the remainder, so it has G to
 * 2G−1 nodes), and a set is the ranks of one local number on the nodes of
 * one group: every member on another node, so a lost node loses one member
 * of each of its sets, which the others rebuild. Set s = group × ranksPerNode
 * + local rank.
 *
 * ```ts
 * const sets = new XorSets(6, 1, 3)   // 6 nodes of 1 rank
 * sets.membersOf(4)   // [3, 4, 5]
 * const big = new XorSets(8, 2, 2)    // 4 nodes of 2 ranks: sets {0,2} {1,3} {4,6} {5,7}
 * ```
 */
export class XorSets {
  readonly nodes: number

  constructor(
    readonly size: number,
    readonly ranksPerNode: number,
    /** G: nodes per set. */
    readonly setSize: number,
  ) {
    const flag = `--redundancy xor:${setSize}`
    if (!Number.isSafeInteger(setSize) || setSize < 2) {
      throw new ConfigError(`${flag}: a set needs at least 2 nodes (one parity slice per member rebuilds one lost member from the others); use xor:2 or more, or --redundancy partner`)
    }
    if (!Number.isSafeInteger(ranksPerNode) || ranksPerNode < 1 || size % ranksPerNode !== 0) {
      throw new ConfigError(`${flag}: XOR sets need whole nodes: ${size} ranks is not a multiple of ${ranksPerNode} ranks per node`)
    }
    this.nodes = size / ranksPerNode
    if (setSize > this.nodes) {
      throw new ConfigError(`${flag}: this run has ${this.nodes} node${this.nodes === 1 ? '' : 's'}, fewer than the ${setSize} a set spans (every member on another node); use xor:${Math.max(2, this.nodes)} or less${this.nodes < 2 ? ' (and two nodes or more)' : ''}`)
    }
  }

  /** The set rank `rank` belongs to. */
  setOf(rank: number): number {
    const groups = Math.floor(this.nodes / this.setSize)
    const group = Math.min(Math.floor(Math.floor(rank / this.ranksPerNode) / this.setSize), groups - 1)
    return group * this.ranksPerNode + (rank % this.ranksPerNode)
  }

  /** The members of rank `rank`'s set, in rank order (index = member number in the parity layout). */
  membersOf(rank: number): number[] {
    const groups = Math.floor(this.nodes / this.setSize)
    const group = Math.min(Math.floor(Math.floor(rank / this.ranksPerNode) / this.setSize), groups - 1)
    const firstNode = group * this.setSize
    const lastNode = group === groups - 1 ? this.nodes : firstNode + this.setSize
    const local = rank % this.ranksPerNode
    const out: number[] = []
    for (let n = firstNode; n < lastNode; n++) out.push(n * this.ranksPerNode + local)
    return out
  }
}

/**
 * The run's redundancy settings, checked before any rank starts: XOR sets
 * that fit the run's nodes (`ConfigError` naming `--redundancy` otherwise),
 * and not both partner copies and XOR parity. Incremental checkpoints
 * compose with XOR: a delta file's parity is taken over the file as stored,
 * and pruning keeps the slices of every checkpoint a kept delta's chain
 * needs (the commit marker records each rank's chain).
 *
 * ```ts
 * checkRedundancy(4, { partner: undefined, xor: { setSize: 5, ranksPerNode: 1 } })   // throws: 4 nodes, fewer than 5
 * ```
 */
export function checkRedundancy(size: number, cfg: { partner?: { ranksPerNode: number }; xor?: { setSize: number; ranksPerNode: number } }): void {
  if (cfg.xor === undefined) return
  if (cfg.partner !== undefined) throw new ConfigError(`--redundancy xor:${cfg.xor.setSize} replaces partner copies: give one of the two (partner copies and XOR parity were both configured)`)
  new XorSets(size, cfg.xor.ranksPerNode, cfg.xor.setSize)
}

/**
 * The XOR sets of a run that goes on with fewer ranks (a node lost, no spare
 * left): sets of at most the nodes left, none below two nodes (one node
 * cannot protect itself). What was asked at the start is checked there.
 *
 * ```ts
 * xorForRanks({ setSize: 3, ranksPerNode: 1 }, 2)   // { setSize: 2, ranksPerNode: 1 }
 * xorForRanks({ setSize: 3, ranksPerNode: 1 }, 1)   // undefined
 * ```
 */
export function xorForRanks(xor: { setSize: number; ranksPerNode: number } | undefined, size: number): { setSize: number; ranksPerNode: number } | undefined {
  if (xor === undefined) return undefined
  const nodes = Math.floor(size / xor.ranksPerNode)
  return nodes < 2 ? undefined : { ...xor, setSize: Math.min(xor.setSize, nodes) }
}
