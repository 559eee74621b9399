import { ConfigError } from '../errors.js'
import type { RankContext } from './context.js'
import { settingsOf, type OptionSpecs, type OptionValues } from './options.js'

/** The key under which a program carries its per-rank entry (shared across module copies). */
export const RANK_ENTRY = Symbol.for('molotof.rank-entry')

/** What `defineProgram` takes: a name, options, the SPMD `main`, and how to print the result. */
export interface ProgramDefinition<O extends OptionSpecs, R> {
  /** Identifies the program in checkpoints (a checkpoint of another program is refused). */
  name: string
  /** One line for `molotof run --help <program>`. */
  description?: string
  /** Command-line options; their values are the run's settings. */
  options: O
  /** The code every rank runs (SPMD). Light code here is replayed on recovery. */
  main(ctx: RankContext<OptionValues<O>>): Promise<R> | R
  /** How the launcher prints rank 0's result (JSON by default). */
  format?(result: R, options: OptionValues<O>): string
  /**
   * The settings as the computation uses them, when options leave values to
   * be resolved (an option left out takes a preset's value): they replace
   * the options' own in checkpoints, so that a resume compares values, and
   * `--model g` given or taken from the preset is the same setting. A key
   * that is no option adds a setting; an `undefined` value keeps the option's.
   */
  settings?(options: OptionValues<O>): Readonly<Record<string, string | number | boolean | null | undefined>>
}

/** A program as `defineProgram` returns it: the default export of a program file, run by `launch`, `Supervisor`, `runLocal` and `molotof run`. */
export interface Program<O extends OptionSpecs = OptionSpecs, R = unknown> extends Readonly<ProgramDefinition<O, R>> {
  /** Runs this program as one rank; `init` comes from the launcher (see src/runtime/rank/rank-main.ts). */
  readonly [RANK_ENTRY]: (init: unknown) => Promise<void>
  /** How the launcher prints rank 0's result (JSON by default). Declared again: `Readonly<…>` drops the doc comment. */
  readonly format?: ProgramDefinition<O, R>['format']
  /** The settings as the computation uses them (see `ProgramDefinition.settings`). Declared again for its doc comment. */
  readonly settings?: ProgramDefinition<O, R>['settings']
}

/** How a rank runs a program: installed by the runtime of the same molotof copy. */
export type RankEntry = (program: Program, init: unknown) => Promise<void>

// Declaring a program loads no runtime: the runtime of this copy of molotof
// installs the rank entry when it is loaded (src/runtime/rank/rank-entry.ts, pulled
// in by src/index.ts). The program keeps a reference to *its* copy's entry, so
// a rank runs the framework copy the program imported even when the launcher's
// copy is another one (the boot files find the entry by Symbol.for).
let rankEntry: RankEntry | undefined

/** Install how ranks run programs (the runtime calls it once, when loaded). */
export function installRankEntry(entry: RankEntry): void {
  rankEntry = entry
}

/**
 * Declare the program every rank runs. Export it as the module's default.
 *
 * ```ts
 * export default defineProgram({
 *   name: 'relax',
 *   options: { n: option.int(256, 'interior size', { min: 1 }), sweeps: option.int(500, 'Jacobi sweeps') },
 *   async main(ctx) {
 *     const plate = await ctx.skeleton(new Relax(ctx.options.sweeps), [new Plate(ctx.options.n), new Plate(ctx.options.n)]).run()
 *     return { heat: await ctx.sumInStorageOrder(plate) }
 *   },
 *   format: (r) => `heat ${r.heat}`,
 * })
 * ```
 * Run it with `molotof run relax.ts --ranks 4 --n 1024`.
 */
export function defineProgram<O extends OptionSpecs, R>(def: ProgramDefinition<O, R>): Program<O, R> {
  if (!def || typeof def.name !== 'string' || !/^[\w.-]+$/.test(def.name)) {
    throw new ConfigError('defineProgram: `name` must be a non-empty word (letters, digits, _ . -)')
  }
  if (typeof def.main !== 'function') throw new ConfigError(`defineProgram(${def.name}): \`main\` must be a function`)
  const program: Program<O, R> = {
    ...def,
    options: def.options ?? ({} as O),
    [RANK_ENTRY]: (init: unknown) => {
      if (!rankEntry) {
        return Promise.reject(new ConfigError(`program ${def.name}: no molotof runtime is loaded in this copy of molotof (import defineProgram from 'molotof')`))
      }
      return rankEntry(program as unknown as Program, init)
    },
  }
  return Object.freeze(program)
}

/**
 * The run's settings stored in its checkpoints: the options that are
 * settings (see `settingsOf`), with the values the program resolves them to
 * (its `settings`, if any) in place of the options' own.
 *
 * ```ts
 * programSettings(swing, options)   // { preset: 'small-g', model: 'g', … } whether --model g was given or not
 * ```
 */
export function programSettings(program: Program, options: Record<string, unknown>): Record<string, string | number | boolean | null> {
  const out = settingsOf(program.options, options)
  const resolved = program.settings?.(options as OptionValues<OptionSpecs>) ?? {}
  for (const [k, v] of Object.entries(resolved)) if (v !== undefined) out[k] = v
  return out
}

export function isProgram(v: unknown): v is Program {
  return typeof v === 'object' && v !== null && typeof (v as Record<symbol, unknown>)[RANK_ENTRY] === 'function'
}
