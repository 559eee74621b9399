import type { RecoveryWarning, UnusableFile } from '../events.js'

/**
 * A recovery warning as the line rank 0 logs (after `warning: `) and
 * `--resume` lists when it refuses: the one place they become text.
 *
 * ```ts
 * recoveryWarningText({ kind: 'skipped', seq: 4, problems: [{ rank: 1, file: 'ckpt-00000004/rank-1.mlf', reason: 'checksum mismatch' }] })
 * // 'checkpoint 4 skipped: ckpt-00000004/rank-1.mlf: checksum mismatch'
 * ```
 */
export function recoveryWarningText(w: RecoveryWarning): string {
  switch (w.kind) {
    case 'skipped':
      return `checkpoint ${w.seq} skipped: ${w.problems.map(fileAndReason).join('; ')}`
    case 'fallback':
      return `checkpoint ${w.seq}: ${fileAndReason(w)}; read from the ${w.level} level instead`
    case 'fresh-start':
      return `no valid checkpoint in ${w.places.join(' or ')}: starting from the beginning`
    case 'code-changed':
      return w.reason
  }
}

function fileAndReason(p: UnusableFile): string {
  return p.file ? `${p.file}: ${p.reason}` : p.reason
}
