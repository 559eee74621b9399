import { formatOptions, type OptionSpecs } from '../skeletons/options.js'

/** One exit code of a command and what it means there. */
export type ExitCodeLine = readonly [code: number, meaning: string]

/**
 * Where the program file of the help pages' examples comes from: every project
 * has it after `molotof init` (README's "Writing a program" shows the same file).
 */
export const STARTER_EXAMPLES_FROM = '(relax.ts: the starter program `molotof init <dir>` writes; its options are --n and --sweeps)'

/** What every `molotof run` exit code means (the same words in every help page). */
export const RUN_EXIT_CODES: readonly ExitCodeLine[] = [
  [0, 'done'],
  [1, 'the run failed (the restart budget is spent, a program error, disk full, a second signal, or an unexpected error)'],
  [2, 'bad input, refused before any computation: options, program file, checkpoint settings or code, a checkpoint directory that is in use, unwritable or holds an unfinished run, a --resume with no usable checkpoint'],
  [75, 'preempted: checkpointed and stopped on SIGTERM/SIGINT or --time-limit; resume with --resume'],
  [76, 'node lost (cluster runs): a node supervisor fell silent; run the launcher again with --resume'],
]

/** A command's help page; `formatHelp` lays it out, each section once. */
export interface HelpPage {
  /** After `Usage: `. */
  usage: string
  /** What the command does, a paragraph. */
  about: string
  /** In order: a title and its options (or a table already formatted, such as a program's `formatOptions`). */
  sections: ReadonlyArray<{ title: string; specs: OptionSpecs | string }>
  exitCodes: readonly ExitCodeLine[]
  examples?: readonly string[]
  /** First line under Examples: where the files the examples name come from. */
  examplesFrom?: string
}

/**
 * The one layout of molotof's help pages: usage, description, option tables
 * (`formatOptions`), exit codes, examples.
 *
 * ```ts
 * const specs = { verify: option.boolean(false, 'check every checksum') }
 * formatHelp({ usage: 'molotof inspect <dir>', about: 'Lists checkpoints.', sections: [{ title: 'Options', specs }], exitCodes: [[0, 'valid']] })
 * ```
 */
export function formatHelp(page: HelpPage): string {
  const parts = [`Usage: ${page.usage}`, page.about]
  for (const { title, specs } of page.sections) parts.push(`${title}:\n${typeof specs === 'string' ? specs : formatOptions(specs)}`)
  const w = Math.max(...page.exitCodes.map(([c]) => String(c).length)) + 2
  parts.push(`Exit codes:\n${page.exitCodes.map(([c, m]) => `  ${String(c).padEnd(w)}${m}`).join('\n')}`)
  if (page.examples && page.examples.length > 0) {
    const lines = page.examplesFrom ? [page.examplesFrom, ...page.examples] : page.examples
    parts.push(`Examples:\n${lines.map((e) => `  ${e}`).join('\n')}`)
  }
  return parts.join('\n\n')
}
