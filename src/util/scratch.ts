import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/**
 * Runs `work` in a scratch directory of its own and removes the directory,
 * whole, when `work` ends (`molotof demo`, `molotof bench`). The recursive
 * delete cannot reach a user's file: the directory is a new `mkdtemp` one
 * (mode 0700, a name no one chose), never a path the user gave, and only
 * the runs `work` starts write into it.
 *
 * ```ts
 * const report = await withScratchDirectory('molotof-bench-', (root) => runAll(root))
 * ```
 */
export async function withScratchDirectory<T>(prefix: string, work: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  try {
    return await work(dir)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
