import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { cleanOwnedDirectory, createOwnedTempDirectory, sweepAbandonedDirectories } from '../../checkpoint/store/owned-dir.js'

/** Socket directories are `<tmp>/molotof-XXXXXX`, marked as molotof's (see owned-dir.ts). */
const PREFIX = 'molotof-'
/** What their marker names: a sweep cleans only these. */
const PURPOSE = 'sockets'
/** Unix socket paths are limited to about 107 bytes; stay well below. */
const MAX_SOCKET_PATH = 100

/** The files molotof puts in a socket directory: one `<rank>.sock` per rank. */
export function isSocketEntry(name: string, dir: boolean): boolean {
  return !dir && /^\d+\.sock$/.test(name)
}

const swept = new Set<string>()

/**
 * A private, marked directory for the Unix sockets of `size` ranks, with
 * paths short enough for Unix sockets. The first one of a process first
 * cleans the socket directories a killed supervisor of this host left in the
 * same place (marked, owner pid dead; see sweepAbandonedDirectories).
 *
 * ```ts
 * const dir = createSocketDirectory(4)   // '/tmp/molotof-a1B2c3', holding .molotof-owned
 * ```
 */
export function createSocketDirectory(size: number): string {
  const longest = Buffer.byteLength(join(tmpdir(), `${PREFIX}XXXXXX`, `${size - 1}.sock`))
  const base = longest <= MAX_SOCKET_PATH ? tmpdir() : '/tmp'
  if (!swept.has(base)) {
    swept.add(base)
    sweepAbandonedDirectories(base, PREFIX, PURPOSE, isSocketEntry)
  }
  return createOwnedTempDirectory(base, PREFIX, PURPOSE)
}

/** Removes a socket directory's sockets and marker, then the directory; anything else put there stays, with it. */
export function removeSocketDirectory(dir: string): void {
  try {
    cleanOwnedDirectory(dir, isSocketEntry)
  } catch {
    // Left for the next run's sweep: a socket directory in the temp dir is harmless.
  }
}
