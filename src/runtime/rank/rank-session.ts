import type { FaultToleranceConfig, ProgramIdentity } from '../../checkpoint/config.js'
import type { CheckpointControl } from '../../checkpoint/control.js'
import { CheckpointCoordinator } from '../../checkpoint/coordination/coordinator.js'
import { RecoveryLineDamagedError } from '../../checkpoint/recovery/elastic/line.js'
import type { RejectedLine } from '../../checkpoint/recovery/negotiate.js'
import type { CheckpointEvent, ResumedFigures } from '../../checkpoint/events.js'
import { RankContext } from '../../skeletons/context.js'
import type { OptionSpecs, OptionValues } from '../../skeletons/options.js'
import { programSettings, type Program } from '../../skeletons/program.js'
import { noHooks, type RankRuntime } from '../../skeletons/runtime.js'
import type { Communicator } from '../../routing/communicator.js'
import type { PartitionShare } from '../../routing/partition.js'
import type { SparseClock } from '../../skeletons/sparse-clock.js'
import type { StepScheduler } from '../../skeletons/step-scheduler.js'
import type { RankStatus } from '../status.js'
import type { RankLog } from '../../util/log.js'

/** Everything one rank needs to run a program, whatever the transport. */
export interface RankSession {
  program: Program
  comm: Communicator
  status: RankStatus
  options: OptionValues<OptionSpecs>
  /** Checkpointing and recovery; none when undefined. */
  ft: FaultToleranceConfig | undefined
  /** The program file and the modules loaded with it, when known: checkpoints then carry the code's identity. */
  code?: ProgramIdentity['code']
  control?: CheckpointControl
  /** `once`: a key said once per run (see the `log` message in protocol.ts). */
  log: RankLog
  onCheckpoint?: (e: CheckpointEvent) => void
  onResumed?: (r: ResumedFigures) => void
  onStep?: (skeleton: number, step: number, total: number | undefined) => void
  onSkeletonStart?: (skeleton: number, total: number | undefined, name: string) => void
  /** Partitions shared by the ranks of this heap (`runLocal`). */
  partitions?: PartitionShare
  /** The yield clock of the ranks of this thread (`runLocal`). */
  yieldClock?: SparseClock
  /** Runs the superstep loops of the ranks of this thread (`runLocal`). */
  scheduler?: StepScheduler
}

/** The fingerprint checkpoints carry: a directory of another program is refused. */
export function fingerprintOf(program: Program): string {
  return `molotof-program:${program.name}`
}

/**
 * Open the checkpoint coordinator (negotiating the recovery line on resume) and
 * run `main`. An elastic restore that finds the line damaged (every rank at
 * the same point) runs the program again from the top with that checkpoint
 * passed over, as negotiation passes over the damage it sees itself.
 */
export async function runSession(s: RankSession): Promise<unknown> {
  const rejected: RejectedLine[] = []
  for (;;) {
    try {
      return await runOnce(s, rejected)
    } catch (e) {
      if (!(e instanceof RecoveryLineDamagedError) || rejected.some((r) => r.seq === e.seq)) throw e
      rejected.push({ seq: e.seq, problems: e.problems })
    }
  }
}

async function runOnce(s: RankSession, rejected: readonly RejectedLine[]): Promise<unknown> {
  const rt: RankRuntime = { comm: s.comm, status: s.status, hooks: noHooks, onStep: s.onStep, onSkeletonStart: s.onSkeletonStart, partitions: s.partitions, yieldClock: s.yieldClock, scheduler: s.scheduler }
  s.status.set(-1, -1, 'light')
  let recovering = false
  let coordinator: CheckpointCoordinator | undefined
  if (s.ft) {
    coordinator = await CheckpointCoordinator.open(
      s.comm,
      s.ft,
      { fingerprint: fingerprintOf(s.program), settings: programSettings(s.program, s.options), ...(s.code ? { code: s.code } : {}) },
      s.log,
      { onCheckpoint: s.onCheckpoint, onResumed: s.onResumed, control: s.control, rejected },
    )
    rt.hooks = coordinator
    recovering = coordinator.recovering
    if (recovering && s.comm.rank === 0) {
      const r = coordinator.recovery!
      s.log(
        `resuming from checkpoint ${r.seq} (skeleton ${r.skeleton}, step ${r.step}) from the ${r.level} level; recovery line agreed in ${r.negotiateMs.toFixed(1)} ms, ` +
          (r.fromRanks === undefined ? `rank file read and verified in ${r.loadMs.toFixed(1)} ms` : `${r.fromRanks} old rank headers read in ${r.loadMs.toFixed(1)} ms`),
      )
    }
  }
  const ctx = new RankContext(rt, s.options, recovering, s.log)
  let value: unknown
  try {
    value = await s.program.main(ctx)
    await coordinator?.finish()
  } catch (e) {
    // Stopped from outside (a survivor, whose process runs the program again): a memory write, flush or copy
    // of this run still going must not rename or delete a file once the next run has begun. A rank that failed
    // by itself reports at once: its process is not used again.
    if (s.control?.stopped) await coordinator?.settle()
    throw e
  }
  await coordinator?.settle()
  return value
}
