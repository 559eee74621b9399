// The run's checkpoint levels as one list (coordination/levels.ts) and recovery
// warnings as data made text in one place (recovery/warnings.ts).
import { mkdirSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { frozenConfig, type FaultToleranceConfig } from '../../../src/checkpoint/config.js'
import { copyTargetsOf, openLevels } from '../../../src/checkpoint/coordination/levels.js'
import { recoveryWarningText } from '../../../src/checkpoint/recovery/warnings.js'
import { localGroup } from '../../../src/runtime/launch/local.js'

const freshDir = () => mkdtempSync(join(tmpdir(), 'molotof-level-list-'))

function openAll(cfg: FaultToleranceConfig, size: number) {
  const comms = localGroup(size)
  return Promise.all(comms.map((c) => openLevels(c, cfg, { disk: { every: 10 }, ...(cfg.memory ? { memory: cfg.memory.policy } : {}) })))
}

describe('the levels of a run', () => {
  it('memory, partner copies and shared: one record each, fastest first, with their feeds and partners', async () => {
    const dir = freshDir()
    const shared = freshDir()
    const cfg = frozenConfig({ dir, policy: { every: 10 }, keep: 3, resume: false, memory: { policy: { every: 2 }, dir: join(freshDir(), 'ram') }, partner: { ranksPerNode: 2 }, shared: { dir: shared, every: 2 } })
    const all = await openAll(cfg, 4)
    for (const [rank, levels] of all.entries()) {
      expect(levels.map((l) => [l.name, l.medium, l.feed.kind, l.volatile, l.copy])).toEqual([
        ['memory', 'ram', 'written', true, false],
        ['partner', 'ram', 'partner', true, true],
        ['disk', 'node', 'flushed', false, false],
        ['partner', 'node', 'partner', false, true],
        ['shared', 'shared', 'shared', false, true],
      ])
      // Rank r keeps the copies of the same local rank on the previous node (2 ranks per node).
      expect(levels.map((l) => l.holds)).toEqual([undefined, (rank + 2) % 4, undefined, (rank + 2) % 4, undefined])
      // One directory for all: rank 0 writes every marker.
      expect(levels.every((l) => l.writesMarker === (rank === 0))).toBe(true)
      expect(levels[4].store.dir).toBe(shared)
      expect(levels[2].store.dir).toBe(dir)
    }
    const levels = all[0]
    // The memory partner keeps only the newest copy; disk's copies keep `keep`.
    const memoryCopies = copyTargetsOf(levels, 'memory')
    expect(memoryCopies?.keep).toBe(1)
    expect(memoryCopies?.targets.map((t) => [t.name, t.store, t.feed.kind])).toEqual([['partner', levels[1].store, 'partner']])
    const diskCopies = copyTargetsOf(levels, 'disk')
    expect(diskCopies?.keep).toBe(3)
    expect(diskCopies?.targets.map((t) => [t.name, t.store, t.feed.kind])).toEqual([
      ['partner', levels[3].store, 'partner'],
      ['shared', levels[4].store, 'shared'],
    ])
    // Memory and disk copies travel at the same time: each on a tag of its own.
    const tags = [memoryCopies, diskCopies].map((c) => c?.targets[0].feed).map((f) => (f?.kind === 'partner' ? f.tag : undefined))
    expect(new Set(tags).size).toBe(2)
  })

  it('partner copies an earlier run left on one rank only: every rank opens that level, fed by nothing', async () => {
    const dirs = [freshDir(), freshDir()]
    mkdirSync(join(dirs[1], 'partner'))
    const comms = localGroup(2)
    const all = await Promise.all(comms.map((c) => openLevels(c, frozenConfig({ dir: dirs[c.rank], policy: { every: 10 }, keep: 2, resume: true }), { disk: { every: 10 } })))
    for (const levels of all) {
      expect(levels.map((l) => [l.name, l.feed.kind, l.holds])).toEqual([
        ['disk', 'written', undefined],
        ['partner', 'left', undefined],
      ])
      expect(copyTargetsOf(levels, 'disk')).toBeUndefined()
    }
    // Each rank its own directory: each writes its own markers.
    expect(all.map((levels) => levels.every((l) => l.writesMarker))).toEqual([true, true])
  })
})

describe('recovery warnings', () => {
  it('are made text in one place, a checkpoint no rank found a file of naming the reason alone', () => {
    expect(
      recoveryWarningText({
        kind: 'skipped',
        seq: 4,
        problems: [
          { rank: 1, file: '/c/ckpt-00000004/rank-1.mlf', reason: 'checksum mismatch' },
          { rank: 2, file: '', reason: 'no level holds this rank file' },
        ],
      }),
    ).toBe('checkpoint 4 skipped: /c/ckpt-00000004/rank-1.mlf: checksum mismatch; no level holds this rank file')
    expect(recoveryWarningText({ kind: 'fallback', seq: 3, rank: 0, file: '/m/ckpt-00000003/rank-0.mlf', reason: 'the file is missing', level: 'disk' })).toBe(
      'checkpoint 3: /m/ckpt-00000003/rank-0.mlf: the file is missing; read from the disk level instead',
    )
    expect(recoveryWarningText({ kind: 'fresh-start', places: ['/a', '/b'] })).toBe('no valid checkpoint in /a or /b: starting from the beginning')
  })
})
