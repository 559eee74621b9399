import { parseArgs } from 'node:util'
import { ConfigError } from '../errors.js'

/**
 * A command-line option, declared once: it is parsed from
 * `molotof run prog.ts --name value`, shown by `--help`, and (for a program)
 * stored in every checkpoint as one of the run's *settings* (a resume with
 * other settings is refused). The framework's own flags (`--ranks`,
 * `--checkpoint`…) are declared the same way, so both read alike.
 *
 * ```ts
 * const options = {
 *   n: option.int(2048, 'interior size (N×N cells)', { min: 1 }),
 *   tol: option.number(1e-6, 'stop below this residual', { min: 0 }),
 *   model: option.choice(['g', 'nig'] as const, 'g', 'price model'),
 *   sigma: option.number(undefined, "volatility (default: the preset's)"),
 * } satisfies Record<string, OptionSpec>
 * ```
 */
export type OptionSpec = OptionCommon &
  (
    | ({ type: 'int' | 'number'; default?: number } & NumberRange)
    | { type: 'string'; default?: string }
    | { type: 'boolean'; default: boolean }
    | { type: 'choice'; default?: string; choices: readonly string[] }
  )

/** What every option has, whatever its type. */
export interface OptionCommon {
  /** One line for `--help`. */
  help: string
  /**
   * Whether the option is a *setting* of the computation (default true):
   * settings are stored in checkpoints and a resume with other values is
   * refused. Options that do not change results (output, checkpoint policy)
   * say `setting: false` (see `notSetting`).
   */
  setting?: boolean
  /** A one-letter alias (`h` for `-h`); the framework uses it for `--help` only. */
  short?: string
}

/** Inclusive bounds of a numeric option. */
export interface NumberRange {
  min?: number
  max?: number
}

/** A program's options by name (camelCase here, `--kebab-case` on the command line). */
export type OptionSpecs = Record<string, OptionSpec>

type BaseValue<S> = S extends { type: 'int' | 'number' }
  ? number
  : S extends { type: 'boolean' }
    ? boolean
    : S extends { type: 'choice'; choices: readonly (infer C)[] }
      ? C
      : string

// An option declared without a default is `undefined` when not given.
type ValueOf<S> = S extends { default: string | number | boolean } ? BaseValue<S> : BaseValue<S> | undefined

/** The parsed values of a set of option specs. */
export type OptionValues<O extends OptionSpecs> = { readonly [K in keyof O]: ValueOf<O[K]> }

/**
 * Option builders. A default of `undefined` declares an option that may be
 * left out (its value is then `undefined`, and `--help` shows no default).
 *
 * ```ts
 * const options = {
 *   n: option.int(256, 'interior size', { min: 1 }),  // --n <int>, 1 or more
 *   window: option.boolean(true, 'windowed grid'),     // --window, --no-window, --window=false
 * }
 * ```
 */
export const option = {
  /** An integer option (`--n <int>`), optionally within a range. */
  int: <D extends number | undefined>(def: D, help: string, range: NumberRange = {}) =>
    ({ type: 'int', default: def, help, ...range }) as { type: 'int'; default: D; help: string } & NumberRange,
  /** A number option (`--tol <number>`), optionally within a range. */
  number: <D extends number | undefined>(def: D, help: string, range: NumberRange = {}) =>
    ({ type: 'number', default: def, help, ...range }) as { type: 'number'; default: D; help: string } & NumberRange,
  /** A string option. */
  string: <D extends string | undefined>(def: D, help: string) => ({ type: 'string', default: def, help }) as { type: 'string'; default: D; help: string },
  /** A switch: `--x`, `--no-x`, `--x=true|false|1|0`. */
  boolean: (def: boolean, help: string) => ({ type: 'boolean', default: def, help }) as { type: 'boolean'; default: boolean; help: string },
  /** One of `choices`; anything else is refused before any computation. */
  choice: <const C extends readonly string[], D extends C[number] | undefined>(choices: C, def: D, help: string) =>
    ({ type: 'choice', default: def, help, choices }) as { type: 'choice'; default: D; help: string; choices: C },
}

/**
 * Mark an option as not a setting: it may change between a run and its
 * resume (settings must match the checkpoint's, or the resume is refused).
 *
 * ```ts
 * const options = {
 *   n: option.int(256, 'interior size'),                         // a setting
 *   verbose: notSetting(option.boolean(false, 'print progress')),  // free to change on --resume
 * }
 * ```
 */
export function notSetting<S extends OptionSpec>(spec: S): S {
  return { ...spec, setting: false }
}

/**
 * The subset of option values that are settings (see `OptionSpec.setting`), as
 * plain JSON; an option left out is stored as `null`.
 *
 * ```ts
 * const specs = { n: option.int(2048, 'size'), sigma: option.number(undefined, 'volatility') }
 * settingsOf(specs, parseOptions(specs, []))  // { n: 2048, sigma: null }
 * ```
 */
export function settingsOf(specs: OptionSpecs, values: Record<string, unknown>): Record<string, string | number | boolean | null> {
  const out: Record<string, string | number | boolean | null> = {}
  for (const [k, s] of Object.entries(specs)) if (s.setting !== false) out[k] = (values[k] as string | number | boolean | undefined) ?? null
  return out
}

/**
 * The flag of an option key, kebab-case: `maxIter` → `--max-iter`, `N` → `--n`,
 * `nigDxFactor` → `--nig-dx-factor`, `a2` → `--a2`.
 */
export function flagOf(key: string): string {
  const kebab = key
    .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
    .replace(/([A-Z])([A-Z][a-z])/g, '$1-$2')
    .toLowerCase()
  return '--' + kebab
}

/** How `parseArgv` treats words that are not its options. */
export interface ParseMode {
  /** How many positional words are accepted (default 0); only with `unknown: 'refuse'`. */
  positionals?: number
  /**
   * `refuse` (default): an unknown option is a ConfigError naming the closest
   * known one. `pass`: unknown options and every other word are returned in
   * `rest`, in their order, for someone else to parse (the program).
   */
  unknown?: 'refuse' | 'pass'
}

export interface ParsedArgv<O extends OptionSpecs> {
  values: OptionValues<O>
  /** The positional words (mode `refuse`), words after `--` included. */
  positionals: string[]
  /** Mode `pass`: the words before `--` that are not these options or their values, in order. */
  rest: string[]
  /** Mode `pass`: the words after `--`, untouched. */
  afterDashes: string[]
}

/**
 * The one command-line parser of molotof, for the framework's flags and for
 * programs' options alike. Forms: `--name value`, `--name=value`; booleans
 * `--flag`, `--no-flag`, `--flag=true|false|1|0` (a boolean never takes the
 * next word as its value). Every value is checked against its spec (type,
 * range, choices); a bad one is a ConfigError naming the flag and the value.
 *
 * ```ts
 * const { values, rest } = parseArgv({ ranks: option.int(2, 'ranks', { min: 1 }) }, process.argv.slice(2), { unknown: 'pass' })
 * ```
 */
export function parseArgv<O extends OptionSpecs>(specs: O, argv: readonly string[], mode: ParseMode = {}): ParsedArgv<O> {
  const byName = namesOf(specs)
  const config: Record<string, { type: 'string' | 'boolean'; short?: string }> = {}
  for (const [name, key] of byName) {
    const s = specs[key]
    config[name] = { type: s.type === 'boolean' ? 'boolean' : 'string', ...(s.short ? { short: s.short } : {}) }
  }
  // node:util parseArgs splits the words (long and short forms, `=` values,
  // `--`); non-strict, so that unknown words come back as tokens for `pass`
  // and for our own messages. Values are typed and checked below.
  const { tokens } = parseArgs({ args: [...argv], options: config, strict: false, allowPositionals: true, tokens: true })
  const values: Record<string, unknown> = {}
  for (const [k, s] of Object.entries(specs)) values[k] = s.default
  const pass = mode.unknown === 'pass'
  const consumed = new Set<number>()
  const positionals: string[] = []
  let dashes = argv.length
  let previous: { flag: string; boolean: boolean } | undefined
  for (const t of tokens) {
    if (t.kind === 'option-terminator') {
      dashes = t.index
      break
    }
    if (t.kind === 'positional') {
      if (!pass) {
        if (positionals.length >= (mode.positionals ?? 0)) throw new ConfigError(unexpectedMessage(t.value, previous))
        positionals.push(t.value)
      }
      previous = undefined
      continue
    }
    const key = byName.get(t.name)
    if (key !== undefined) {
      const spec = specs[key]
      const flag = flagOf(key)
      consumed.add(t.index)
      if (spec.type === 'boolean') {
        values[key] = t.inlineValue ? parseBoolean(flag, t.value ?? '') : true
      } else {
        if (t.value === undefined || (!t.inlineValue && t.value.startsWith('--'))) throw new ConfigError(`${flag} needs a value (${spec.help})`)
        if (!t.inlineValue) consumed.add(t.index + 1)
        values[key] = parseValue(flag, spec, t.value)
      }
      previous = { flag, boolean: spec.type === 'boolean' && !t.inlineValue }
      continue
    }
    const negated = t.name.startsWith('no-') ? byName.get(t.name.slice(3)) : undefined
    if (negated !== undefined && specs[negated].type === 'boolean') {
      if (t.inlineValue) throw new ConfigError(`${t.rawName} takes no value (got "${t.rawName}=${t.value}"); write ${t.rawName} alone, or ${flagOf(negated)}=true|false`)
      consumed.add(t.index)
      values[negated] = false
      previous = { flag: t.rawName, boolean: true }
      continue
    }
    if (!pass) throw new ConfigError(unknownMessage(t.rawName, knownFlags(specs)))
    previous = undefined
  }
  const afterDashes = dashes < argv.length ? argv.slice(dashes + 1) : []
  if (!pass) {
    for (const w of afterDashes) {
      if (positionals.length >= (mode.positionals ?? 0)) throw new ConfigError(unexpectedMessage(w, undefined))
      positionals.push(w)
    }
  }
  return {
    values: values as OptionValues<O>,
    positionals,
    rest: pass ? argv.slice(0, dashes).filter((_, i) => !consumed.has(i)) : [],
    afterDashes: pass ? afterDashes : [],
  }
}

/**
 * A program's options from its command-line words (every word must be one
 * of its options): `parseArgv` in its strict form.
 *
 * ```ts
 * parseOptions({ n: option.int(16, 'size', { min: 1 }) }, ['--n', '32'])  // { n: 32 }
 * ```
 */
export function parseOptions<O extends OptionSpecs>(specs: O, argv: readonly string[]): OptionValues<O> {
  return parseArgv(specs, argv).values
}

/** Flag name (without `--`) → option key; refuses two keys with one flag and a default outside its range. */
function namesOf(specs: OptionSpecs): Map<string, string> {
  const byName = new Map<string, string>()
  for (const [key, s] of Object.entries(specs)) {
    const name = flagOf(key).slice(2)
    const other = byName.get(name)
    if (other !== undefined) throw new ConfigError(`options "${other}" and "${key}" both read ${flagOf(key)}: rename one of them`)
    byName.set(name, key)
    if (s.default !== undefined && s.type !== 'boolean' && s.type !== 'string') {
      try {
        parseValue(flagOf(key), s, String(s.default))
      } catch (e) {
        throw new ConfigError(`the default of ${flagOf(key)} does not fit its own declaration: ${(e as Error).message}`)
      }
    }
  }
  return byName
}

function knownFlags(specs: OptionSpecs): string[] {
  return Object.keys(specs).map(flagOf)
}

/** A value checked against its spec; the error names the flag, the value and what is accepted. */
function parseValue(flag: string, spec: OptionSpec, raw: string): string | number | boolean {
  switch (spec.type) {
    case 'int':
    case 'number': {
      const v = Number(raw)
      const range = spec.min !== undefined || spec.max !== undefined ? ` (${flag} takes ${rangeText(spec)})` : ''
      if (raw.trim() === '' || !Number.isFinite(v)) throw new ConfigError(`${flag}: "${raw}" is not a number${range}`)
      if (spec.type === 'int' && !Number.isSafeInteger(v)) throw new ConfigError(`${flag}: "${raw}" is not an integer${range}`)
      if ((spec.min !== undefined && v < spec.min) || (spec.max !== undefined && v > spec.max)) {
        throw new ConfigError(`${flag} must be ${rangeText(spec)}, got ${raw}`)
      }
      return v
    }
    case 'boolean':
      return parseBoolean(flag, raw)
    case 'choice':
      if (!spec.choices.includes(raw)) throw new ConfigError(`${flag} must be one of ${spec.choices.join(', ')}; got "${raw}"`)
      return raw
    case 'string':
      return raw
  }
}

function parseBoolean(flag: string, raw: string): boolean {
  if (raw === 'true' || raw === '1') return true
  if (raw === 'false' || raw === '0') return false
  throw new ConfigError(`${flag} is a switch: give ${flag}, --no-${flag.slice(2)} or ${flag}=true|false|1|0 (got "${raw}")`)
}

/** `an integer ≥ 1`, `a number from 0 to 1`, `an integer`. */
function rangeText(spec: { type: 'int' | 'number' } & NumberRange): string {
  const what = spec.type === 'int' ? 'an integer' : 'a number'
  const { min, max } = spec
  if (min !== undefined && max !== undefined) return `${what} from ${min} to ${max}`
  if (min !== undefined) return `${what} ≥ ${min}`
  if (max !== undefined) return `${what} ≤ ${max}`
  return what
}

function unexpectedMessage(word: string, previous: { flag: string; boolean: boolean } | undefined): string {
  if (previous?.boolean && /^(true|false|1|0)$/.test(word)) {
    return `unexpected argument "${word}": ${previous.flag} is a switch and takes no separate value; write ${previous.flag}=${word}`
  }
  return `unexpected argument "${word}" (options look like --name value)`
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

/**
 * The one option table of molotof's help, for framework flags and program
 * options alike: one line per option with its true type (`<int>`, `<number>`,
 * `<string>`, the choices), its range, and its default when it has one.
 *
 * ```ts
 * formatOptions({ n: option.int(256, 'interior size', { min: 1 }) })
 * // '  --n <int>  interior size [≥ 1; default: 256]'
 * ```
 */
export function formatOptions(specs: OptionSpecs): string {
  const rows = Object.entries(specs).map(([k, s]) => [flagColumn(k, s), helpColumn(s)])
  if (rows.length === 0) return '  (none)'
  const w = Math.max(...rows.map((r) => r[0].length)) + 2
  return rows.map(([a, b]) => `  ${a.padEnd(w)}${b}`.trimEnd()).join('\n')
}

// A list of choices longer than this is named `<choice>` and spelled out in the help column.
const INLINE_CHOICES = 24

function flagColumn(key: string, s: OptionSpec): string {
  const flag = flagOf(key)
  const short = s.short ? `-${s.short}, ` : ''
  switch (s.type) {
    case 'boolean':
      return short + (s.default ? `--[no-]${flag.slice(2)}` : flag)
    case 'choice': {
      const inline = s.choices.join('|')
      return `${short}${flag} <${inline.length <= INLINE_CHOICES ? inline : 'choice'}>`
    }
    default:
      return `${short}${flag} <${s.type}>`
  }
}

function helpColumn(s: OptionSpec): string {
  // Facts about the accepted values, in one bracket: range or choices, then default.
  const facts: string[] = []
  if (s.type === 'choice' && s.choices.join('|').length > INLINE_CHOICES) facts.push(`one of ${s.choices.join(', ')}`)
  if ((s.type === 'int' || s.type === 'number') && (s.min !== undefined || s.max !== undefined)) facts.push(rangeText(s).replace(/^an? (integer|number) /, ''))
  // A switch that is off unless given has no default worth stating.
  if (s.default !== undefined && s.default !== false) facts.push(`default: ${s.default === '' ? '""' : String(s.default)}`)
  return facts.length > 0 ? `${s.help} [${facts.join('; ')}]` : s.help
}
