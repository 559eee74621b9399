import { ConfigError } from '../errors.js'

/**
 * A program's command-line options, declared once: they are parsed from
 * `molotof run prog.ts --name value`, shown by `--help`, and stored in every
 * checkpoint as the run's *settings* (a resume with other settings is refused).
 *
 * ```ts
 * options: {
 *   n: option.int(2048, 'interior size (N×N cells)', { min: 1 }),
 *   model: option.choice(['g', 'nig'] as const, 'g', 'price model'),
 * }
 * ```
 */
export type OptionSpec = (
  | { type: 'int'; default: number; help: string; min?: number; max?: number }
  | { type: 'number'; default: number; help: string; min?: number; max?: number }
  | { type: 'string'; default: string; help: string }
  | { type: 'boolean'; default: boolean; help: string }
  | { type: 'choice'; default: string; help: string; choices: readonly string[] }
) & {
  /**
   * Whether the option is a *setting* of the computation (default true):
   * settings are stored in checkpoints and a resume with other values is
   * refused. Options that do not change results (output, checkpoint policy)
   * say `setting: false`.
   */
  setting?: boolean
}

export type OptionSpecs = Record<string, OptionSpec>

type ValueOf<S extends OptionSpec> = S extends { type: 'int' | 'number' }
  ? number
  : S extends { type: 'boolean' }
    ? boolean
    : S extends { type: 'choice'; choices: readonly (infer C)[] }
      ? C
      : string

/** The parsed values of a set of option specs. */
export type OptionValues<O extends OptionSpecs> = { readonly [K in keyof O]: ValueOf<O[K]> }

/** The subset of option values that are settings (see `OptionSpec.setting`), as plain JSON. */
export function settingsOf(specs: OptionSpecs, values: Record<string, unknown>): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {}
  for (const [k, s] of Object.entries(specs)) if (s.setting !== false) out[k] = values[k] as string | number | boolean
  return out
}

/** Mark an option as not a setting: it may change between a run and its resume. */
export function notSetting<S extends OptionSpec>(spec: S): S {
  return { ...spec, setting: false }
}

export const option = {
  int: (def: number, help: string, range: { min?: number; max?: number } = {}) =>
    ({ type: 'int', default: def, help, ...range }) as const,
  number: (def: number, help: string, range: { min?: number; max?: number } = {}) =>
    ({ type: 'number', default: def, help, ...range }) as const,
  string: (def: string, help: string) => ({ type: 'string', default: def, help }) as const,
  boolean: (def: boolean, help: string) => ({ type: 'boolean', default: def, help }) as const,
  choice: <const C extends readonly string[]>(choices: C, def: C[number], help: string) =>
    ({ type: 'choice', default: def, help, choices }) as { type: 'choice'; default: C[number]; help: string; choices: C },
}

/** Flag name for an option key: `maxIter` → `--max-iter`. */
export function flagOf(key: string): string {
  return '--' + key.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase())
}

/**
 * Parse `--key value`, `--key=value`, `--flag` / `--no-flag` for booleans.
 * Every value is checked; an unknown option names the closest known one.
 */
export function parseOptions<O extends OptionSpecs>(specs: O, argv: readonly string[]): OptionValues<O> {
  const byFlag = new Map(Object.keys(specs).map((k) => [flagOf(k), k]))
  const out: Record<string, unknown> = {}
  for (const [k, s] of Object.entries(specs)) out[k] = s.default
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (!arg.startsWith('--')) throw new ConfigError(`unexpected argument "${arg}" (options look like --name value)`)
    const eq = arg.indexOf('=')
    let flag = eq >= 0 ? arg.slice(0, eq) : arg
    let inline: string | undefined = eq >= 0 ? arg.slice(eq + 1) : undefined
    let key = byFlag.get(flag)
    if (!key && flag.startsWith('--no-') && inline === undefined) {
      const k = byFlag.get('--' + flag.slice(5))
      if (k && specs[k].type === 'boolean') {
        key = k
        flag = '--' + flag.slice(5)
        inline = 'false'
      }
    }
    if (!key) throw new ConfigError(unknownMessage(flag, [...byFlag.keys()]))
    const spec = specs[key]
    if (spec.type === 'boolean' && inline === undefined) {
      const nxt = argv[i + 1]
      inline = nxt === 'true' || nxt === 'false' ? (i++, nxt) : 'true'
    }
    if (inline === undefined) {
      if (i + 1 >= argv.length) throw new ConfigError(`option ${flag} needs a value (${spec.help})`)
      inline = argv[++i]
    }
    out[key] = parseValue(flag, spec, inline)
  }
  return out as OptionValues<O>
}

function parseValue(flag: string, spec: OptionSpec, raw: string): unknown {
  switch (spec.type) {
    case 'int':
    case 'number': {
      const v = Number(raw)
      if (raw.trim() === '' || !Number.isFinite(v)) throw new ConfigError(`option ${flag} needs a number, got "${raw}"`)
      if (spec.type === 'int' && !Number.isInteger(v)) throw new ConfigError(`option ${flag} needs an integer, got "${raw}"`)
      if (spec.min !== undefined && v < spec.min) throw new ConfigError(`option ${flag} must be ≥ ${spec.min}, got ${v}`)
      if (spec.max !== undefined && v > spec.max) throw new ConfigError(`option ${flag} must be ≤ ${spec.max}, got ${v}`)
      return v
    }
    case 'boolean':
      if (raw === 'true' || raw === '1') return true
      if (raw === 'false' || raw === '0') return false
      throw new ConfigError(`option ${flag} is true or false, got "${raw}"`)
    case 'choice':
      if (!spec.choices.includes(raw)) throw new ConfigError(`option ${flag} must be one of ${spec.choices.join(', ')}; got "${raw}"`)
      return raw
    case 'string':
      return raw
  }
}

function unknownMessage(flag: string, known: string[]): string {
  const near = known
    .map((k) => ({ k, d: editDistance(k, flag) }))
    .sort((a, b) => a.d - b.d)
    .filter((x) => x.d <= Math.max(2, Math.floor(flag.length / 3)))
  const hint = near.length > 0 ? ` Did you mean ${near[0].k}?` : ''
  return `unknown option ${flag}.${hint} Known options: ${known.join(' ') || '(none)'}`
}

function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)])
  for (let j = 1; j <= b.length; j++) d[0][j] = j
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
  }
  return d[a.length][b.length]
}

/** Help text for a set of options, one per line with default and range. */
export function formatOptions(specs: OptionSpecs): string {
  const rows = Object.entries(specs).map(([k, s]) => {
    const extra =
      s.type === 'choice'
        ? ` (one of ${s.choices.join(', ')})`
        : (s.type === 'int' || s.type === 'number') && (s.min !== undefined || s.max !== undefined)
          ? ` (${s.min ?? ''}..${s.max ?? ''})`
          : ''
    return [`  ${flagOf(k)} ${s.type === 'boolean' ? '' : `<${s.type}>`}`, `${s.help}${extra} [default: ${String(s.default)}]`]
  })
  const w = Math.max(0, ...rows.map((r) => r[0].length)) + 2
  return rows.map(([a, b]) => a.padEnd(w) + b).join('\n')
}
