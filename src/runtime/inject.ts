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
