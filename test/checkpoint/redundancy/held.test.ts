import { describe, expect, it } from 'vitest'
import { CheckpointCopies, type CopyTarget } from '../../../src/checkpoint/coordination/copies.js'
import { XorSets } from '../../../src/checkpoint/redundancy/sets.js'
import { CheckpointStore } from '../../../src/checkpoint/store/checkpoint-store.js'
import { PartnerRing } from '../../../src/checkpoint/store/partner.js'
import type { Communicator } from '../../../src/routing/communicator.js'

// What the memory level's RAM check counts for the copies of memory checkpoints held for other ranks.
describe('RAM held for other ranks by the copies of memory checkpoints', () => {
  const store = new CheckpointStore('/nonexistent/molotof-held')
  const comm = { rank: 0, size: 4 } as unknown as Communicator
  const held = (feed: CopyTarget['feed']) => new CheckpointCopies(comm, store, [{ name: feed.kind === 'xor' ? 'xor' : 'partner', store, writesMarker: false, feed }], 1, undefined).heldForOthers

  it('partner copies: two whole files (the newest committed copy and the one being received)', () => {
    expect(held({ kind: 'partner', ring: new PartnerRing(4, 1), tag: 1 })).toBe(2)
  })

  it('xor:4: two slices of a third of a file each', () => {
    expect(held({ kind: 'xor', sets: new XorSets(4, 1, 4), tag: 1 })).toBeCloseTo(2 / 3, 12)
    expect(held({ kind: 'xor', sets: new XorSets(4, 1, 2), tag: 1 })).toBe(2)
  })
})
