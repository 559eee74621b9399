import { describe, expect, it } from 'vitest'
import { ConfigError, SettingsMismatchError } from '../../../src/errors.js'
import { assertSameSettings, chooseRecoveryLine, compareSettings, type RankView } from '../../../src/checkpoint/recovery/line.js'

describe('chooseRecoveryLine', () => {
  it('picks the newest checkpoint valid on every rank and explains each newer one', () => {
    const views: RankView[] = [
      { rank: 0, valid: [7, 6, 5], problems: [{ seq: 8, rank: 0, file: '/c/ckpt-00000008/COMMIT', reason: 'no commit marker' }] },
      { rank: 1, valid: [7, 6, 5], problems: [{ seq: 8, rank: 1, file: '/c/ckpt-00000008/COMMIT', reason: 'no commit marker' }] },
      {
        rank: 2,
        valid: [6, 5],
        problems: [
          { seq: 8, rank: 2, file: '/c/ckpt-00000008/COMMIT', reason: 'no commit marker' },
          { seq: 7, rank: 2, file: '/c/ckpt-00000007/rank-2.mlf', reason: 'checksum mismatch in entry "write"' },
        ],
      },
    ]
    const line = chooseRecoveryLine(views)
    expect(line.seq).toBe(6)
    expect(line.skipped).toEqual([
      { seq: 8, problems: [{ seq: 8, rank: 0, file: '/c/ckpt-00000008/COMMIT', reason: 'no commit marker' }] },
      { seq: 7, problems: [{ seq: 7, rank: 2, file: '/c/ckpt-00000007/rank-2.mlf', reason: 'checksum mismatch in entry "write"' }] },
    ])
  })

  it('no common checkpoint: start afresh, and every checkpoint is explained', () => {
    const line = chooseRecoveryLine([
      { rank: 0, valid: [1], problems: [] },
      { rank: 1, valid: [0], problems: [{ seq: 1, rank: 1, file: 'f', reason: 'the file is missing' }] },
    ])
    expect(line.seq).toBeUndefined()
    expect(line.skipped.map((s) => s.seq)).toEqual([1, 0])
    // Rank 1 found 0 valid, rank 0 never saw it: said so.
    expect(line.skipped[1].problems).toEqual([{ seq: 0, rank: 0, file: '', reason: 'rank 0 did not find this checkpoint' }])
  })

  it('older problems are not reported, and one rank alone works', () => {
    expect(chooseRecoveryLine([{ rank: 0, valid: [3], problems: [{ seq: 2, rank: 0, file: 'f', reason: 'x' }] }])).toEqual({ seq: 3, skipped: [] })
    expect(() => chooseRecoveryLine([])).toThrow(ConfigError)
  })
})

describe('compareSettings', () => {
  it('lists every difference: ranks, changed, added, removed, nested and array elements', () => {
    const stored = { settings: { n: 512, tol: 1e-6, grid: { rows: 8, cols: 8 }, tiles: [1, 2, 3], mode: 'fast', old: true }, size: 4 }
    const current = { settings: { n: 1024, tol: 1e-6, grid: { rows: 8, cols: 16 }, tiles: [1, 2, 4], mode: 'fast', extra: 'x' }, size: 8 }
    expect(compareSettings(stored, current)).toEqual([
      { name: 'ranks', old: 4, new: 8 },
      { name: 'n', old: 512, new: 1024 },
      { name: 'grid.cols', old: 8, new: 16 },
      { name: 'tiles[2]', old: 3, new: 4 },
      { name: 'old', old: true, new: undefined },
      { name: 'extra', old: undefined, new: 'x' },
    ])
  })

  it('finds no difference in equal settings; a missing key equals undefined', () => {
    const s = { settings: { a: { b: [1, { c: 'x' }] } }, size: 2 }
    expect(compareSettings(s, structuredClone(s))).toEqual([])
    expect(compareSettings({ settings: {}, size: 1 }, { settings: { maybe: undefined }, size: 1 })).toEqual([])
  })

  it('arrays of another length and type changes are one difference each', () => {
    expect(compareSettings({ settings: { xs: [1, 2], k: { a: 1 } }, size: 1 }, { settings: { xs: [1, 2, 3], k: 5 }, size: 1 })).toEqual([
      { name: 'xs', old: [1, 2], new: [1, 2, 3] },
      { name: 'k', old: { a: 1 }, new: 5 },
    ])
  })

  it('assertSameSettings throws SettingsMismatchError naming each difference', () => {
    expect(() => assertSameSettings({ settings: { n: 1 }, size: 2 }, { settings: { n: 1 }, size: 2 })).not.toThrow()
    let err: unknown
    try {
      assertSameSettings({ settings: { n: 512, name: 'a' }, size: 4 }, { settings: { n: 1024, name: 'b' }, size: 2 })
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(SettingsMismatchError)
    const e = err as SettingsMismatchError
    expect(e.differences.map((d) => d.name)).toEqual(['ranks', 'n', 'name'])
    expect(e.message).toContain('ranks: 4 → 2')
    expect(e.message).toContain('n: 512 → 1024')
    expect(e.message).toContain('name: "a" → "b"')
  })
})
