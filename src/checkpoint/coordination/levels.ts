import { existsSync } from 'node:fs'
import type { Communicator } from '../../routing/communicator.js'
import { FRAMEWORK_TAGS } from '../../routing/tags.js'
import type { FaultToleranceConfig, SharedLevelConfig } from '../config.js'
import type { CheckpointLevel, CopyLevel } from '../events.js'
import type { CheckpointPolicy } from '../policy/policy.js'
import type { LevelMedium, LevelSource } from '../recovery/negotiate.js'
import { CheckpointStore, type CheckpointSummary } from '../store/checkpoint-store.js'
import { claimMemoryDirectory, memoryDirFor } from '../store/memory-level.js'
import { PARTNER_COPY_TAG, PartnerRing, partnerDirOf } from '../store/partner.js'
import { xorDirOf } from '../redundancy/parity-file.js'
import { XorSets } from '../redundancy/sets.js'
import type { CopyTarget } from './copies.js'

/**
 * How a level gets its checkpoints: `written` (this rank writes its file at
 * the checkpoint point: the memory level, or disk without one), `flushed`
 * (disk, copied from a committed memory checkpoint in the background),
 * `partner` (each rank's file of a committed checkpoint of level `from` sent
 * to its holder on another node), `xor` (each rank's parity slice of its
 * set's files of a committed checkpoint of level `from`, see
 * redundancy/exchange.ts), `shared` (disk checkpoints copied to a
 * directory every node sees, as `config` says), `left` (copies an earlier run
 * left: a resume reads them, a fresh start discards them, this run adds none).
 */
export type LevelFeed =
  | { kind: 'written' }
  | { kind: 'flushed'; from: 'memory' }
  | { kind: 'partner'; from: CheckpointLevel; ring: PartnerRing; tag: number; keep: number }
  | { kind: 'shared'; from: 'disk'; config: SharedLevelConfig; keep: number }
  | { kind: 'xor'; from: CheckpointLevel; sets: XorSets; tag: number; keep: number }
  | { kind: 'left' }

/**
 * One checkpoint level of a run, built once when the run opens (openLevels):
 * everything the commit, the copies, the events and a resume's negotiation
 * need to know of it, opened from its kind (LEVEL_KINDS).
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

/** The directories a run's levels derive theirs from. */
export interface LevelRoots {
  /** The checkpoint directory (the disk level). */
  disk: string
  /** The memory level's directory, when the run (or the listing) has one. */
  memory?: string
  /** The shared level's directory, when the run (or the listing) has one. */
  shared?: string
}

/** What a run's configuration says of its levels, for LevelKind.open. */
export interface LevelRun {
  cfg: FaultToleranceConfig
  policies: { disk: CheckpointPolicy; memory?: CheckpointPolicy }
  /** Who keeps whose partner copies, when the run makes any. */
  ring?: PartnerRing
  /** This rank's partner copies are of rank `holds` (partner levels). */
  holds?: number
  /** The XOR sets, when the run keeps parity slices instead of partner copies. */
  sets?: XorSets
}

/** How a run opens a level of some kind: its feed, and its policy when the vote writes to it. */
export interface LevelOpening {
  feed: LevelFeed
  policy?: CheckpointPolicy
  holds?: number
}

/**
 * A kind of level, whatever the run: where its directory is, what it holds,
 * how a run opens it and how `molotof inspect` names it. LEVEL_KINDS lists
 * them fastest first; openLevels walks that list for a run, inspect walks it
 * for a listing. A new level is one more kind there (and a writer for a new
 * feed: see copyTargetsOf).
 */
export interface LevelKind {
  readonly name: CheckpointLevel | CopyLevel
  readonly medium: LevelMedium
  /** Its files live in RAM (no fsync; gone with the node). */
  readonly volatile: boolean
  /** Holds copies derived from another level's checkpoints: a fresh start discards them, inspect's exit code passes them over. */
  readonly copy: boolean
  /** Holds the files of some ranks only (a partner directory: those of the ranks it keeps copies for): only those are checked. */
  readonly someRanks: boolean
  /** Its directory from the run's (undefined: no level of this kind). */
  dirOf(roots: LevelRoots): string | undefined
  /**
   * Whether the run opens it, and how; undefined: it does not. `present`
   * asks every rank whether the directory exists (collective: every rank of
   * the run decides the same way whether to ask).
   */
  open(run: LevelRun, present: () => Promise<boolean>): Promise<LevelOpening | undefined>
  /** What `molotof inspect` calls it in a listing's heading; none: inspect does not list it. */
  readonly inspectTitle?: string
}

/**
 * Partner copies in a directory are opened also when this run keeps none: a
 * resume reads them (on fewer nodes than the run that wrote them, which is
 * how a run that lost a node goes on), a fresh start discards them (left
 * there, an earlier run's copies could share numbers with this run's
 * checkpoints). Every rank opens such a level when any has it.
 */
async function partnerOpening(run: LevelRun, present: () => Promise<boolean>, feed: LevelFeed): Promise<LevelOpening | undefined> {
  if (run.ring === undefined && !(await present())) return undefined
  return { feed, ...(run.holds !== undefined ? { holds: run.holds } : {}) }
}

/** XOR parity slices, like partner copies, are opened also when this run makes none (see partnerOpening). */
async function parityOpening(run: LevelRun, present: () => Promise<boolean>, feed: LevelFeed): Promise<LevelOpening | undefined> {
  if (run.sets === undefined && !(await present())) return undefined
  return { feed }
}

/**
 * The kinds of level, fastest first: memory, its partner copies and its XOR
 * parity slices (in RAM), disk, its partner copies and its parity slices, shared.
 */
export const LEVEL_KINDS: readonly LevelKind[] = [
  {
    name: 'memory',
    medium: 'ram',
    volatile: true,
    copy: false,
    someRanks: false,
    dirOf: (r) => r.memory,
    open: async ({ policies }) => (policies.memory === undefined ? undefined : { feed: { kind: 'written' }, policy: policies.memory }),
    inspectTitle: 'memory level',
  },
  {
    // The partner copies of memory checkpoints live in the holder's memory level (RAM), beside its own.
    name: 'partner',
    medium: 'ram',
    volatile: true,
    copy: true,
    someRanks: true,
    dirOf: (r) => (r.memory === undefined ? undefined : partnerDirOf(r.memory)),
    // Not when memory is only the staging of background disk writes (`async` alone): their disk copies go anyway.
    // The partner's memory level keeps the newest copy only (RAM is dear).
    open: (run, present) =>
      partnerOpening(run, present, run.ring && run.cfg.memory ? { kind: 'partner', from: 'memory', ring: run.ring, tag: FRAMEWORK_TAGS.partnerCopyMemory, keep: 1 } : { kind: 'left' }),
  },
  {
    // The parity slices of memory checkpoints live in each member's memory level (RAM), beside its own files.
    name: 'xor',
    medium: 'ram',
    volatile: true,
    copy: true,
    someRanks: true,
    dirOf: (r) => (r.memory === undefined ? undefined : xorDirOf(r.memory)),
    open: (run, present) =>
      parityOpening(run, present, run.sets && run.cfg.memory ? { kind: 'xor', from: 'memory', sets: run.sets, tag: FRAMEWORK_TAGS.xorParityMemory, keep: 1 } : { kind: 'left' }),
    inspectTitle: 'XOR parity slices of the memory level',
  },
  {
    name: 'disk',
    medium: 'node',
    volatile: false,
    copy: false,
    someRanks: false,
    dirOf: (r) => r.disk,
    open: async ({ policies }) => ({ feed: policies.memory !== undefined ? { kind: 'flushed', from: 'memory' } : { kind: 'written' }, policy: policies.disk }),
    inspectTitle: 'disk level',
  },
  {
    name: 'partner',
    medium: 'node',
    volatile: false,
    copy: true,
    someRanks: true,
    dirOf: (r) => partnerDirOf(r.disk),
    open: (run, present) => partnerOpening(run, present, run.ring ? { kind: 'partner', from: 'disk', ring: run.ring, tag: PARTNER_COPY_TAG, keep: run.cfg.keep } : { kind: 'left' }),
    inspectTitle: "partner level: copies of other ranks' files",
  },
  {
    name: 'xor',
    medium: 'node',
    volatile: false,
    copy: true,
    someRanks: true,
    dirOf: (r) => xorDirOf(r.disk),
    open: (run, present) => parityOpening(run, present, run.sets ? { kind: 'xor', from: 'disk', sets: run.sets, tag: FRAMEWORK_TAGS.xorParity, keep: run.cfg.keep } : { kind: 'left' }),
    inspectTitle: 'XOR parity slices: one per rank, of its set',
  },
  {
    name: 'shared',
    medium: 'shared',
    volatile: false,
    copy: true,
    someRanks: false,
    dirOf: (r) => r.shared,
    open: async ({ cfg }) => ({ feed: cfg.shared ? { kind: 'shared', from: 'disk', config: cfg.shared, keep: cfg.keep } : { kind: 'left' } }),
    inspectTitle: 'shared level',
  },
]

/**
 * The run's levels, fastest first (collective): each kind of LEVEL_KINDS
 * the run opens, at its directory, with its feed.
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
  const sets = cfg.xor ? new XorSets(comm.size, cfg.xor.ranksPerNode, cfg.xor.setSize) : undefined
  const run: LevelRun = { cfg, policies, ...(ring ? { ring, holds: ring.sourceOf(comm.rank) } : {}), ...(sets ? { sets } : {}) }
  // The memory level writes only in a directory of molotof's own (a sub-directory of a given one holding the user's files).
  const memory = policies.memory === undefined ? undefined : claimMemoryDirectory(cfg.memory?.dir ?? memoryDirFor(cfg.dir))
  const shared = cfg.shared?.dir ?? (cfg.resume ? cfg.resumeSharedDir : undefined)
  const roots: LevelRoots = { disk: cfg.dir, ...(memory !== undefined ? { memory } : {}), ...(shared !== undefined ? { shared } : {}) }
  const levels: Omit<Level, 'writesMarker'>[] = []
  for (const kind of LEVEL_KINDS) {
    const dir = kind.dirOf(roots)
    if (dir === undefined) continue
    const opening = await kind.open(run, async () => (await comm.allreduce(existsSync(dir) ? 1 : 0, 'max')) === 1)
    if (!opening) continue
    const { feed, policy, holds } = opening
    levels.push({
      name: kind.name,
      store: new CheckpointStore(dir, kind.volatile ? { volatile: true } : {}),
      medium: kind.medium,
      ...(holds !== undefined ? { holds } : {}),
      ...(policy ? { policy } : {}),
      feed,
      copy: kind.copy,
      listed: [],
      volatile: kind.volatile,
    })
  }
  // Ranks may have directories of their own (`{node}`, `{rank}`): the lowest rank of each commits there (and in the
  // partner directory inside it; rank 0 in the shared one).
  const dirs = await comm.allgather(levels.map((l) => l.store.dir))
  return levels.map((l, i) => ({ ...l, writesMarker: dirs.findIndex((d) => d[i] === l.store.dir) === comm.rank }))
}

/**
 * The XOR levels of a run, each with the level whose checkpoints its slices
 * protect (the one whose directory holds it): a rebuild writes there.
 */
export function parityLevelsOf(levels: readonly Level[]): { parity: Level; protects: Level }[] {
  return levels.flatMap((parity) => {
    const protects = parity.name === 'xor' ? levels.find((l) => !l.copy && xorDirOf(l.store.dir) === parity.store.dir) : undefined
    return protects ? [{ parity, protects }] : []
  })
}

/** The level named `name` that the vote writes to (memory or disk), if the run has it. */
export function ownLevel(levels: readonly Level[], name: CheckpointLevel): Level | undefined {
  return levels.find((l) => l.name === name && !l.copy)
}

/**
 * Where the copies of level `from`'s committed checkpoints go (see
 * CheckpointCopies), in the order of the levels, or undefined when no level
 * is fed from it; `partner`: the partner (or XOR) level among them.
 */
export function copyTargetsOf(levels: readonly Level[], from: CheckpointLevel): { targets: CopyTarget[]; keep: number; partner?: Level } | undefined {
  const targets: CopyTarget[] = []
  let keep: number | undefined
  let partner: Level | undefined
  for (const l of levels) {
    const f = l.feed
    if ((f.kind !== 'partner' && f.kind !== 'shared' && f.kind !== 'xor') || f.from !== from) continue
    keep ??= f.keep
    const name = l.name as CopyLevel
    if (f.kind === 'partner') {
      targets.push({ name, store: l.store, writesMarker: l.writesMarker, feed: { kind: 'partner', ring: f.ring, tag: f.tag } })
      partner = l
    } else if (f.kind === 'xor') {
      // Pinned like partner copies: a rebuild needs the survivors' own files of the checkpoint the slices are of.
      targets.push({ name, store: l.store, writesMarker: l.writesMarker, feed: { kind: 'xor', sets: f.sets, tag: f.tag } })
      partner = l
    } else targets.push({ name, store: l.store, writesMarker: l.writesMarker, feed: { kind: 'shared', config: f.config } })
  }
  return keep === undefined ? undefined : { targets, keep, ...(partner ? { partner } : {}) }
}
