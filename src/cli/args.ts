import { existsSync, statSync } from 'node:fs'
import { option, parseArgv, type OptionSpecs, type OptionValues } from '../skeletons/options.js'

/** The `--help` / `-h` switch of every command, declared like any other option. */
export const HELP_OPTION = { help: { ...option.boolean(false, 'show this help'), short: 'h' } }

/**
 * The words of a command that takes no program (inspect, demo): its own
 * options and at most `positionals` other words. Unknown options are refused
 * naming the closest known one.
 *
 * ```ts
 * const { values, positionals } = parseCommand({ ...HELP_OPTION, verify: option.boolean(false, 'check sums') }, argv, 1)
 * ```
 */
export function parseCommand<O extends OptionSpecs>(specs: O, argv: readonly string[], positionals: number): { values: OptionValues<O>; positionals: string[] } {
  const p = parseArgv(specs, argv, { positionals })
  return { values: p.values, positionals: p.positionals }
}

/**
 * The words of a command that runs a program (run, bench): the command's own
 * options, the program file, and the program's words in their order (parsed
 * by the program's ranks with the same parser, against the program's options).
 *
 * The framework's options may stand anywhere. The program is the first other
 * word, not an option, that names an existing file (so `--n 64 prog.ts` and
 * `--no-window prog.ts` both find `prog.ts`); failing that, the first such
 * word, which the launcher then reports as not found. Words after `--` all go
 * to the program.
 *
 * ```ts
 * parseProgramCommand(RUN_OPTIONS, ['--ranks', '4', 'jacobi.ts', '--n', '64'])
 * // { values: { ranks: 4, … }, program: 'jacobi.ts', programArgv: ['--n', '64'] }
 * ```
 */
export function parseProgramCommand<O extends OptionSpecs>(
  specs: O,
  argv: readonly string[],
): { values: OptionValues<O>; program: string | undefined; programArgv: string[] } {
  const p = parseArgv(specs, argv, { unknown: 'pass' })
  const words = p.rest.map((w, i) => ({ w, i })).filter(({ w }) => !w.startsWith('-'))
  const chosen = words.find(({ w }) => isFile(w)) ?? words[0]
  const programArgv = p.rest.filter((_, i) => i !== chosen?.i)
  return { values: p.values, program: chosen?.w, programArgv: [...programArgv, ...p.afterDashes] }
}

function isFile(path: string): boolean {
  return existsSync(path) && statSync(path).isFile()
}
