import { mkdir, writeFile } from 'node:fs/promises'
import type { CheckpointAt, CheckpointFaults, RankFileToWrite } from '../../checkpoint/control.js'
import { TMP_INFIX } from '../../checkpoint/store/durable.js'
import { ConfigError } from '../../errors.js'
import { randomPoints, sameInjection, type Injection, type RandomInjection } from '../inject.js'
import type { RankStatus } from '../status.js'

/** What a rank needs to know to inject its failures (a part of what the launcher hands it). */
export interface RankInjectionSetup {
  rank: number
  size: number
  /** Failures to inject on this rank. */
  inject: Injection[]
  injectRandom?: RandomInjection
  /** Points that already fired in an earlier attempt. */
  injectFired?: Injection[]
  /** End this rank abruptly (SIGKILL for a process). */
  die: () => never
}

/**
 * Failure injection on this rank: die at the injected (skeleton, step, phase).
 * `calculate` and `route` fire when the rank enters that phase (watching its
 * status); `checkpoint` fires halfway through writing the checkpoint file —
 * a torn temporary file is left behind — or, when that checkpoint point
 * writes nothing, at its end (the checkpoint layer calls the CheckpointFaults
 * methods). Points that already fired in an earlier attempt are left out.
 *
 * ```ts
 * const injections = new RankInjections(init, status)
 * control.faults = injections            // checkpoint points call it
 * injections.skeletonStarts(0, total)    // draws random points, if any
 * ```
 */
export class RankInjections implements CheckpointFaults {
  private points: Injection[] = []
  /** The `checkpoint`-phase point, if any. */
  private midCheckpoint: Injection | undefined

  constructor(
    private readonly setup: RankInjectionSetup,
    private readonly status: RankStatus,
  ) {
    this.add(setup.inject)
  }

  /**
   * Random points are drawn once the first skeleton's step count is known.
   * A point past the skeleton's last step would never fire: the run would
   * finish without the failure that was asked for, so it is refused.
   */
  skeletonStarts(skeleton: number, total: number | undefined, name = `skeleton${skeleton}`): void {
    if (total !== undefined) {
      const past = this.setup.inject.find((p) => p.skeleton === skeleton && p.step >= total)
      if (past) {
        const what = `--inject rank=${past.rank},step=${past.step}`
        if (total === 0) throw new ConfigError(`${what}: ${name} runs no step, so this failure would never happen`)
        throw new ConfigError(`${what}: the last step of ${name} is ${total - 1} (steps count from 0), so this failure would never happen; inject at step ${total - 1} or before`)
      }
    }
    const r = this.setup.injectRandom
    if (!r || skeleton !== 0) return
    const points = randomPoints(r, skeleton, total ?? 100, this.setup.size)
    this.add(points.filter((p) => p.rank === this.setup.rank))
  }

  tornWrite(at: CheckpointAt, file: RankFileToWrite): Promise<never> | undefined {
    if (!this.diesAt(at)) return undefined
    // A background write (memory level, disk flush) runs while the rank computes later steps: report
    // the failure where it was injected, so that it counts as fired and the restart does not repeat it.
    return tornWrite(file, () => {
      this.status.set(at.skeleton, at.step, 'checkpoint')
      return this.setup.die()
    })
  }

  checkpointPointDone(at: CheckpointAt): void {
    if (this.diesAt(at)) this.setup.die()
  }

  askedCheckpointPoint(): CheckpointAt | undefined {
    const p = this.midCheckpoint
    return p !== undefined && this.setup.inject.includes(p) ? p : undefined
  }

  private diesAt(at: CheckpointAt): boolean {
    const p = this.midCheckpoint
    return p !== undefined && p.skeleton === at.skeleton && p.step === at.step
  }

  private add(list: Injection[]): void {
    const fired = this.setup.injectFired ?? []
    this.points.push(...list.filter((p) => !fired.some((f) => sameInjection(f, p))))
    this.midCheckpoint = this.points.find((p) => p.phase === 'checkpoint')
    const direct = this.points.filter((p) => p.phase !== 'checkpoint')
    this.status.onChange =
      direct.length === 0
        ? undefined
        : (skeleton, step, phase) => {
            for (const p of direct) if (p.skeleton === skeleton && p.step === step && p.phase === phase) this.setup.die()
          }
  }
}

/** Leave half of the rank file under a temporary name (as a crash mid-write would), then die. */
async function tornWrite(file: RankFileToWrite, die: () => never): Promise<never> {
  await mkdir(file.dir, { recursive: true })
  const whole = Buffer.concat(file.parts)
  await writeFile(`${file.path}${TMP_INFIX}${process.pid}-torn`, whole.subarray(0, whole.length >> 1))
  return die()
}
