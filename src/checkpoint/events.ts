// What the checkpoint layer reports to the runtime: progress lines, launcher
// events, supervisor records and benchmark figures are built from these.

/**
 * The levels a checkpoint can go to, fastest first: `memory` (a RAM
 * directory, survives rank processes) and `disk` (the checkpoint directory,
 * survives the run). The partner level (a copy on another node) comes next.
 */
export type CheckpointLevel = 'memory' | 'disk'

/**
 * The levels that copy committed checkpoints elsewhere, in the background:
 * `partner` (each rank's file of a disk or memory checkpoint also kept by a
 * rank of another node, see store/partner.ts) and `shared` (disk checkpoints
 * in a directory every node sees), `xor` (instead of partner copies: each
 * rank keeps one parity slice of its set's files, see redundancy/xor.ts).
 */
export type CopyLevel = 'partner' | 'shared' | 'xor'

/** Figures of one committed checkpoint, for progress lines, events and benchmarks. */
export interface CheckpointEvent {
  seq: number
  skeleton: number
  step: number
  /** Bytes of this rank's file. */
  bytes: number
  /** Bytes over all ranks. */
  totalBytes: number
  /** Wall time from the checkpoint point to the commit, slowest rank. */
  ms: number
  /** The level this checkpoint was committed to (a disk checkpoint flushed from memory is reported twice: memory, then disk; its copies once each). */
  level: CheckpointLevel | CopyLevel
  /**
   * How long the compute waited at the checkpoint point for this level, this
   * rank (ms), plus, for a memory checkpoint, any wait for the background
   * copy of the domain before the rank wrote it again. Equal to `ms` for a
   * foreground disk write; for a disk
   * checkpoint flushed from memory in the background, 0 (the memory event
   * carries the stall).
   */
  stallMs: number
  /**
   * Memory and disk events: the votes of time-based policies (one allreduce
   * each, 100 ms–1 s of supersteps apart) this rank took part in since its previous
   * such event, and the time it spent in them (ms; waiting for slower ranks
   * included, so an upper bound of what they cost).
   */
  votes?: number
  voteMs?: number
}

/** One file a recovery could not use: which rank's, where, and why. */
export interface UnusableFile {
  rank: number
  /** The file, or empty when the rank did not see the checkpoint at all. */
  file: string
  reason: string
}

/**
 * Something a recovery passed over or noticed, as data: `skipped` (a
 * checkpoint newer than the line, unusable for some rank), `fallback` (a
 * damaged copy on a fast level that level `level` replaced), `fresh-start`
 * (no usable checkpoint in `places`: the run starts from the beginning),
 * `code-changed` (the program's code differs from the line's, allowed).
 */
export type RecoveryWarning =
  | { kind: 'skipped'; seq: number; problems: UnusableFile[] }
  | { kind: 'fallback'; seq: number; rank: number; file: string; reason: string; level: CheckpointLevel | CopyLevel }
  | { kind: 'fresh-start'; places: string[] }
  | { kind: 'code-changed'; seq: number; reason: string }

/** What recovery found, for logs and events. */
export interface RecoveryInfo {
  seq: number | undefined
  skeleton: number
  step: number
  /** Time to agree on the line from headers and sizes (ms). */
  negotiateMs: number
  /** Time to read and verify this rank's file of the line (ms). */
  loadMs: number
  /** Where the ranks read the line from: one level, or `memory+disk` when ranks used different levels. */
  level?: string
  /** Fast-forward of the recovery skeleton (ms), once done. */
  replayMs?: number
  /** Load, restore and re-route (ms), once done. */
  restoreMs?: number
  /** What the recovery passed over or noticed, as data (rank 0 logs each as `warning: …`, see recovery/warnings.ts). */
  warnings: RecoveryWarning[]
  /** The rank count of the checkpoint, when it differs from the run's (an elastic restore). */
  fromRanks?: number
  /** What an elastic restore read, summed over the ranks (once done). */
  elastic?: { bytesRead: number; bytesNeeded: number; headerBytes: number; verifyBytes: number }
}

/** Figures of a finished recovery on one rank. */
export interface ResumedFigures {
  seq: number
  skeleton: number
  step: number
  negotiateMs: number
  loadMs: number
  replayMs: number
  restoreMs: number
  /** The level the line was read from (see RecoveryInfo.level). */
  level: string
}
