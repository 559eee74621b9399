import type { RankGroupSpec } from '../group.js'
import type { Membership } from './membership.js'

/**
 * An attempt's spec with the run's membership as it starts (which node
 * carries which ranks, the spare nodes) in its checkpoint configuration:
 * every checkpoint the attempt commits records it (see MembershipRecord),
 * and `molotof inspect` names it. A run of one node records none.
 *
 * ```ts
 * spec = withMembership(spec, leader.membership)   // spec.ft.membership: { epoch: 1, nodes: [0, 3, 2], ranksPerNode: 2, spares: [] }
 * ```
 */
export function withMembership(spec: RankGroupSpec, membership: Membership): RankGroupSpec {
  if (spec.ft === undefined || membership.nodes === 1) return spec
  const record = { epoch: membership.epoch, nodes: membership.placement(), ranksPerNode: membership.ranksPerNode, spares: [...membership.spares] }
  return { ...spec, ft: { ...spec.ft, membership: record } }
}
