import { ConfigError } from '../errors.js'

/** Where a failure is injected: `rank` dies at `step` of `skeleton` during `phase`. */
export interface Injection {
  rank: number
  step: number
  skeleton: number
  phase: 'calculate' | 'route' | 'checkpoint'
}

const PHASES = ['calculate', 'route', 'checkpoint'] as const

/**
 * Parse `--inject` values: `rank=R,step=S[,phase=calculate|route|checkpoint][,skeleton=K]`
 * or `random[:seed][,count=K]` (resolved later against the problem size).
 *
 * ```ts
 * parseInjection('rank=1,step=40,phase=checkpoint')  // { kind: 'fixed', at: { rank: 1, step: 40, ... } }
 * ```
 */
export function parseInjection(text: string): { kind: 'fixed'; at: Injection } | { kind: 'random'; seed: number; count: number } {
  const t = text.trim()
  if (t === 'random' || t.startsWith('random:') || t.startsWith('random,')) {
    const [head, ...rest] = t.split(',')
    const seedText = head.includes(':') ? head.slice(head.indexOf(':') + 1) : String(Date.now() % 1_000_000)
    const seed = Number(seedText)
    if (!Number.isSafeInteger(seed)) throw new ConfigError(`--inject random:<seed> needs an integer seed (got "${seedText}")`)
    let count = 1
    for (const kv of rest) {
      const [k, v] = kv.split('=')
      if (k !== 'count') throw new ConfigError(`--inject random: unknown key "${k}" (use random[:seed][,count=K])`)
      count = Number(v)
      if (!Number.isSafeInteger(count) || count < 1) throw new ConfigError(`--inject random: count must be a positive integer (got "${v}")`)
    }
    return { kind: 'random', seed, count }
  }
  const at: Partial<Injection> = { skeleton: 0, phase: 'calculate' }
  for (const kv of t.split(',')) {
    const [k, v] = kv.split('=').map((s) => s?.trim())
    if (v === undefined || v === '') throw new ConfigError(`--inject: "${kv}" is not key=value (use rank=R,step=S[,phase=calculate|route|checkpoint])`)
    if (k === 'phase') {
      if (!(PHASES as readonly string[]).includes(v)) throw new ConfigError(`--inject: phase must be one of ${PHASES.join(', ')} (got "${v}")`)
      at.phase = v as Injection['phase']
    } else if (k === 'rank' || k === 'step' || k === 'skeleton') {
      const n = Number(v)
      if (!Number.isSafeInteger(n) || n < 0) throw new ConfigError(`--inject: ${k} must be a non-negative integer (got "${v}")`)
      at[k] = n
    } else throw new ConfigError(`--inject: unknown key "${k}" (use rank, step, phase, skeleton)`)
  }
  if (at.rank === undefined || at.step === undefined) throw new ConfigError('--inject needs rank=R and step=S (or "random")')
  return { kind: 'fixed', at: at as Injection }
}

/** A random injection request: `count` points drawn from `seed` once the step count is known. */
export interface RandomInjection {
  seed: number
  count: number
}

const RANDOM_PHASES: readonly Injection['phase'][] = ['calculate', 'route', 'checkpoint']

/**
 * The points of a random injection in a skeleton of `total` supersteps on
 * `size` ranks: the same on every rank (a seeded generator), never step 0 of
 * the run so that something can be saved first, distinct steps.
 *
 * ```ts
 * randomPoints({ seed: 7, count: 2 }, 0, 200, 4)  // e.g. [{ rank: 3, step: 57, ... }, { rank: 0, step: 131, ... }]
 * ```
 */
export function randomPoints(r: RandomInjection, skeleton: number, total: number, size: number): Injection[] {
  let state = (r.seed ^ 0x9e3779b9) >>> 0
  const next = () => {
    // mulberry32: small, seeded, good enough to pick failure points.
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const out: Injection[] = []
  const used = new Set<number>()
  const span = Math.max(1, total - 1)
  for (let i = 0; i < r.count && used.size < span; i++) {
    let step = 1 + Math.floor(next() * span)
    while (used.has(step)) step = 1 + (step % span)
    used.add(step)
    out.push({ rank: Math.floor(next() * size), step: Math.min(step, total - 1), skeleton, phase: RANDOM_PHASES[Math.floor(next() * 3)] })
  }
  return out.sort((a, b) => a.step - b.step)
}

export function sameInjection(a: Injection, b: { rank: number; skeleton: number; step: number; phase: string }): boolean {
  return a.rank === b.rank && a.skeleton === b.skeleton && a.step === b.step && a.phase === b.phase
}
