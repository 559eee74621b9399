import { CheckpointError } from '../../errors.js'

/**
 * Turns a Node file-system error into a CheckpointError that names the path
 * and says in words what went wrong, so "disk full" reads as "disk full" and
 * not as `ENOSPC: no space left on device, write`.
 *
 * ```ts
 * try { await writeDurably(file, parts) }
 * catch (e) { throw checkpointFsError('cannot write checkpoint file', file, e) }
 * ```
 */
export function checkpointFsError(what: string, path: string, err: unknown): CheckpointError {
  return new CheckpointError(`${what} ${path}: ${explainFsError(err)}`, { cause: err })
}

const REASONS: Readonly<Record<string, string>> = {
  ENOSPC: 'no space left on the device (disk full)',
  EDQUOT: 'disk quota exceeded',
  EFBIG: 'the file is larger than the system allows',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'the file system is read-only',
  ENOTDIR: 'a component of the path is not a directory',
  EISDIR: 'the path is a directory',
  ENOENT: 'no such file or directory',
  EEXIST: 'the path already exists',
  EIO: 'input/output error from the device',
  EMFILE: 'too many open files in this process',
  ENFILE: 'too many open files in the system',
  ENAMETOOLONG: 'the path is too long',
}

/**
 * The reason part of the message: a sentence for known error codes, the error's own message otherwise.
 *
 * ```ts
 * explainFsError(Object.assign(new Error('…'), { code: 'ENOSPC' }))  // 'no space left on the device (disk full) (ENOSPC)'
 * ```
 */
export function explainFsError(err: unknown): string {
  const code = errorCode(err)
  const reason = code === undefined ? undefined : REASONS[code]
  if (reason !== undefined) return `${reason} (${code})`
  return err instanceof Error ? err.message : String(err)
}

/**
 * The `code` of a Node system error, if any.
 *
 * ```ts
 * if (errorCode(e) === 'ENOENT') return []
 * ```
 */
export function errorCode(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err) {
    const code = (err as { code: unknown }).code
    if (typeof code === 'string') return code
  }
  return undefined
}
