import type { RankView } from '../line.js'

/** Where one old rank file of an elastic line is read: the new rank that found it valid, and in which level's store. */
export interface FileServer {
  rank: number
  /** Index into the levels of the negotiation (fastest first). */
  level: number
}

/** Whether the ranks together hold every old rank file of a checkpoint of another rank count, and who serves each. */
export interface Coverage {
  seq: number
  oldSize: number
  /** Per old rank: who reads its file (undefined where no rank found it valid). */
  servers: (FileServer | undefined)[]
  /** Old ranks whose file no rank found valid in any store. */
  missing: number[]
  /** Of those, the ones whose file no rank found at all (not even damaged): in no directory of this run's ranks. */
  absent: number[]
}

/**
 * Which of the old rank files present in a store rank `rank` checks, when the
 * ranks `peers` (ascending) see the same directory: the files are split
 * between them (old rank r by the peer of index r mod peers), so a directory
 * every rank sees costs each rank 1/size of the headers, and a node's
 * directory is split between that node's ranks.
 *
 * ```ts
 * shareOf([2, 3], 3)([4, 5, 6, 7])   // [5, 7]
 * ```
 */
export function shareOf(peers: readonly number[], rank: number): (present: readonly number[]) => number[] {
  const k = peers.indexOf(rank)
  return (present) => present.filter((r) => r % peers.length === k)
}

/**
 * For every checkpoint of another rank count in the views
 * (`everyView[q][i]`: rank q's view of level i, each with the old rank files
 * it found valid there), who serves each old rank file: the fastest level
 * holding a valid copy and, on it, the lowest rank. Checkpoints newest first.
 *
 * ```ts
 * const [c] = elasticCoverage(await comm.allgather(myViewsOfEachLevel))
 * if (c.missing.length === 0) openElasticLine(...)
 * ```
 */
export function elasticCoverage(everyView: readonly (readonly RankView[])[]): Coverage[] {
  const bySeq = new Map<number, Coverage>()
  const damaged = new Map<number, Set<number>>()
  const damagedOf = (seq: number) => damaged.get(seq) ?? damaged.set(seq, new Set()).get(seq)!
  everyView.forEach((levels, q) =>
    levels.forEach((view, i) => {
      for (const h of view.elastic ?? []) {
        let c = bySeq.get(h.seq)
        if (!c) bySeq.set(h.seq, (c = { seq: h.seq, oldSize: h.oldSize, servers: new Array(h.oldSize).fill(undefined), missing: [], absent: [] }))
        for (const r of h.damaged) damagedOf(h.seq).add(r)
        for (const r of h.ranks) {
          const s = c.servers[r]
          if (s === undefined || i < s.level || (i === s.level && q < s.rank)) c.servers[r] = { rank: q, level: i }
        }
      }
    }),
  )
  const out = [...bySeq.values()].sort((a, b) => b.seq - a.seq)
  for (const c of out) {
    c.missing = c.servers.flatMap((s, r) => (s === undefined ? [r] : []))
    c.absent = c.missing.filter((r) => !damagedOf(c.seq).has(r))
  }
  return out
}
