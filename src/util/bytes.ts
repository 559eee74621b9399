const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'] as const

/** A binary unit of `formatSize`. */
export type ByteUnit = (typeof UNITS)[number]

/**
 * Bytes in binary units for messages: in the largest unit the value reaches,
 * whole or with three significant digits ('1.50 GiB', '24 MiB', '123 KiB');
 * or, for columns and figures compared side by side, in one `unit` with
 * `digits` decimals ('0.50 MiB').
 *
 * ```ts
 * formatSize(1.5 * 2 ** 30)                            // '1.50 GiB'
 * formatSize(2 ** 19, { unit: 'MiB', digits: 2 })      // '0.50 MiB'
 * ```
 */
export function formatSize(bytes: number, fixed?: { unit: ByteUnit; digits: number }): string {
  if (fixed) return `${(bytes / 1024 ** UNITS.indexOf(fixed.unit)).toFixed(fixed.digits)} ${fixed.unit}`
  let v = bytes
  let u = 0
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024
    u++
  }
  return `${Number.isInteger(v) ? v : v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${UNITS[u]}`
}
