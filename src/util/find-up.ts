import { dirname } from 'node:path'

/**
 * Walks up from the folder `start` to the file-system root and returns the
 * first value `look` gives for a folder (the nearest tsconfig.json,
 * package.json, node_modules …), or undefined when none gives one.
 *
 * ```ts
 * findUp('/a/b/c', (dir) => (existsSync(join(dir, 'package.json')) ? dir : undefined))
 * ```
 */
export function findUp<T>(start: string, look: (dir: string) => T | undefined): T | undefined {
  for (let dir = start; ; dir = dirname(dir)) {
    const found = look(dir)
    if (found !== undefined) return found
    if (dirname(dir) === dir) return undefined
  }
}
