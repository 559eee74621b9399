import { CheckpointService, type CheckpointEvent, type FaultToleranceConfig } from '../checkpoint/service.js'
import { RankContext } from '../skeletons/context.js'
import { settingsOf, type OptionSpecs, type OptionValues } from '../skeletons/options.js'
import type { Program } from '../skeletons/program.js'
import { noHooks, type RankRuntime } from '../skeletons/runtime.js'
import type { Communicator } from './communicator.js'
import type { RankStatus } from './status.js'

/**
 * Requests from outside the program that the checkpoint service honours at
 * checkpoint points: preemption (checkpoint now, then stop) and the
 * mid-checkpoint failure injection.
 */
export interface SessionControl {
  /** Set when the launcher asks this rank to checkpoint and stop. */
  preemptRequested: boolean
  /** Set when the launcher asks for a checkpoint (SIGUSR1), without stopping. */
  checkpointRequested?: boolean
  /** Die halfway through writing the checkpoint file of (skeleton, step). */
  dieMidCheckpoint: { skeleton: number; step: number; die: () => never; /** Given as --inject (not drawn at random): checked against the policy. */ asked?: boolean } | undefined
  /** Agree on preemption at every checkpoint point (ranks launched by a supervisor). */
  preemptible?: boolean
}

/** Figures of a finished recovery on one rank. */
export interface ResumedFigures {
  seq: number
  skeleton: number
  step: number
  negotiateMs: number
  loadMs: number
  replayMs: number
  restoreMs: number
}

/** Everything one rank needs to run a program, whatever the transport. */
export interface RankSession {
  program: Program
  comm: Communicator
  status: RankStatus
  options: OptionValues<OptionSpecs>
  /** Checkpointing and recovery; none when undefined. */
  ft: FaultToleranceConfig | undefined
  control?: SessionControl
  log: (text: string) => void
  onCheckpoint?: (e: CheckpointEvent) => void
  onResumed?: (r: ResumedFigures) => void
  onStep?: (skeleton: number, step: number, total: number | undefined) => void
  onSkeletonStart?: (skeleton: number, total: number | undefined) => void
}

/** The fingerprint checkpoints carry: a directory of another program is refused. */
export function fingerprintOf(program: Program): string {
  return `molotof-program:${program.name}`
}

/** Open the checkpoint service (negotiating the recovery line on resume) and run `main`. */
export async function runSession(s: RankSession): Promise<unknown> {
  const rt: RankRuntime = { comm: s.comm, status: s.status, hooks: noHooks, onStep: s.onStep, onSkeletonStart: s.onSkeletonStart }
  s.status.set(-1, -1, 'light')
  let recovering = false
  if (s.ft) {
    const service = await CheckpointService.open(
      s.comm,
      s.ft,
      { fingerprint: fingerprintOf(s.program), settings: settingsOf(s.program.options, s.options) },
      s.log,
      { onCheckpoint: s.onCheckpoint, onResumed: s.onResumed, control: s.control },
    )
    rt.hooks = service
    recovering = service.recovering
    if (recovering && s.comm.rank === 0) {
      const r = service.recovery!
      s.log(
        `resuming from checkpoint ${r.seq} (skeleton ${r.skeleton}, step ${r.step}); recovery line agreed in ${r.negotiateMs.toFixed(1)} ms, ` +
          `rank file read and verified in ${r.loadMs.toFixed(1)} ms`,
      )
    }
  }
  const ctx = new RankContext(rt, s.options, recovering, s.log)
  return s.program.main(ctx)
}
