const UNITS: Readonly<Record<string, number>> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 }

/**
 * Parses a duration into seconds: a number of seconds, or a string like
 * `90s`, `30m`, `6h`, `1.5d`, `250ms` (a bare number string is seconds).
 * Returns undefined for anything else, including zero, negative and
 * non-finite durations, so callers can word their own error.
 *
 * ```ts
 * parseDuration('6h')   // 21600
 * parseDuration(90)     // 90
 * ```
 */
export function parseDuration(input: string | number): number | undefined {
  if (typeof input === 'number') return Number.isFinite(input) && input > 0 ? input : undefined
  const m = /^\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|m|h|d)?\s*$/i.exec(input)
  if (!m) return undefined
  const seconds = Number(m[1]) * UNITS[(m[2] ?? 's').toLowerCase()]
  return Number.isFinite(seconds) && seconds > 0 ? seconds : undefined
}

/**
 * Formats seconds with the largest unit that divides them evenly, the way a
 * user would write them: 21600 → `6h`, 90 → `90s`, 1.5 → `1.5s`.
 *
 * ```ts
 * `checkpoint every ${formatDuration(intervalMs / 1000)}`
 * ```
 */
export function formatDuration(seconds: number): string {
  for (const unit of ['d', 'h', 'm'] as const) {
    const n = seconds / UNITS[unit]
    if (n >= 1 && Number.isInteger(n)) return `${n}${unit}`
  }
  return seconds < 1 ? `${+(seconds * 1000).toPrecision(6)}ms` : `${+seconds.toPrecision(6)}s`
}
