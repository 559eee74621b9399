/**
 * Every error molotof throws on purpose is a `MolotofError` with a stable `code`,
 * so callers can branch on `err.code` (or `instanceof`) and users get one clear
 * sentence that says what is wrong and, where possible, what to do.
 *
 * ```ts
 * try { await run(program, { ranks: 4 }) }
 * catch (e) { if (e instanceof RankFailedError) console.error(e.rank, e.step) }
 * ```
 */
export class MolotofError extends Error {
  readonly code: string
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.code = code
    this.name = new.target.name
  }
}

/** Invalid user input: options, program definitions, arguments to public APIs. */
export class ConfigError extends MolotofError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('E_CONFIG', message, options)
  }
}

/** The partition methods of a domain describe an impossible layout. */
export class PartitionError extends MolotofError {
  constructor(message: string) {
    super('E_PARTITION', message)
  }
}

/** The program file could not be loaded or does not export a molotof program. */
export class ProgramLoadError extends MolotofError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('E_PROGRAM', message, options)
  }
}

/** Where in the program a rank was when something happened. */
export interface RankLocation {
  rank: number
  /** Index of the skeleton in the program (0-based), or -1 outside any skeleton. */
  skeleton: number
  /** Superstep index inside that skeleton, or -1 outside the loop. */
  step: number
  /** `init`, `calculate`, `route`, `checkpoint`, `swap`, `light` … */
  phase: string
}

/** A rank threw, exited or was killed; the run was stopped on every rank. */
export class RankFailedError extends MolotofError implements RankLocation {
  readonly rank: number
  readonly skeleton: number
  readonly step: number
  readonly phase: string
  readonly remoteStack: string | undefined
  constructor(loc: RankLocation, reason: string, remoteStack?: string) {
    const where =
      loc.skeleton < 0
        ? `outside any skeleton (${loc.phase})`
        : `in skeleton ${loc.skeleton}, step ${loc.step}, phase ${loc.phase}`
    super('E_RANK', `rank ${loc.rank} failed ${where}: ${reason}`)
    this.rank = loc.rank
    this.skeleton = loc.skeleton
    this.step = loc.step
    this.phase = loc.phase
    this.remoteStack = remoteStack
  }
}

/** Something is wrong with checkpoint data or the checkpoint directory. */
export class CheckpointError extends MolotofError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('E_CHECKPOINT', message, options)
  }
}

/** A rank file failed validation (size, magic, header or checksum). */
export class CheckpointCorruptError extends MolotofError {
  readonly file: string
  readonly reason: string
  constructor(file: string, reason: string) {
    super('E_CHECKPOINT_CORRUPT', `checkpoint file ${file} is not usable: ${reason}`)
    this.file = file
    this.reason = reason
  }
}

/** One difference between the settings stored in a checkpoint and the current ones. */
export interface SettingDifference {
  name: string
  old: unknown
  new: unknown
}

/** Resuming with other settings or another rank count than the checkpoint's. */
export class SettingsMismatchError extends MolotofError {
  readonly differences: readonly SettingDifference[]
  constructor(differences: readonly SettingDifference[]) {
    const lines = differences.map((d) => `  ${d.name}: ${fmt(d.old)} → ${fmt(d.new)}`)
    super(
      'E_SETTINGS',
      `cannot resume: the checkpoint was taken with other settings\n${lines.join('\n')}\n` +
        'Run with the checkpoint\'s settings, or start afresh without --resume.',
    )
    this.differences = differences
  }
}

/** Replayed light code did not rebuild the state the checkpoint recorded. */
export class ReplayDivergenceError extends MolotofError {
  readonly value: string
  constructor(value: string, detail: string) {
    super(
      'E_DIVERGENCE',
      `replay diverged: ${value} differs from the value recorded at checkpoint time (${detail}). ` +
        'Light code must be deterministic; keep light state immutable (immer) and out of heavy phases.',
    )
    this.value = value
  }
}

function fmt(v: unknown): string {
  return typeof v === 'string' ? JSON.stringify(v) : String(v)
}
