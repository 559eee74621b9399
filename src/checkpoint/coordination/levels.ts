import { existsSync } from 'node:fs'
import type { Communicator } from '../../routing/communicator.js'
import { FRAMEWORK_TAGS } from '../../routing/tags.js'
import type { FaultToleranceConfig, SharedLevelConfig } from '../config.js'
import type { CheckpointLevel, CopyLevel } from '../events.js'
import type { CheckpointPolicy } from '../policy/policy.js'
import type { LevelSource } from '../recovery/negotiate.js'
import { CheckpointStore, type CheckpointSummary } from '../store/checkpoint-store.js'
import { claimMemoryDirectory, memoryDirFor } from '../store/memory-level.js'
import { PARTNER_COPY_TAG, PartnerRing, partnerDirOf } from '../store/partner.js'
import type { CopyTarget } from './copies.js'

/**
 * How a level gets its checkpoints: `written` (this rank writes its file at
 * the checkpoint point: the memory level, or disk without one), `flushed`
 * (disk, copied from a committed memory checkpoint in the background),
 * `partner` (each rank's file of a committed checkpoint of level `from` sent
 * to its holder on another node), `shared` (disk checkpoints copied to a
 * directory every node sees, as `config` says), `left` (copies an earlier run
 * left: a resume reads them, a fresh start discards them, this run adds none).
 */
export type LevelFeed =
  | { kind: 'written' }
  | { kind: 'flushed'; from: 'memory' }
  | { kind: 'partner'; from: CheckpointLevel; ring: PartnerRing; tag: number; keep: number }
  | { kind: 'shared'; from: 'disk'; config: SharedLevelConfig; keep: number }
  | { kind: 'left' }

/**
 * One checkpoint level of a run, built once when the run opens (openLevels):
 * everything the commit, the copies, the events and a resume's negotiation
 * need to know of it. A new level is a new record here, with its feed.
 */
export interface Level extends LevelSource {
  /** Its checkpoints when the run opened it (oldest first; filled in by the coordinator). */
  listed: CheckpointSummary[]
  /** Its files live in RAM (no fsync; gone with the node). */
  volatile: boolean
  /** When the vote writes to it (memory and disk levels); the copy levels follow their feed. */
  policy?: CheckpointPolicy
  feed: LevelFeed
  /** Holds copies derived from another level's checkpoints (partner, shared): a fresh start discards them. */
  copy: boolean
  /** This rank writes the level's `COMMIT` markers and prunes it: the lowest rank sharing its directory. */
  writesMarker: boolean
}

/**
 * The run's levels, fastest first (collective): memory and its partner
 * copies (in the holder's RAM), disk and its partner copies, shared.
 *
 * Partner copies in these directories are opened also when this run keeps
 * none: a resume reads them (on fewer nodes than the run that wrote them,
 * which is how a run that lost a node goes on), a fresh start discards them
 * (left there, an earlier run's copies could share numbers with this run's
 * checkpoints). Every rank opens such a level when any has it.
 *
 * ```ts
 * // cfg: a memory level, partner copies, a shared level
 * const levels = await openLevels(comm, cfg, { disk: cfg.policy, memory: cfg.memory.policy })
 * levels.map((l) => l.name)        // ['memory', 'partner', 'disk', 'partner', 'shared']
 * levels.map((l) => l.feed.kind)   // ['written', 'partner', 'flushed', 'partner', 'shared']
 * ```
 */
export async function openLevels(comm: Communicator, cfg: FaultToleranceConfig, policies: { disk: CheckpointPolicy; memory?: CheckpointPolicy }): Promise<Level[]> {
  const ring = cfg.partner ? new PartnerRing(comm.size, cfg.partner.ranksPerNode) : undefined
  const holds = ring ? { holds: ring.sourceOf(comm.rank) } : {}
  const readsPartner = async (dir: string) => ring !== undefined || (await comm.allreduce(existsSync(dir) ? 1 : 0, 'max')) === 1
  const disk = new CheckpointStore(cfg.dir)
  // The memory level writes only in a directory of molotof's own (a sub-directory of a given one holding the user's files).
  const memory = policies.memory === undefined ? undefined : new CheckpointStore(claimMemoryDirectory(cfg.memory?.dir ?? memoryDirFor(cfg.dir)), { volatile: true })
  const diskPartner = (await readsPartner(partnerDirOf(cfg.dir))) ? new CheckpointStore(partnerDirOf(cfg.dir)) : undefined
  // The partner copies of memory checkpoints live in the holder's memory level (RAM), beside its own.
  const memoryPartner = memory && (await readsPartner(partnerDirOf(memory.dir))) ? new CheckpointStore(partnerDirOf(memory.dir), { volatile: true }) : undefined
  const sharedDir = cfg.shared?.dir ?? (cfg.resume ? cfg.resumeSharedDir : undefined)

  const levels: Omit<Level, 'writesMarker'>[] = []
  const add = (l: Omit<Level, 'writesMarker' | 'listed' | 'volatile'>) => levels.push({ ...l, listed: [], volatile: l.store.volatile })
  if (memory) {
    add({ name: 'memory', store: memory, medium: 'ram', policy: policies.memory, feed: { kind: 'written' }, copy: false })
    // Not when memory is only the staging of background disk writes (`async` alone): their disk copies go anyway.
    // The partner's memory level keeps the newest copy only (RAM is dear).
    const feed: LevelFeed = ring && cfg.memory ? { kind: 'partner', from: 'memory', ring, tag: FRAMEWORK_TAGS.partnerCopyMemory, keep: 1 } : { kind: 'left' }
    if (memoryPartner) add({ name: 'partner', store: memoryPartner, medium: 'ram', ...holds, feed, copy: true })
  }
  add({ name: 'disk', store: disk, medium: 'node', policy: policies.disk, feed: memory ? { kind: 'flushed', from: 'memory' } : { kind: 'written' }, copy: false })
  if (diskPartner) {
    const feed: LevelFeed = ring ? { kind: 'partner', from: 'disk', ring, tag: PARTNER_COPY_TAG, keep: cfg.keep } : { kind: 'left' }
    add({ name: 'partner', store: diskPartner, medium: 'node', ...holds, feed, copy: true })
  }
  if (sharedDir !== undefined) {
    const feed: LevelFeed = cfg.shared ? { kind: 'shared', from: 'disk', config: cfg.shared, keep: cfg.keep } : { kind: 'left' }
    add({ name: 'shared', store: new CheckpointStore(sharedDir), medium: 'shared', feed, copy: true })
  }
  // Ranks may have directories of their own (`{node}`, `{rank}`): the lowest rank of each commits there (and in the
  // partner directory inside it; rank 0 in the shared one).
  const dirs = await comm.allgather(levels.map((l) => l.store.dir))
  return levels.map((l, i) => ({ ...l, writesMarker: dirs.findIndex((d) => d[i] === l.store.dir) === comm.rank }))
}

/** The level named `name` that the vote writes to (memory or disk), if the run has it. */
export function ownLevel(levels: readonly Level[], name: CheckpointLevel): Level | undefined {
  return levels.find((l) => l.name === name && !l.copy)
}

/**
 * Where the copies of level `from`'s committed checkpoints go (see
 * CheckpointCopies), in the order of the levels, or undefined when no level
 * is fed from it; `partner`: the partner level among them.
 */
export function copyTargetsOf(levels: readonly Level[], from: CheckpointLevel): { targets: CopyTarget[]; keep: number; partner?: Level } | undefined {
  const targets: CopyTarget[] = []
  let keep: number | undefined
  let partner: Level | undefined
  for (const l of levels) {
    const f = l.feed
    if ((f.kind !== 'partner' && f.kind !== 'shared') || f.from !== from) continue
    keep ??= f.keep
    const name = l.name as CopyLevel
    if (f.kind === 'partner') {
      targets.push({ name, store: l.store, writesMarker: l.writesMarker, feed: { kind: 'partner', ring: f.ring, tag: f.tag } })
      partner = l
    } else targets.push({ name, store: l.store, writesMarker: l.writesMarker, feed: { kind: 'shared', config: f.config } })
  }
  return keep === undefined ? undefined : { targets, keep, ...(partner ? { partner } : {}) }
}
