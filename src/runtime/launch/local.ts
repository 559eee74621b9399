import { plainAllocator, sharedAllocator } from '../../domains/dtype.js'
import { PointToPointCommunicator } from '../transport/collectives.js'
import { SENT, type Communicator, type Message } from '../../routing/communicator.js'
import { Mailbox } from '../transport/mailbox.js'
import { MessagePool } from '../transport/message-pool.js'
import { CommunicationError, ConfigError, MolotofError, RankFailedError } from '../../errors.js'
import { parseOptions, type OptionSpecs } from '../../skeletons/options.js'
import type { Program } from '../../skeletons/program.js'
import { frozenConfig, type FaultToleranceConfig } from '../../checkpoint/config.js'
import type { CheckpointEvent } from '../../checkpoint/events.js'
import { runSession } from '../rank/rank-session.js'
import { PartitionShare } from '../../routing/partition.js'
import { SparseClock } from '../../skeletons/sparse-clock.js'
import { StepScheduler } from '../../skeletons/step-scheduler.js'
import { YIELD_EVERY_MS } from '../../skeletons/skeleton.js'
import { createStatusBuffer, RankStatus, readStatus } from '../status.js'

/**
 * All ranks of a group in one thread: for unit tests of kernels, partitions and
 * routing without starting threads. Each rank runs as an async task; sends copy
 * (into pooled buffers, so a steady exchange allocates nothing). With a
 * StepScheduler (as `runLocal` gives), each delivery tells it, so that the
 * skeleton loops parked on a missing message run again without a promise.
 *
 * ```ts
 * const comms = localGroup(3)
 * await Promise.all(comms.map(async (comm) => { ... same code on every rank ... }))
 * ```
 */
export function localGroup(size: number, opts: { shared?: boolean; scheduler?: StepScheduler } = {}): Communicator[] {
  const boxes = Array.from({ length: size }, () => new Mailbox())
  return boxes.map((_, rank) => new LocalCommunicator(rank, size, boxes, opts.shared ? sharedAllocator : plainAllocator, opts.scheduler))
}

class LocalCommunicator extends PointToPointCommunicator {
  private readonly pool = new MessagePool()

  constructor(
    readonly rank: number,
    readonly size: number,
    private readonly boxes: Mailbox[],
    readonly allocator: typeof plainAllocator,
    /** Runs the parked skeleton loops and collectives of the group's ranks (collective-steppers.ts). */
    readonly scheduler: StepScheduler | undefined,
  ) {
    super()
  }

  send(dest: number, tag: number, bytes: Uint8Array): Promise<void> {
    if (!(dest >= 0 && dest < this.size)) throw new ConfigError(`rank ${this.rank}: no rank ${dest} (size ${this.size})`)
    const m = this.pool.take(bytes.byteLength)
    m.bytes.set(bytes)
    // The receiver's continuation runs on a later microtask, as with a real transport.
    this.boxes[dest].deliver(this.rank, tag, m)
    // A parked superstep loop may be waiting for it.
    this.scheduler?.delivered(dest, this.rank, tag)
    return SENT
  }
  recv(src: number, tag: number): Promise<Message> {
    return this.boxes[this.rank].take(src, tag)
  }
  recvNow(src: number, tag: number): Message | undefined {
    return this.boxes[this.rank].takeNow(src, tag)
  }
  close(): void {
    this.boxes[this.rank].fail(new CommunicationError(`rank ${this.rank}: communicator closed`))
  }
}

/** How `runLocal` runs a program. */
export interface LocalRunOptions {
  /** Number of ranks (async ranks of this thread). */
  ranks: number
  /** The program's own options, as on the command line (`['--n', '64']`). */
  argv?: readonly string[]
  /** Receives every line a rank logs (default: dropped). */
  onLog?: (rank: number, text: string) => void
  /** Checkpointing and recovery (off when absent). */
  checkpoint?: FaultToleranceConfig
  /** Each committed checkpoint, as every rank sees it (rank 0's is the run's view). */
  onCheckpoint?: (rank: number, e: CheckpointEvent) => void
}

/**
 * Run a program on `ranks` async ranks in this thread (no workers): the fast
 * path for tests. Their skeleton loops run in turn from one call stack (a
 * StepScheduler), so a superstep allocates nothing here either. Options are
 * given as command-line words.
 *
 * ```ts
 * const program = defineProgram({
 *   name: 'sum',
 *   options: { n: option.int(10, 'per-rank factor') },
 *   main: (ctx) => ctx.allreduce(ctx.rank * ctx.options.n, 'sum'),
 * })
 * const values = await runLocal(program, { ranks: 3, argv: ['--n', '64'] })   // [192, 192, 192]
 * ```
 */
export async function runLocal<R>(program: Program<OptionSpecs, R>, opts: LocalRunOptions): Promise<R[]> {
  if (!Number.isInteger(opts.ranks) || opts.ranks < 1) throw new ConfigError(`the rank count must be a positive integer (got ${opts.ranks})`)
  const options = parseOptions(program.options, opts.argv ?? [])
  // One rank at a time lets the event loop run, for the whole group: the others soon wait for its halos anyway.
  const yieldClock = new SparseClock(YIELD_EVERY_MS)
  // The ranks' superstep loops run in turn from one call stack: no await per rank and superstep.
  const scheduler = new StepScheduler(opts.ranks, yieldClock)
  const comms = localGroup(opts.ranks, { scheduler })
  const ft = opts.checkpoint && frozenConfig(opts.checkpoint) // one configuration shared by every rank of this thread
  const status = createStatusBuffer(opts.ranks)
  // Same program, same epochs: the ranks hand each other their partitions (O(P) boxes in this heap, not O(P²)).
  const partitions = new PartitionShare()
  try {
    return await Promise.all(
      comms.map(async (comm, rank) => {
        try {
          return (await runSession({
            program: program as Program,
            comm,
            status: new RankStatus(status, rank),
            options,
            ft,
            partitions,
            yieldClock,
            scheduler,
            log: (t) => opts.onLog?.(rank, t),
            onCheckpoint: opts.onCheckpoint && ((e) => opts.onCheckpoint!(rank, e)),
          })) as R
        } catch (e) {
          // One failed rank would leave the others waiting: fail them all.
          for (const c of comms) c.close()
          if (e instanceof MolotofError) throw e
          const s = readStatus(status, rank)
          throw new RankFailedError({ rank, skeleton: s.skeleton, step: s.step, phase: s.phase }, String((e as Error)?.message ?? e))
        }
      }),
    )
  } finally {
    for (const c of comms) c.close()
    // Loops parked on a message that will never come (a rank failed) fail too.
    scheduler.fail(new CommunicationError('the run has ended'))
  }
}
