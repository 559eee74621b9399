import { readFile } from 'node:fs/promises'
import { performance } from 'node:perf_hooks'
import { CheckpointCorruptError, CheckpointError } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import { FRAMEWORK_TAGS } from '../../routing/tags.js'
import { decodeRankFile, headerChecksumOf } from '../format/rank-file.js'
import { localView } from '../recovery/line.js'
import { makeDirectory, writeDurably } from '../store/durable.js'
import type { CheckpointStore, CheckpointSummary } from '../store/checkpoint-store.js'
import type { CommitMarker } from '../store/marker.js'
import { decodeParityFile, type XorSetRecord } from './parity-file.js'
import { receiveInto, sendBytes, sendFailure } from './exchange.js'
import { contributionOf } from './xor.js'

/** A level's store and its listing when the run opened it. */
export interface ListedStore {
  store: CheckpointStore
  listed: readonly CheckpointSummary[]
}

/** What rebuildLostFiles did: the checkpoints whose lost files it rebuilt, with the ranks, and why others could not be. */
export interface RebuildOutcome {
  /** Newest first. */
  rebuilt: { seq: number; ranks: number[] }[]
  /** Each checkpoint passed over, with why (two members of a set lost, a damaged parity slice …), newest first. */
  passedOver: { seq: number; reasons: string[] }[]
}

/** What a rank tells the others about one checkpoint before a rebuild. */
interface SliceReport {
  set?: XorSetRecord
  problem?: string
  marker?: CommitMarker
}

/**
 * Rebuild the files of ranks that lost them (a lost node's) from their XOR
 * sets, into `target` (collective: every rank calls it). A rank has lost
 * checkpoint s when none of its own levels (`own`, header checks) holds its
 * file of it. For each checkpoint `parity` holds slices of, newest first
 * (every one: the negotiation may still pass over the newest, for a
 * survivor's file damaged where the rebuild did not read it): when no rank
 * misses it, nothing is to be done; when every missing rank is
 * the only one missing in its set and the G−1 others hold their file and an
 * intact slice, each other member sends its contribution (contributionOf,
 * one file's worth) to the missing one, which XORs them into its file as
 * they arrive, checks it (length and header checksum
 * against the set's record and the commit marker, then every payload CRC),
 * and writes it to `target`; the lowest rebuilt rank of each directory then
 * writes the checkpoint's `COMMIT` there when it is missing. Otherwise
 * (two members of a set lost, a slice damaged or missing, a rebuilt file
 * failing its checks) that checkpoint is passed over, with the reasons, and
 * the older ones are tried all the same. Afterwards a negotiation finds the rebuilt
 * files as the ranks' own.
 *
 * The same function serves a `--resume` and a run that goes on after a
 * node's loss (its replacement ranks call it with every other rank).
 *
 * ```ts
 * const r = await rebuildLostFiles(comm, { store: xorStore, listed: await xorStore.list() }, [memory, disk], disk.store, log)
 * ```
 */
export async function rebuildLostFiles(
  comm: Communicator,
  parity: ListedStore,
  own: readonly ListedStore[],
  target: CheckpointStore,
  log: (text: string) => void,
): Promise<RebuildOutcome> {
  const { rank, size } = comm
  const ownValid = new Set<number>()
  for (const l of own) for (const s of (await localView(l.store, rank, size, { checksums: false, listed: l.listed })).valid) ownValid.add(s)
  const held = parity.listed.filter((c) => c.complete && c.marker !== undefined).map((c) => heldOf(c.seq, c.marker!.size, rank, size, own, parity, ownValid))
  const all = await comm.allgather(held)
  const candidates = [...new Set(all.flatMap((a) => a.map((h) => h.seq)))].sort((a, b) => b - a)
  const passedOver: RebuildOutcome['passedOver'] = []
  const rebuilt: RebuildOutcome['rebuilt'] = []
  const warn = () => {
    if (rank === 0) for (const p of passedOver) log(`warning: XOR redundancy: checkpoint ${p.seq} passed over: ${p.reasons.join('; ')}`)
  }
  for (const seq of candidates) {
    const views = all.map((a) => a.find((h) => h.seq === seq))
    const oldSize = views.find((v) => v !== undefined)!.size
    const files = holdersOf(views, oldSize, 'files')
    const sliceHolders = holdersOf(views, oldSize, 'slices')
    const missing = files.flatMap((h, r) => (h === undefined ? [r] : []))
    if (missing.length === 0) continue
    // Nobody has a file of it any more (pruned on every node): nothing to rebuild from.
    if (missing.length === oldSize) continue
    const mine = sliceHolders.flatMap((h, r) => (h === rank ? [r] : []))
    const read = new Map<number, Awaited<ReturnType<typeof readSlice>>>()
    for (const r of mine) read.set(r, await readSlice(parity, seq, r))
    const marker = parity.listed.find((c) => c.seq === seq)?.marker
    const gathered = await comm.allgather(mine.map((r) => [r, { ...(read.get(r)!.set ? { set: read.get(r)!.set } : { problem: read.get(r)!.problem }), marker }] as const))
    const reports: (SliceReport | undefined)[] = new Array(oldSize).fill(undefined)
    for (const [r, report] of gathered.flat()) reports[r] = report
    const plan = planRebuild(seq, missing, reports, parity.store, files, sliceHolders, oldSize === size)
    if (plan.reasons.length > 0) {
      passedOver.push({ seq, reasons: plan.reasons })
      continue
    }
    const agreed = reports.find((r) => r?.marker !== undefined)!.marker!
    const t0 = performance.now()
    const { problem, chains } = await exchange(comm, seq, plan.sets, own, read, agreed, target)
    const outcomes = await comm.allgather({ problem, dir: target.dir, chains })
    const reasons = outcomes.flatMap((o) => (o.problem === undefined ? [] : [o.problem]))
    if (reasons.length > 0) {
      passedOver.push({ seq, reasons })
      continue
    }
    // The lowest rank that wrote a rebuilt file in a directory commits it there (a lost node's directory has lost
    // its COMMIT too; a survivor's directory holding a file rebuilt for a smaller run has one already).
    const writers = plan.sets.map((s) => s.target)
    const commits = writers.includes(rank) && writers.filter((w) => outcomes[w].dir === target.dir).sort((a, b) => a - b)[0] === rank
    const uncommitted = commits ? await commitIfMissing(target, seq, agreed) : undefined
    const failures = (await comm.allgather(uncommitted)).filter((f): f is string => f !== undefined)
    if (failures.length > 0) {
      passedOver.push({ seq, reasons: failures })
      continue
    }
    if (rank === 0) {
      // A delta file is named with its chain: its base and earlier deltas are rebuilt (or found) as checkpoints of their own.
      const chainOf = new Map(outcomes.flatMap((o) => o.chains))
      const sets = plan.sets.map((s) => {
        const chain = chainOf.get(s.lost)
        const notes = [
          ...(oldSize === size ? [] : [`beside rank ${s.target}'s files`]),
          ...(chain === undefined ? [] : [`a delta on checkpoint${chain.length === 1 ? '' : 's'} ${chain.join(', ')}`]),
        ]
        return `rank ${s.lost} from ranks ${s.members.filter((m) => m !== s.lost).join(', ')}${notes.length > 0 ? ` (${notes.join(', ')})` : ''}`
      })
      const of = oldSize === size ? '' : ` (a checkpoint of ${oldSize} ranks, resumed on ${size})`
      log(`XOR redundancy: rebuilt the lost files of checkpoint ${seq}${of} from their XOR sets: ${sets.join('; ')} (${(performance.now() - t0).toFixed(0)} ms, checksums verified)`)
    }
    rebuilt.push({ seq, ranks: missing })
  }
  warn()
  return { rebuilt, passedOver }
}

/** What one rank holds of a checkpoint with parity slices: the checkpoint's ranks whose own file and whose slice it has. */
interface Held {
  seq: number
  /** The rank count of the checkpoint (its commit marker's). */
  size: number
  files: number[]
  slices: number[]
}

/**
 * What this rank holds of checkpoint `seq` (of `oldSize` ranks): on the run's
 * rank count, its own file when one of its levels holds it valid (header
 * checks) and its own slice; on another (a run that goes on with fewer
 * ranks), every file and slice its directories hold of it.
 */
function heldOf(seq: number, oldSize: number, rank: number, size: number, own: readonly ListedStore[], parity: ListedStore, ownValid: ReadonlySet<number>): Held {
  const slices = parity.listed.find((c) => c.seq === seq)?.files.map((f) => f.rank) ?? []
  if (oldSize === size) return { seq, size: oldSize, files: ownValid.has(seq) ? [rank] : [], slices: slices.filter((r) => r === rank) }
  const files = new Set<number>()
  for (const l of own) for (const c of l.listed) if (c.seq === seq && c.complete && c.marker?.size === oldSize) for (const f of c.files) if (f.rank < oldSize) files.add(f.rank)
  return { seq, size: oldSize, files: [...files], slices: slices.filter((r) => r < oldSize) }
}

/** For each rank of a checkpoint, the rank holding its file (or slice): itself when it does, else the lowest that does. */
function holdersOf(views: readonly (Held | undefined)[], oldSize: number, what: 'files' | 'slices'): (number | undefined)[] {
  return Array.from({ length: oldSize }, (_, r) => {
    if (views[r]?.[what].includes(r)) return r
    const h = views.findIndex((v) => v?.[what].includes(r) === true)
    return h < 0 ? undefined : h
  })
}

/** Write the marker of `seq` to `target` unless an intact one is there; why it could not be written, or undefined. */
async function commitIfMissing(target: CheckpointStore, seq: number, marker: CommitMarker): Promise<string | undefined> {
  try {
    const intact = await target.readMarker(seq).then(
      () => true,
      () => false,
    )
    if (!intact) await target.commit(seq, marker)
    return undefined
  } catch (e) {
    return `the rebuilt checkpoint ${seq} could not be committed in ${target.dir}: ${(e as Error).message}`
  }
}

/** This rank's parity slice of `seq`, read and verified, or why it cannot be used. */
async function readSlice(parity: ListedStore, seq: number, rank: number): Promise<{ set?: XorSetRecord; parity?: Uint8Array; problem?: string }> {
  const path = parity.store.fileOf(seq, rank)
  try {
    return decodeParityFile(await readFile(path), path, seq, rank)
  } catch (e) {
    return { problem: `parity slice ${path}: ${e instanceof CheckpointCorruptError ? e.reason : (e as Error).message}` }
  }
}

/** One set to rebuild: its members (layout order), the lost one, who writes its file, who holds each member's file and slice. */
interface SetPlan {
  members: number[]
  lost: number
  record: XorSetRecord
  /** The rank that rebuilds and writes the lost file: the lost rank itself, or (a run with fewer ranks) a survivor's holder. */
  target: number
  /** Per member (layout order): the rank holding its file and slice (undefined for the lost one). */
  holders: (number | undefined)[]
}

/** Which sets to rebuild, or why not (the same on every rank: from the exchanged reports). */
function planRebuild(
  seq: number,
  missing: readonly number[],
  reports: readonly (SliceReport | undefined)[],
  store: CheckpointStore,
  files: readonly (number | undefined)[],
  slices: readonly (number | undefined)[],
  sameSize: boolean,
): { sets: SetPlan[]; reasons: string[] } {
  const sets: SetPlan[] = []
  const reasons: string[] = []
  for (const lost of missing) {
    const record = reports.find((r) => r?.set?.members.includes(lost))?.set
    if (record === undefined) {
      reasons.push(`rank ${lost} lost its file of checkpoint ${seq} and no intact parity slice of its set was found`)
      continue
    }
    const lostInSet = record.members.filter((m) => missing.includes(m))
    if (lostInSet.length > 1) {
      reasons.push(`two members of XOR set {${record.members.join(', ')}} lost their files of checkpoint ${seq} (ranks ${lostInSet.join(', ')}): one parity slice per member rebuilds one of them only`)
      continue
    }
    const bad = record.members.filter((m) => m !== lost && reports[m]?.set === undefined)
    if (bad.length > 0) {
      for (const m of bad) reasons.push(`rank ${lost}'s file of checkpoint ${seq} cannot be rebuilt: ${reports[m]?.problem ?? `parity slice ${store.fileOf(seq, m)} is missing`}`)
      continue
    }
    if (sets.some((s) => s.members.includes(lost))) continue
    const apart = record.members.filter((m) => m !== lost && files[m] !== slices[m])
    if (apart.length > 0) {
      reasons.push(`rank ${lost}'s file of checkpoint ${seq} cannot be rebuilt: the files and parity slices of ranks ${apart.join(', ')} are held apart`)
      continue
    }
    const holders = record.members.map((m) => (m === lost ? undefined : files[m]))
    const target = sameSize ? lost : holders.find((h) => h !== undefined)!
    sets.push({ members: record.members, lost, record, target, holders })
  }
  return { sets, reasons }
}

/**
 * The transfers of a rebuild (collective): each surviving member of a set
 * sends its contribution (see contributionOf: its slice and the chunks of
 * its file in the others' slices, one file's worth), from the rank holding
 * its file and slice, to the set's target, which XORs them together as they
 * arrive, checks and writes the lost file. A rank's sends go in the plan's
 * order, and its receives from one rank too (one tag: messages from one
 * rank arrive in the order sent). This rank's problem, or undefined.
 */
async function exchange(
  comm: Communicator,
  seq: number,
  sets: readonly SetPlan[],
  own: readonly ListedStore[],
  slices: ReadonlyMap<number, { parity?: Uint8Array; problem?: string }>,
  marker: CommitMarker,
  target: CheckpointStore,
): Promise<{ problem?: string; chains: [number, number[]][] }> {
  const { rank } = comm
  const tag = FRAMEWORK_TAGS.xorRebuild
  // The parity covers the protected level's file as stored (a delta file of an incremental disk checkpoint): read
  // there first, not from a level holding the same checkpoint in another form (the memory level's full file).
  const targetFirst = [...own.filter((l) => l.store === target), ...own.filter((l) => l.store !== target)]
  const sends = (async () => {
    for (const set of sets) {
      const g = set.members.length
      for (const [j, m] of set.members.entries()) {
        if (set.holders[j] !== rank) continue
        const slice = slices.get(m)?.parity
        const ownFile = slice === undefined ? undefined : await ownFileOf(targetFirst, seq, m)
        const why =
          slice === undefined
            ? `rank ${m} has no parity slice of checkpoint ${seq}`
            : ownFile?.bytes === undefined
              ? (ownFile?.problem ?? `rank ${m} has no file of checkpoint ${seq}`)
              : ownFile.bytes.byteLength !== set.record.lengths[j]
                ? `rank ${m}'s file of checkpoint ${seq} is ${ownFile.bytes.byteLength} bytes, its set's record says ${set.record.lengths[j]}`
                : undefined
        if (why !== undefined) await sendFailure(comm, set.target, tag, why)
        else {
          const part = new Uint8Array(comm.allocator((g - 1) * slice!.byteLength))
          await sendBytes(comm, set.target, tag, contributionOf(j, set.members.indexOf(set.lost), ownFile!.bytes!, slice!, g, part))
        }
      }
    }
  })()
  const problems: string[] = []
  const chains: [number, number[]][] = []
  for (const set of sets) {
    if (set.target !== rank) continue
    const r = await rebuildOne(comm, seq, set, marker, target)
    if (typeof r === 'string') problems.push(r)
    else if (r.needs !== undefined) chains.push([set.lost, r.needs])
  }
  await sends
  return { ...(problems.length > 0 ? { problem: problems.join('; ') } : {}), chains }
}

/** The lost file of `set` XORed together from its members' contributions, checked and written to `target` (its chain when it is a delta file); why not, as a string. */
async function rebuildOne(comm: Communicator, seq: number, set: SetPlan, marker: CommitMarker, target: CheckpointStore): Promise<string | { needs?: number[] }> {
  const tag = FRAMEWORK_TAGS.xorRebuild
  const { record, members, lost } = set
  const me = members.indexOf(lost)
  const name = target.fileOf(seq, lost)
  try {
    const out = new Uint8Array((members.length - 1) * record.chunkBytes)
    // Every contribution is received, whatever fails: no sender is left waiting. One chain per sending rank.
    const byHolder = new Map<number, number[]>()
    for (const [j, h] of set.holders.entries()) if (h !== undefined) byHolder.set(h, [...(byHolder.get(h) ?? []), members[j]])
    const received = await Promise.allSettled(
      [...byHolder].map(async ([h, sent]) => {
        let failure: unknown
        for (const m of sent) {
          try {
            const got = await receiveInto(comm, h, tag, out, `rank ${m}'s part of the rebuild of checkpoint ${seq}`)
            if (got !== out.byteLength) throw new CheckpointError(`rank ${m} sent ${got} bytes toward the rebuild of checkpoint ${seq}, ${out.byteLength} expected`)
          } catch (e) {
            failure ??= e
          }
        }
        if (failure !== undefined) throw failure
      }),
    )
    const failed = received.find((r): r is PromiseRejectedResult => r.status === 'rejected')
    if (failed) throw failed.reason
    const rebuilt = out.subarray(0, record.lengths[me])
    // Checked before it is written: the header against the set's record and the marker, then every payload CRC.
    const sum = headerChecksumOf(rebuilt)
    if (sum !== record.headerChecksums[me] || sum !== marker.ranks[lost]?.headerChecksum) throw new CheckpointCorruptError(name, 'the rebuilt header differs from the one the commit marker records')
    const file = decodeRankFile(rebuilt, `${name} (rebuilt from its XOR set)`)
    if (file.header.rank !== lost) throw new CheckpointCorruptError(name, `the rebuilt file holds rank ${file.header.rank}'s data`)
    // Written in place also under a COMMIT (a rank file lost alone): these are the very bytes the marker records.
    await makeDirectory(target.pathOf(seq))
    await writeDurably(name, [rebuilt], { sync: !target.volatile })
    return file.header.delta ? { needs: file.header.delta.needs } : {}
  } catch (e) {
    return `rank ${lost}'s file of checkpoint ${seq} could not be rebuilt from XOR set {${members.join(', ')}}: ${e instanceof CheckpointCorruptError ? e.reason : (e as Error).message}`
  }
}

/** This rank's own file of `seq`, as bytes, from the first of its levels that holds it. */
async function ownFileOf(own: readonly ListedStore[], seq: number, rank: number): Promise<{ bytes?: Uint8Array; problem?: string }> {
  let problem: string | undefined
  for (const l of own) {
    if (!l.listed.some((c) => c.seq === seq && c.complete && c.files.some((f) => f.rank === rank))) continue
    try {
      return { bytes: await readFile(l.store.fileOf(seq, rank)) }
    } catch (e) {
      problem = `cannot read ${l.store.fileOf(seq, rank)}: ${(e as Error).message}`
    }
  }
  return { problem: problem ?? `rank ${rank} holds no file of checkpoint ${seq}` }
}
