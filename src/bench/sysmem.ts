import { readFileSync } from 'node:fs'

/**
 * The private resident memory of a process (bytes): what a system-level
 * checkpointer such as CRIU must save for it (private pages, clean or dirty;
 * shared libraries and file pages are not part of an image). Read from
 * /proc/<pid>/smaps_rollup; undefined where that file cannot be read.
 *
 * ```ts
 * privateResidentBytes(child.pid)  // e.g. 81_264_640
 * ```
 */
export function privateResidentBytes(pid: number): number | undefined {
  let text: string
  try {
    text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8')
  } catch {
    // No /proc (not Linux) or the process is gone: the figure is documented as unknown then.
    return undefined
  }
  let kib = 0
  let found = false
  for (const line of text.split('\n')) {
    const m = /^(Private_Clean|Private_Dirty|Private_Hugetlb):\s+(\d+) kB/.exec(line)
    if (m) {
      kib += Number(m[2])
      found = true
    }
  }
  return found ? kib * 1024 : undefined
}
