import { MolotofError, type ExitClass } from '../errors.js'

/**
 * The exit statuses of `molotof`, as `molotof run --help` lists them: the one
 * place that turns an error's class into a number a script can act on.
 *
 * ```ts
 * process.exitCode = exitCodeOf(new SettingsMismatchError(differences))  // 2
 * ```
 */
export const EXIT = {
  /** The run finished. */
  done: 0,
  /** The run failed: restart budget exhausted, program error, disk full, a second signal. */
  failed: 1,
  /** Bad input, refused before compute: bad options, an unreadable program, mismatched checkpoint settings. */
  badInput: 2,
  /** Preempted after a checkpoint: resume with --resume (EX_TEMPFAIL). */
  preempted: 75,
  /** A node of a cluster run was lost: run the launcher again with --resume. */
  nodeLost: 76,
} as const

const BY_CLASS: Readonly<Record<ExitClass, number>> = {
  failed: EXIT.failed,
  'bad-input': EXIT.badInput,
  preempted: EXIT.preempted,
  'node-lost': EXIT.nodeLost,
}

/** The exit status for a run that ended with `error`: by its catalogue class, 1 for anything else. */
export function exitCodeOf(error: unknown): number {
  return error instanceof MolotofError ? BY_CLASS[error.exit] : EXIT.failed
}
