/** One progress report of a run: when (ms) it reached superstep `step`. */
export interface ProgressSample {
  readonly at: number
  readonly step: number
}

/**
 * The time (ms) that each event — a checkpoint at superstep `steps[i]` —
 * added to a run, estimated from the run's own progress: the time of the
 * `2K` supersteps around the event minus the time that `2K` supersteps took
 * just before and just after them (`K` supersteps span about `halfWindowMs`
 * at the run's mean pace). The comparison is local, within a few seconds of
 * the same run, so the slow drifts of a shared machine (minutes long, and
 * larger than a 1 % overhead) cancel, which a comparison of two whole runs
 * cannot do. It sees what an event costs in its window — its stall, and the
 * background work it starts as far as that slows the supersteps around it —
 * not a cost spread evenly over the run. Events must be more than
 * `4 · halfWindowMs` apart; an event too close to either end of the run
 * gives NaN.
 *
 * ```ts
 * const excess = excessAt(progress, checkpointSteps, 450)   // ms per checkpoint
 * const overhead = sum(excess) / runMs
 * ```
 */
export function excessAt(progress: readonly ProgressSample[], steps: readonly number[], halfWindowMs: number): number[] {
  if (progress.length < 2) return steps.map(() => NaN)
  const first = progress[0]
  const last = progress[progress.length - 1]
  const msPerStep = (last.at - first.at) / (last.step - first.step)
  const k = Math.max(1, Math.round(halfWindowMs / msPerStep))
  const at = (step: number) => timeAtStep(progress, step)
  return steps.map((s) => {
    const around = at(s + k) - at(s - k)
    const beside = at(s + 3 * k) - at(s + k) + (at(s - k) - at(s - 3 * k))
    return around - beside / 2
  })
}

/**
 * The supersteps at which a run was every `periodMs` from its first report
 * on: the places of phantom events in a run without checkpoints, whose
 * excess (excessAt) shows the estimator's own noise.
 */
export function stepsEvery(progress: readonly ProgressSample[], periodMs: number): number[] {
  const out: number[] = []
  if (progress.length < 2) return out
  for (let t = progress[0].at + periodMs; t < progress[progress.length - 1].at; t += periodMs) out.push(Math.round(stepAtTime(progress, t)))
  return out
}

/** The time a run reached `step`, interpolated between its reports; NaN outside them. */
export function timeAtStep(progress: readonly ProgressSample[], step: number): number {
  return interpolate(progress, 'step', 'at', step)
}

/** The superstep a run was at at time `t`, interpolated between its reports; NaN outside them. */
export function stepAtTime(progress: readonly ProgressSample[], t: number): number {
  return interpolate(progress, 'at', 'step', t)
}

/** `to` where `from` is `x`, linear between the two reports around it (both grow along the run); NaN outside them. */
function interpolate(progress: readonly ProgressSample[], from: keyof ProgressSample, to: keyof ProgressSample, x: number): number {
  const i = firstIndex(progress, (p) => p[from] >= x)
  if (i < 0 || (i === 0 && progress[0][from] !== x)) return NaN
  if (progress[i][from] === x) return progress[i][to]
  const a = progress[i - 1]
  const b = progress[i]
  return a[to] + ((x - a[from]) * (b[to] - a[to])) / (b[from] - a[from])
}

/** The first index whose sample passes `ok` (samples are in order, so `ok` flips once); -1 if none. */
function firstIndex(progress: readonly ProgressSample[], ok: (p: ProgressSample) => boolean): number {
  let lo = 0
  let hi = progress.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (ok(progress[mid])) hi = mid
    else lo = mid + 1
  }
  return lo < progress.length ? lo : -1
}
