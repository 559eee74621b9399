import { fileURLToPath } from 'node:url'

/*
 * Where the plain-JS entry files of ranks and spares are (runtime/boot/).
 * Worker threads and child processes start from a file, found by URL from this
 * module: from the sources that is src/runtime/boot/; from the built package,
 * where this module is bundled into dist/index.js and dist/cli.js, it is
 * dist/boot/ (tsup.config.ts copies the boot files there). Spawning modules
 * sit in other rooms and must not compute the path from their own location.
 */

/** The boot files that start a rank or a spare. */
export type BootFile = 'rank-boot.mjs' | 'process-boot.mjs' | 'spare-boot.mjs' | 'spare-thread-boot.mjs'

/** The URL of boot file `name` (for `new Worker`). */
export function bootUrl(name: BootFile): URL {
  return new URL(`./boot/${name}`, import.meta.url)
}

/** The path of boot file `name` (for `spawn(process.execPath, [path, …])`). */
export function bootPath(name: BootFile): string {
  return fileURLToPath(bootUrl(name))
}
