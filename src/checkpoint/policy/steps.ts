import { match } from 'ts-pattern'
import { toRule, type CheckpointPolicy } from './policy.js'

/** Whether a policy writes a checkpoint at a step, and the nearest steps where it does. */
export type StepCheckpoint =
  | { kind: 'yes' }
  /** `before`/`after`: the nearest checkpoint steps (undefined before the first one). */
  | { kind: 'no'; before: number | undefined; after: number; why: string }
  | { kind: 'never'; why: string }
  /** Time-based or on request: decided while running. */
  | { kind: 'unknown' }

/**
 * Where a step-based policy checkpoints, with steps numbered from 0:
 * `every:N` writes at the end of steps N−1, 2N−1, 3N−1, …
 *
 * ```ts
 * checkpointAtStep({ every: 50 }, 220)  // { kind: 'no', before: 199, after: 249, why: 'every:50 checkpoints …' }
 * ```
 */
export function checkpointAtStep(policy: CheckpointPolicy, step: number): StepCheckpoint {
  return match(toRule(policy))
    .returnType<StepCheckpoint>()
    .with({ kind: 'every' }, ({ steps: n }) => {
      if ((step + 1) % n === 0) return { kind: 'yes' }
      const before = Math.floor((step + 1) / n) * n - 1
      const why = `every:${n} checkpoints at the end of steps ${n - 1}, ${2 * n - 1}, ${3 * n - 1}, … (steps count from 0)`
      return { kind: 'no', before: before >= 0 ? before : undefined, after: before + n, why }
    })
    .with({ kind: 'off' }, () => ({ kind: 'never', why: 'checkpointing is off' }))
    .otherwise(() => ({ kind: 'unknown' }))
}
