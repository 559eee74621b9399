/** min / median / max of a sample, for benchmark tables. */
export function summary(xs: readonly number[]): { min: number; median: number; max: number } {
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  const median = s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2
  return { min: s[0], median, max: s[s.length - 1] }
}

/**
 * The sample value below which a share `p` of the sample lies (the value at
 * index ⌊p·n⌋ of the sorted sample, the last for p = 1); NaN for an empty one.
 *
 * ```ts
 * quantile([4, 1, 3, 2], 0.9)   // 4
 * ```
 */
export function quantile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor(p * s.length))]
}

export function table(header: string[], rows: string[][]): string {
  const w = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)))
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(w[i]) : c.padStart(w[i]))).join('  ')
  return [line(header), w.map((x) => '-'.repeat(x)).join('  '), ...rows.map(line)].join('\n')
}
