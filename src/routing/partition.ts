import type { DomainDesc } from '../domains/desc.js'
import type { Domain } from '../domains/domain.js'
import { PartitionError } from '../errors.js'

/**
 * Every rank's possessed and needed boxes at one superstep, evaluated from a
 * domain's partition methods. Because those methods are pure, each rank builds
 * the same `Partition` without exchanging a message.
 *
 * ```ts
 * const p = partitionAt(grid, size, step)
 * p.possessed[q]   // what rank q computes at `step`
 * ```
 */
export interface Partition<N extends number = number> {
  readonly step: number
  readonly possessed: readonly DomainDesc<N>[]
  readonly needed: readonly DomainDesc<N>[]
}

export function partitionAt<N extends number>(domain: Domain<N>, size: number, step: number): Partition<N> {
  const possessed: DomainDesc<N>[] = []
  const needed: DomainDesc<N>[] = []
  for (let q = 0; q < size; q++) {
    possessed.push(domain.possessed(q, size, step))
    needed.push(domain.needed(q, size, step))
  }
  return { step, possessed, needed }
}

/** Same boxes for every rank (the step may differ). */
export function samePartition<N extends number>(a: Partition<N>, b: Partition<N>): boolean {
  if (a.possessed.length !== b.possessed.length) return false
  for (let q = 0; q < a.possessed.length; q++) {
    if (!a.possessed[q].equals(b.possessed[q]) || !a.needed[q].equals(b.needed[q])) return false
  }
  return true
}

/**
 * Reject impossible layouts before any rank computes: overlapping possessed
 * boxes, possessed boxes whose union leaves holes in their hull, and needed
 * boxes that do not contain the possessed box.
 */
export function validatePartition<N extends number>(p: Partition<N>, what = 'domain'): void {
  const size = p.possessed.length
  const where = `${what} at step ${p.step}`
  let hull: DomainDesc<N> | undefined
  let sum = 0
  for (let q = 0; q < size; q++) {
    const pq = p.possessed[q]
    const nq = p.needed[q]
    if (pq.dims !== nq.dims) {
      throw new PartitionError(`${where}: rank ${q} has a ${pq.dims}-D possessed box but a ${nq.dims}-D needed box`)
    }
    if (!nq.contains(pq)) {
      throw new PartitionError(`${where}: the needed box of rank ${q} ${nq} does not contain its possessed box ${pq}`)
    }
    for (let r = 0; r < q; r++) {
      if (p.possessed[r].overlaps(pq)) {
        throw new PartitionError(
          `${where}: the possessed boxes of ranks ${r} ${p.possessed[r]} and ${q} ${pq} overlap in ${p.possessed[r].intersect(pq)}`,
        )
      }
    }
    if (!pq.isEmpty) {
      hull = hull ? hull.hull(pq) : pq
      sum += pq.volume
    }
  }
  if (hull && sum !== hull.volume) {
    throw new PartitionError(
      `${where}: the possessed boxes leave gaps: they cover ${sum} of the ${hull.volume} cells of their hull ${hull}`,
    )
  }
}
