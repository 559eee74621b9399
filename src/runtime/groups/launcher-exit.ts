/**
 * What a rank group leaves behind must not outlive the launcher: its rank
 * processes (killed) and socket folders (removed) when the launcher exits.
 * (A launcher killed outright is noticed by its rank processes themselves,
 * see boot/process-host.mjs, and its socket folders by the next run's sweep.)
 *
 * ```ts
 * const forget = atLauncherExit(() => child.kill('SIGKILL'))
 * child.on('exit', forget)
 * ```
 */
export function atLauncherExit(cleanup: () => void): () => void {
  cleanups.add(cleanup)
  if (!hooked) {
    hooked = true
    process.on('exit', () => {
      for (const c of cleanups) c()
    })
  }
  return () => cleanups.delete(cleanup)
}

const cleanups = new Set<() => void>()
let hooked = false
