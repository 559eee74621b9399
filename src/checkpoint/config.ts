import { freeze } from 'immer'
import type { CodeIdentity } from './format/code-record.js'
import type { JsonObject } from './format/json.js'
import type { CheckpointPolicy } from './policy/policy.js'
import type { MembershipRecord } from './store/marker.js'
export type { CheckpointLevel } from './events.js'

// The run's fault-tolerance configuration, in a module of its own: the CLI,
// the launcher, the supervisor and the benchmarks build it, the checkpoint
// coordinator of every rank reads it.

/** How a run checkpoints and whether it resumes. Plain data: it crosses to every rank. */
export interface FaultToleranceConfig {
  /** Checkpoint directory (created on first use). */
  dir: string
  /** The run's default policy; a skeleton may override it. */
  policy: CheckpointPolicy
  /** Complete checkpoints kept (older ones are deleted once a newer one is complete). */
  keep: number
  /** Start from the recovery line when there is one. */
  resume: boolean
  /**
   * `program` (default): what the program registers. `default`: the framework
   * defaults whatever the program unregistered (both domains and the
   * iterator), to measure what minimal registration saves.
   */
  contents?: 'program' | 'default'
  /**
   * Write disk checkpoints in the background: the same as a memory level
   * with no policy of its own (`memory: { policy: { kind: 'off' } }`): each
   * disk checkpoint is written to RAM at the checkpoint point and flushed to
   * the directory while the next supersteps compute. Ignored when `memory`
   * is given (its checkpoints are always flushed that way).
   */
  async?: boolean
  /**
   * The memory level: checkpoints in a RAM directory (tmpfs), with their own
   * policy. They survive the death of rank processes, not of the node. When
   * the disk level checkpoints too, its files are flushed from the memory
   * copy in the background and committed once durable on every rank.
   */
  memory?: MemoryLevelConfig
  /**
   * Compress the heavy payloads of disk checkpoints flushed from the memory
   * level (with `memory` or `async`), in the background, on a thread of the
   * flush's own; their partner and shared copies are copies of those files.
   * A disk checkpoint written at the checkpoint point (no memory level) and
   * the memory level itself are never compressed. Off by default: see
   * docs/REFERENCE.md ("Compression") for the figures.
   */
  compress?: boolean
  /**
   * Incremental disk checkpoints (with `memory` or `async`): a flushed disk
   * checkpoint stores, per heavy payload, only the 64 KiB blocks changed
   * since the previous one, with a full one every `every` checkpoints or
   * when more than half of the bytes changed; readers assemble the chain.
   * Not with `compress`. Off by default: see docs/REFERENCE.md ("Incremental
   * checkpoints").
   */
  incremental?: { every: number }
  /**
   * Partner copies (a run of several nodes): each rank's file of every disk
   * checkpoint is also kept by the same local rank on the next node, sent
   * over the communicator in the background (see store/partner.ts).
   */
  partner?: { ranksPerNode: number }
  /**
   * XOR redundancy instead of partner copies (`--redundancy xor:G`): the
   * ranks of G nodes form a set (see redundancy/sets.ts) and each keeps, beside
   * its own memory and disk checkpoints, one parity slice of its set's files
   * (1/(G−1) of a file); a lost node's files are rebuilt from the others'.
   */
  xor?: { setSize: number; ranksPerNode: number }
  /** The shared level: complete disk checkpoints copied to a directory every node sees, in the background. */
  shared?: SharedLevelConfig
  /** Stop every rank right after this checkpoint point (tests and demonstrations). */
  interrupt?: { skeleton: number; step: number }
  /**
   * The run lineage (see identity/run.ts): every checkpoint carries it and a
   * resume uses only checkpoints that carry it. A supervised run sets it;
   * otherwise a resume continues the newest checkpoint's lineage and a fresh
   * start draws a new one.
   */
  runId?: string
  /**
   * A cluster run's membership for this attempt (set by node 0 as each
   * attempt starts): every commit marker records it, for `molotof inspect`.
   */
  membership?: MembershipRecord
  /**
   * A supervised resume whose node-0 directory held no checkpoint (lost with
   * its node): the ranks continue the lineage of the newest complete
   * checkpoint any of them holds on any level, instead of `runId`'s.
   */
  adoptLineage?: boolean
  /**
   * A resume the user asked for (the CLI's first attempt): `required`
   * (`--resume`) refuses when no level holds a usable checkpoint of the run;
   * `or-start` (`--resume-or-start`) starts afresh, saying so, when none holds
   * any, and refuses like `required` when all it finds are unusable. Unset
   * (automatic restarts, the API), a resume with nothing found starts afresh.
   */
  resumeRequest?: 'required' | 'or-start'
  /**
   * Resuming: the memory-level directories (with `{node}`/`{rank}`) the
   * earlier run may have left checkpoints in (the default one, the one the
   * `RUN` file records), read as levels of this resume only, whether or not
   * this run keeps a memory level (and wherever). Given to a start without
   * resume too: an unfinished run's checkpoints there refuse it (see
   * identity/run-directory.ts).
   */
  resumeMemoryDirs?: readonly string[]
  /**
   * Filled in on each rank before a resume: the other directories of the run
   * found on this host (the ones `{node}`/`{rank}` match besides this rank's,
   * and `resumeMemoryDirs`), read as levels of the resume only.
   */
  resumeSearch?: { memory: readonly string[]; disk: readonly string[] }
  /** Resuming with a shared directory but no shared level of its own (`--shared-dir` alone): read as the shared level. */
  resumeSharedDir?: string
  /** Resume even when the program's code differs from the checkpoint's (a warning instead of a refusal). */
  allowCodeChange?: boolean
  /** Supervised runs: discard the checkpoints found in the directory before starting (see identity/run-directory.ts). */
  fresh?: boolean
}

/**
 * A deep-frozen copy of a run configuration (immer's `freeze`). The launcher,
 * the supervisor and, with runLocal, every rank of the thread share one
 * configuration for the whole run, so nothing may change it on the way (a
 * write throws); the caller's object stays theirs to change for another run.
 *
 * ```ts
 * const ft = frozenConfig({ dir: '.molotof/relax', policy: { every: 50 }, keep: 2, resume: false })
 * ```
 */
export function frozenConfig(config: FaultToleranceConfig): FaultToleranceConfig {
  return freeze(structuredClone(config), true)
}

/** The memory level of a run (see FaultToleranceConfig.memory). */
export interface MemoryLevelConfig {
  /** When to write a memory checkpoint (`{ every: 5 }`, `{ seconds: 2 }`, `{ mtbf: '1h' }`); a skeleton may override it. */
  policy: CheckpointPolicy
  /** A directory in RAM (default: `/dev/shm/molotof-<hash of dir>`). */
  dir?: string
}

/** The shared level of a run (see FaultToleranceConfig.shared): one of `every` and `seconds`. */
export interface SharedLevelConfig {
  /** The directory every node sees (created on first use). */
  dir: string
  /** Copy every k-th disk checkpoint (the 1st, the k+1-th, …). */
  every?: number
  /** Copy the first disk checkpoint committed at least this long after the previous copy (rank 0's clock decides). */
  seconds?: number
}

/** Who is checkpointing: the program and the settings its checkpoints must match. */
export interface ProgramIdentity {
  fingerprint: string
  settings: JsonObject
  /**
   * The program file and the URLs of every module loaded with it, when the
   * program was loaded from a file: checkpoints then carry the code's identity
   * (identity/code.ts) and a resume with other code is refused unless allowed.
   * `identity`: taken when the program was compiled for the run (the files
   * then, not as they are on disk now).
   */
  code?: { programFile: string; modules: readonly string[]; identity?: CodeIdentity }
}
