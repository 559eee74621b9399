import { afterEach, describe, expect, it } from 'vitest'
import { Domain, DomainDesc, splitPoint } from '../../src/index.js'
import { plainAllocator } from '../../src/domains/dtype.js'
import { CommunicationError } from '../../src/errors.js'
import type { Communicator, Message } from '../../src/routing/communicator.js'
import { partitionAt } from '../../src/routing/partition.js'
import { Router, type Schedule } from '../../src/routing/router.js'

class Strip extends Domain<1> {
  constructor(readonly n: number) {
    super(1)
  }
  possessed(rank: number, size: number): DomainDesc<1> {
    return DomainDesc.of([splitPoint(this.n, size, rank)], [splitPoint(this.n, size, rank + 1)])
  }
  needed(rank: number, size: number): DomainDesc<1> {
    return this.possessed(rank, size).expand(1).intersect(DomainDesc.of([0], [this.n]))
  }
}

/**
 * Rank 0 of 2 whose peer is lost: a send is refused a moment later (as a
 * stream transport does after its grace period), a receive at once (the
 * communicator was closed because the run was told to stop).
 */
function lostPeerComm(): Communicator & { sends: number; refused: Promise<void> } {
  // `refused` resolves once every send so far has been refused (without a handler on the send's promise).
  let refusedCount = 0
  let allRefused = () => {}
  const comm = {
    sends: 0,
    refused: new Promise<void>((r) => (allRefused = r)),
  }
  const refuseLater = () => {
    comm.sends++
    return new Promise<void>((_resolve, reject) =>
      setTimeout(() => {
        reject(new CommunicationError('rank 0: the connection to rank 1 closed unexpectedly; send failed (tag 3): write EPIPE'))
        if (++refusedCount === comm.sends) allRefused()
      }, 20),
    )
  }
  return Object.assign(comm, {
    rank: 0,
    size: 2,
    allocator: plainAllocator,
    send: refuseLater,
    recv: () => Promise.reject<Message>(new CommunicationError('rank 0: communicator closed')),
    allreduce: () => Promise.reject(new Error('unused')),
    allgather: () => Promise.reject(new Error('unused')),
    barrier: () => Promise.reject(new Error('unused')),
    close: () => {},
  })
}

const unhandled: unknown[] = []
const onUnhandled = (e: unknown) => unhandled.push(e)

afterEach(() => {
  process.off('unhandledRejection', onUnhandled)
  unhandled.length = 0
})

describe('a route of a stopped run', () => {
  // A kept survivor runs the program again in the same process: a send of its
  // stopped run that fails afterwards must not end that process (issue 29).
  for (const schedule of [{ kind: 'all' }, { kind: 'paced', maxInFlight: 1 }] satisfies Schedule[]) {
    it(`leaves no unhandled rejection behind when its sends fail after the run stopped (${schedule.kind})`, async () => {
      process.on('unhandledRejection', onUnhandled)
      const w = new Strip(64)
      const from = partitionAt(w, 2, 0)
      w.resize(from.possessed[0].hull(from.needed[0]))
      const comm = lostPeerComm()
      const router = new Router(comm, 'border', schedule, 'strip')
      const routed = router.route(router.plan(from, from), w, w, 3)
      // The run stops here: its receive fails, and nobody settles the domain any more.
      await expect(routed).rejects.toThrow(/communicator closed/)
      // Once every send has been refused, Node reports an unhandled one before the next turn of the event loop.
      await comm.refused
      await new Promise((r) => setImmediate(r))
      expect(comm.sends).toBeGreaterThan(0)
      expect(unhandled).toEqual([])
    })
  }

  it('still reports a failed send to whoever settles the domain', async () => {
    const w = new Strip(64)
    const from = partitionAt(w, 2, 0)
    w.resize(from.possessed[0].hull(from.needed[0]))
    const comm = lostPeerComm()
    comm.recv = () => new Promise<Message>(() => {})
    const router = new Router(comm, 'border', { kind: 'all' }, 'strip')
    void router.route(router.plan(from, from), w, w, 3)
    await expect(router.settle(w)).rejects.toThrow(/write EPIPE/)
  })
})
