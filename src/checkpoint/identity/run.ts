import { randomBytes } from 'node:crypto'
import { CodeChangedError } from '../../errors.js'
import type { CheckpointSummary } from '../store/checkpoint-store.js'
import { codeChanges, describeCodeChanges, shownFiles, type CodeChange, type CodeIdentity } from './code.js'

/*
 * A checkpoint belongs to one run lineage and one version of the program's
 * code. A run id is drawn when a run starts afresh; `--resume` continues the
 * lineage of the checkpoint it resumes from; automatic restarts resume only
 * from checkpoints that carry their run's id. These helpers are what the
 * checkpoint coordinator (in every rank) and the supervisor (before any rank
 * starts, see run-directory.ts) share to apply that.
 */

/**
 * A new run id: time first, so ids sort by start; 8 random hex digits tell
 * runs of the same millisecond apart.
 *
 * ```ts
 * newRunId()  // 'mhx3k2p1-9f0c1a2b'
 * ```
 */
export function newRunId(): string {
  return `${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`
}

/**
 * The newest checkpoint with a readable commit marker (optionally: of one run).
 *
 * ```ts
 * const m = newestComplete(await store.list())?.marker
 * ```
 */
export function newestComplete(listed: readonly CheckpointSummary[], runId?: string): CheckpointSummary | undefined {
  return listed.filter((c) => c.complete && c.marker !== undefined && (runId === undefined || c.marker.runId === runId)).pop()
}

/**
 * Sequence numbers of the complete checkpoints that another run wrote than
 * `runId` (checkpoints without a run id included): never a recovery line.
 *
 * ```ts
 * const foreign = otherRuns(await store.list(), runId)
 * ```
 */
export function otherRuns(listed: readonly CheckpointSummary[], runId: string): Set<number> {
  return new Set(listed.filter((c) => c.marker !== undefined && c.marker.runId !== runId).map((c) => c.seq))
}

/**
 * Before resuming from checkpoint `seq`: the code that wrote it must be the
 * current code. A difference throws CodeChangedError naming the files, unless
 * `allow` (the user's `--allow-code-change`): then it returns the warning to
 * print. Unknown code on either side (a program run in-process, with no
 * program file) is not compared.
 *
 * ```ts
 * const warning = checkResumeCode(marker.code, current, { seq: 4, allow: false, programFile })
 * ```
 */
export function checkResumeCode(
  stored: CodeIdentity | undefined,
  current: CodeIdentity | undefined,
  o: { seq: number; allow: boolean; programFile: string | undefined },
): string | undefined {
  if (stored === undefined || current === undefined) return undefined
  const changes = codeChanges(stored, current)
  if (changes.length === 0) return undefined
  return codeChangeVerdict(changes, o)
}

/**
 * Refuses (CodeChangedError) or, when allowed, returns the warning: for
 * changes found by the ranks (what they loaded) or by the supervisor (files on disk).
 *
 * ```ts
 * codeChangeVerdict([{ file: 'relaxation.ts', change: 'changed' }], { seq: 3, allow: true, programFile })
 * // 'resuming from checkpoint 3 with changed code (--allow-code-change): examples/jacobi/relaxation.ts changed'
 * ```
 */
export function codeChangeVerdict(changes: readonly CodeChange[], o: { seq: number; allow: boolean; programFile: string | undefined }): string {
  const what = o.programFile ? describeCodeChanges(changes, o.programFile) : changes.map((c) => `${c.file} ${c.change}`).join(', ')
  if (o.allow) return `resuming from checkpoint ${o.seq} with changed code (--allow-code-change): ${what}`
  throw new CodeChangedError(
    `the program's code changed since checkpoint ${o.seq} was written: ${what}. ` +
      "Resuming would continue that run's state with other code. " +
      'To resume anyway (e.g. after a fix in light code), add --allow-code-change; ' +
      'to start afresh, add --fresh (discards these checkpoints) or use another --checkpoint-dir.',
    o.programFile ? shownFiles(changes, o.programFile) : changes.map((c) => c.file),
  )
}
