// Locations in compiled modules (compiled-program.ts) told as the source
// lines they come from, on demand. Plain JavaScript, shared by the boot files
// and the rank runtime. A rank does not turn Node's source maps on: with them
// on, the first stack formatted in a process decodes the whole map of the
// compiled framework (tens of milliseconds, found in the stop phase of
// recoveries), and checkpoints stalled measurably longer. Only an error that
// is reported pays for its mapping here.
import { readFileSync } from 'node:fs'
import { SourceMap } from 'node:module'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

// A frame's location in a compiled module: its path or file URL, line and column.
const FRAME = /((?:file:\/\/)?\/[^\s()]*\/node_modules\/\.cache\/molotof\/[^\s()]+?\.mjs):(\d+):(\d+)/g
const INLINE_MAP = /\/\/# sourceMappingURL=data:application\/json;base64,([A-Za-z0-9+/=]+)\s*$/

/** Decoded maps by compiled file (null: none there). */
const maps = new Map()

function mapOf(file) {
  if (maps.has(file)) return maps.get(file)
  let map = null
  try {
    const m = INLINE_MAP.exec(readFileSync(file, 'utf8'))
    if (m) map = new SourceMap(JSON.parse(Buffer.from(m[1], 'base64').toString('utf8')))
  } catch {
    // Unreadable or without a map: the location stays the compiled module's.
  }
  maps.set(file, map)
  return map
}

/**
 * `text` (a stack, a message) with every location in a compiled module
 * replaced by the source file, line and column it was compiled from.
 *
 * @param {string} text
 * @returns {string}
 */
export function sourceLocations(text) {
  if (typeof text !== 'string' || !text.includes('/.cache/molotof/')) return text
  return text.replace(FRAME, (whole, where, line, column) => {
    const file = where.startsWith('file:') ? fileURLToPath(where) : where
    const map = mapOf(file)
    const entry = map?.findEntry(Number(line) - 1, Number(column) - 1)
    if (!entry || entry.originalSource === undefined) return whole
    const source = entry.originalSource.startsWith('file:') ? fileURLToPath(entry.originalSource) : resolve(dirname(file), entry.originalSource)
    return `${source}:${entry.originalLine + 1}:${entry.originalColumn + 1}`
  })
}

/**
 * The error with its stack told in source locations (the same object, its
 * `stack` rewritten), for errors about to be reported.
 *
 * @template T
 * @param {T} e
 * @returns {T}
 */
export function withSourceLocations(e) {
  if (e instanceof Error && typeof e.stack === 'string') {
    const stack = sourceLocations(e.stack)
    if (stack !== e.stack) Object.defineProperty(e, 'stack', { value: stack, writable: true, configurable: true, enumerable: false })
  }
  return e
}
