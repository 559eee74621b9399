import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { CheckpointVote, type ClockState, type VoteOutcome } from '../../../src/checkpoint/coordination/vote.js'
import type { CheckpointControl } from '../../../src/checkpoint/control.js'
import type { CheckpointPolicy } from '../../../src/checkpoint/policy/policy.js'
import type { SkeletonState } from '../../../src/checkpoint/skeleton-hooks.js'
import type { Communicator } from '../../../src/routing/communicator.js'

// Ranks simulated in lockstep on clocks of their own: every rank reaches checkpoint point `step` in turn,
// at its own time (the sum of its supersteps' durations). The allreduce resolves once every rank has
// called it at that point; a rank that votes alone (the ranks disagree on when to vote) fails the test.

interface Simulated {
  /** Per rank and step: what decide answered. */
  outcomes: VoteOutcome[][]
  /** Per rank: its time at each step. */
  times: number[][]
  /** Steps at which the ranks voted. */
  voteSteps: number[]
}

interface Options {
  ranks: number
  steps: number
  /** Duration of superstep `step` on `rank` (ms). */
  stepMs: (rank: number, step: number) => number
  disk?: CheckpointPolicy
  memory?: CheckpointPolicy
  /** A background checkpoint's write takes this long (ms) on every rank, then waits for a vote to commit. */
  writeMs?: number
  /** This rank asks for preemption at this time of its clock. */
  preemptAt?: { rank: number; ms: number }
}

async function simulate(o: Options): Promise<Simulated> {
  const waiting: { value: number; resolve: (v: number) => void }[] = []
  const controls: CheckpointControl[] = []
  const votes = Array.from({ length: o.ranks }, (_, rank) => {
    const comm = { rank, size: o.ranks, allreduce: (value: number) => new Promise<number>((resolve) => waiting.push({ value, resolve })) }
    const control: CheckpointControl = { preemptRequested: false, preemptible: o.preemptAt !== undefined }
    controls.push(control)
    return new CheckpointVote(comm as unknown as Communicator, o.disk ?? { kind: 'off' }, control, o.memory)
  })
  const clocks: ClockState[] = []
  const now = new Array<number>(o.ranks).fill(0)
  // Per rank: when its background write is done (undefined: nothing in flight).
  const writeDone = new Array<number | undefined>(o.ranks).fill(undefined)
  const out: Simulated = { outcomes: votes.map(() => []), times: votes.map(() => []), voteSteps: [] }
  for (let step = 0; step < o.steps; step++) {
    const decided: Promise<VoteOutcome>[] = []
    for (let r = 0; r < o.ranks; r++) {
      now[r] += o.stepMs(r, step)
      const state = { index: 0, name: 'simulated', step, policy: undefined, memoryPolicy: undefined } as unknown as SkeletonState
      if (step === 0) {
        const c = votes[r].clockFor(state)
        c.lastAt = c.lastVote.at = 0
        if (c.memory) c.memory.lastAt = 0
        clocks.push(c)
      }
      if (o.preemptAt && r === o.preemptAt.rank && now[r] >= o.preemptAt.ms) controls[r].preemptRequested = true
      decided.push(votes[r].decide(state, clocks[r], now[r], writeDone[r] !== undefined))
    }
    if (waiting.length > 0) {
      expect(waiting.length, `every rank votes at step ${step}`).toBe(o.ranks)
      const max = Math.max(...waiting.map((w) => w.value))
      for (const w of waiting.splice(0)) w.resolve(max)
      out.voteSteps.push(step)
    }
    const outcomes = await Promise.all(decided)
    for (let r = 0; r < o.ranks; r++) {
      const d = outcomes[r]
      out.outcomes[r].push(d)
      out.times[r].push(now[r])
      // What the committer does: commit a write that is done at a vote, start one at a checkpoint.
      if (d.pollCommit && writeDone[r] !== undefined && now[r] >= writeDone[r]!) {
        writeDone[r] = undefined
        const level = clocks[r].memory ?? clocks[r]
        level.lastAt = now[r]
      }
      if (d.go) {
        if (clocks[r].memory) clocks[r].memory!.lastAt = now[r]
        if (d.level === 'disk') clocks[r].lastAt = now[r]
        writeDone[r] = now[r] + (o.writeMs ?? 30)
      }
    }
  }
  return out
}

/** Steps at which `rank` checkpointed. */
const goSteps = (s: Simulated, rank = 0) => s.outcomes[rank].flatMap((d, step) => (d.go ? [step] : []))

const stepTimes = fc.record({
  // Each rank's mean superstep (ms) and the jitter around it.
  means: fc.array(fc.double({ min: 0.2, max: 5, noNaN: true }), { minLength: 3, maxLength: 3 }),
  jitter: fc.double({ min: 0, max: 0.5, noNaN: true }),
  seed: fc.integer({ min: 1, max: 2 ** 30 }),
})

/** Deterministic superstep durations: mean × (1 ± jitter), from a small hash of (seed, rank, step). */
function durations(t: { means: number[]; jitter: number; seed: number }): (rank: number, step: number) => number {
  return (rank, step) => {
    let h = Math.imul(t.seed ^ Math.imul(rank + 1, 0x9e3779b1) ^ Math.imul(step + 1, 0x85ebca6b), 0xc2b2ae35)
    h ^= h >>> 15
    const u = (h >>> 0) / 2 ** 32
    return t.means[rank] * (1 + t.jitter * (2 * u - 1))
  }
}

describe('CheckpointVote', () => {
  it('ranks with clocks of their own vote at the same steps and decide the same', async () => {
    await fc.assert(
      fc.asyncProperty(stepTimes, fc.integer({ min: 1, max: 3 }), fc.constantFrom(0.3, 0.8, 2), async (t, ranks, seconds) => {
        const steps = Math.ceil(6000 / Math.min(...t.means.slice(0, ranks)))
        const s = await simulate({ ranks, steps: Math.min(steps, 20_000), stepMs: durations(t), memory: { seconds } })
        for (let r = 1; r < ranks; r++) expect(s.outcomes[r]).toEqual(s.outcomes[0])
      }),
      { numRuns: 25 },
    )
  })

  it('checkpoints once per period: never early on the rank whose clock decides, late by at most ~100 ms', async () => {
    await fc.assert(
      fc.asyncProperty(stepTimes, fc.constantFrom(0.5, 2), async (t, seconds) => {
        const ranks = 2
        const mean = Math.max(...t.means.slice(0, ranks))
        const s = await simulate({ ranks, steps: Math.ceil((4 * seconds * 1000) / mean), stepMs: durations(t), memory: { seconds }, writeMs: 20 })
        const gos = goSteps(s)
        expect(gos.length).toBeGreaterThanOrEqual(2)
        // The clock restarts at the point and again at the commit; the next checkpoint is due a period after
        // the commit on the rank that sees it first.
        for (let i = 1; i < gos.length; i++) {
          const elapsed = Math.max(...s.times.map((times) => times[gos[i]] - times[gos[i - 1]]))
          expect(elapsed).toBeGreaterThanOrEqual(seconds * 1000)
          // Commit one vote (≤ ~100 ms plus a superstep) after the 20 ms write, then the period, then the vote
          // at the due time: 100 ms of supersteps as the ranks measured them, which jitter stretches.
          const slack = (100 + 2 * mean) * (1 + 2 * t.jitter)
          expect(elapsed).toBeLessThanOrEqual(seconds * 1000 + 2 * slack + 20)
        }
      }),
      { numRuns: 25 },
    )
  })

  it('votes a few times per period, not every 100 ms: far from the due time they are up to 1 s apart (250 ms when preemptible)', async () => {
    const s = await simulate({ ranks: 2, steps: 20_000, stepMs: () => 1, memory: { seconds: 4 } })
    const gos = goSteps(s)
    expect(gos.length).toBe(4)
    // Per 4 s period: the vote that checkpoints, the one that commits 100 ms later, four 1 s apart until the
    // due time and one more if the last fell just short of it, plus the skeleton's first votes; 100 ms apart
    // would be 40.
    const perPeriod = s.voteSteps.length / gos.length
    expect(perPeriod).toBeLessThanOrEqual(8)
    const gaps = s.voteSteps.slice(1).map((v, i) => v - s.voteSteps[i])
    expect(Math.max(...gaps)).toBeLessThanOrEqual(1000)
    expect(Math.min(...gaps.slice(1))).toBeGreaterThanOrEqual(100)
    // A preemptible run (under a launcher) that is never preempted votes at most 250 ms apart.
    const p = await simulate({ ranks: 2, steps: 20_000, stepMs: () => 1, memory: { seconds: 4 }, preemptAt: { rank: 0, ms: Infinity } })
    expect(goSteps(p)).toEqual(gos)
    const pGaps = p.voteSteps.slice(1).map((v, i) => v - p.voteSteps[i])
    expect(Math.max(...pGaps)).toBeLessThanOrEqual(250)
    expect(p.voteSteps.length / gos.length).toBeLessThanOrEqual(24)
  })

  it('votes again 100 ms after a checkpoint, to commit it', async () => {
    const s = await simulate({ ranks: 2, steps: 6000, stepMs: () => 1, memory: { seconds: 2 }, writeMs: 30 })
    for (const go of goSteps(s)) {
      const next = s.voteSteps.find((v) => v > go)
      if (next !== undefined) expect(next - go).toBe(100)
    }
  })

  it('sees a preemption within about 250 ms of supersteps, on every rank at the same step', async () => {
    await fc.assert(
      fc.asyncProperty(stepTimes, fc.integer({ min: 0, max: 2 }), fc.integer({ min: 500, max: 4000 }), async (t, rank, ms) => {
        const ranks = 3
        const stepMs = durations(t)
        const s = await simulate({ ranks, steps: Math.ceil(7000 / Math.min(...t.means)), stepMs, preemptAt: { rank, ms } })
        const at = s.outcomes.map((o) => o.findIndex((d) => d.preempt))
        expect(new Set(at).size).toBe(1)
        expect(at[0]).toBeGreaterThanOrEqual(0)
        expect(s.outcomes[0][at[0]].go && s.outcomes[0][at[0]].level === 'disk').toBe(true)
        const late = s.times[rank][at[0]] - ms
        expect(late).toBeLessThanOrEqual((250 + 2 * t.means[rank]) * (1 + 2 * t.jitter) + Math.max(...t.means))
      }),
      { numRuns: 25 },
    )
  })
})
