import type { LogKind } from '../util/log.js'

/** See util/log.ts: the kind a rank's log line carries to the launcher. */
export type { LogKind }

/** Messages from a rank to the launcher (plain data, so any framework copy can speak it). */
export type RankToLauncher =
  | { type: 'describe'; name: string; description: string; optionsHelp: string }
  | { type: 'config-error'; rank: number; message: string }
  | { type: 'load-error'; rank: number; message: string }
  /** `once`: a key said once per run, however many restarts (the launcher remembers it across attempts). */
  | { type: 'log'; rank: number; text: string; once?: string; kind?: LogKind }
  | { type: 'checkpoint'; rank: number; seq: number; skeleton: number; step: number; bytes: number; totalBytes: number; ms: number; level: 'memory' | 'disk' | 'partner' | 'shared' | 'xor'; stallMs: number; votes?: number; voteMs?: number }
  | { type: 'resumed'; rank: number; seq: number; skeleton: number; step: number; negotiateMs: number; loadMs: number; replayMs: number; restoreMs: number; level: string }
  | { type: 'progress'; rank: number; skeleton: number; step: number; total: number | undefined }
  | { type: 'result'; rank: number; value: unknown; text: string | undefined }
  | { type: 'preempted'; rank: number; seq: number | undefined; skeleton: number; step: number }
  /** Sizes of the rank's live large buffers and of its checkpoint read buffer (see RankAllocations), at a checkpoint where they changed: spares touch as much ahead. */
  | { type: 'buffers'; rank: number; sizes: number[] }
  /** A rank process received SIGINT/SIGTERM (e.g. sent to the whole process group) and forwards it instead of dying. */
  | { type: 'signal'; rank: number; signal: string }
  /** TCP transport: where this rank listens (its group answers with `peers`). */
  | { type: 'listening'; rank: number; generation: number; host: string; port: number }
  | {
      type: 'error'
      rank: number
      skeleton: number
      step: number
      phase: string
      name: string
      code: string | undefined
      message: string
      stack: string | undefined
      /** A catalogue error's own fields, so the launcher rebuilds the same class (see errorRecord). */
      fields?: Record<string, unknown>
    }

/**
 * Messages from the launcher to a rank. `abort` ends the rank's run at its
 * next wait for a peer (warm spares: a survivor of a failure stops its run
 * and waits for its next rank number in the same process). The run ends once
 * its background checkpoint writes have: the host says idle only then.
 */
export type LauncherToRank =
  | { type: 'preempt' }
  | { type: 'checkpoint' }
  | { type: 'abort' }
  /** TCP transport: every rank's endpoint, in rank order, for this generation. */
  | { type: 'peers'; generation: number; endpoints: Array<{ host: string; port: number }> }

/** The rank's end of its control channel to the launcher. */
export interface ControlPort {
  postMessage(m: RankToLauncher): void
  onMessage(handler: (m: LauncherToRank) => void): void
}
