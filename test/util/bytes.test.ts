import { describe, expect, it } from 'vitest'
import { formatSize } from '../../src/util/bytes.js'

describe('formatSize', () => {
  it('says bytes in the largest unit reached, whole or with three significant digits', () => {
    expect(formatSize(0)).toBe('0 B')
    expect(formatSize(1023)).toBe('1023 B')
    expect(formatSize(1024)).toBe('1 KiB')
    expect(formatSize(1536)).toBe('1.50 KiB')
    expect(formatSize(24 * 2 ** 20)).toBe('24 MiB')
    expect(formatSize(12.34 * 2 ** 20)).toBe('12.3 MiB')
    expect(formatSize(123.4 * 2 ** 20)).toBe('123 MiB')
    expect(formatSize(1.5 * 2 ** 30)).toBe('1.50 GiB')
    expect(formatSize(2.29 * 2 ** 40)).toBe('2.29 TiB')
  })

  it('says bytes in one fixed unit with the decimals asked for (columns, figures side by side)', () => {
    expect(formatSize(2 ** 19, { unit: 'MiB', digits: 2 })).toBe('0.50 MiB')
    expect(formatSize(3 * 2 ** 30, { unit: 'MiB', digits: 1 })).toBe('3072.0 MiB')
    expect(formatSize(1536, { unit: 'KiB', digits: 1 })).toBe('1.5 KiB')
    expect(formatSize(100, { unit: 'B', digits: 0 })).toBe('100 B')
  })
})
