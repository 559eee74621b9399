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
  const slices = parity.listed.filter((c) => c.complete && c.marker?.size === size && c.files.some((f) => f.rank === rank)).map((c) => c.seq)
  const all = await comm.allgather({ valid: [...ownValid], slices })
  const candidates = [...new Set(all.flatMap((a) => a.slices))].sort((a, b) => b - a)
  const passedOver: RebuildOutcome['passedOver'] = []
  const rebuilt: RebuildOutcome['rebuilt'] = []
  const warn = () => {
    if (rank === 0) for (const p of passedOver) log(`warning: XOR redundancy: checkpoint ${p.seq} passed over: ${p.reasons.join('; ')}`)
  }
  for (const seq of candidates) {
    const missing = all.flatMap((a, r) => (a.valid.includes(seq) ? [] : [r]))
    if (missing.length === 0) continue
    // Nobody has a file of it any more (pruned on every node): nothing to rebuild from.
    if (missing.length === size) continue
    const mine = all[rank].slices.includes(seq) ? await readSlice(parity, seq, rank) : undefined
    const reports = await comm.allgather<SliceReport | undefined>(mine && { ...(mine.set ? { set: mine.set } : { problem: mine.problem }), marker: parity.listed.find((c) => c.seq === seq)?.marker })
    const plan = planRebuild(seq, missing, reports, parity.store)
    if (plan.reasons.length > 0) {
      passedOver.push({ seq, reasons: plan.reasons })
      continue
    }
    const marker = reports.find((r) => r?.marker !== undefined)!.marker!
    const t0 = performance.now()
    const problem = await exchange(comm, seq, plan.sets, all[rank].valid.includes(seq) ? await ownFileOf(own, seq, rank) : undefined, mine?.parity, marker, target)
    const outcomes = await comm.allgather({ problem, dir: target.dir })
    const reasons = outcomes.flatMap((o) => (o.problem === undefined ? [] : [o.problem]))
    if (reasons.length > 0) {
      passedOver.push({ seq, reasons })
      continue
    }
    // The lowest rebuilt rank of each directory commits it there (a lost node's directory has lost its COMMIT too).
    const commits = missing.includes(rank) && missing.find((r) => outcomes[r].dir === target.dir) === rank
    const uncommitted = commits ? await commitIfMissing(target, seq, marker) : undefined
    const failures = (await comm.allgather(uncommitted)).filter((f): f is string => f !== undefined)
    if (failures.length > 0) {
      passedOver.push({ seq, reasons: failures })
      continue
    }
    if (rank === 0) {
      const sets = plan.sets.map((s) => `rank ${s.lost} from ranks ${s.members.filter((m) => m !== s.lost).join(', ')}`)
      log(`XOR redundancy: rebuilt the lost files of checkpoint ${seq} from their XOR sets: ${sets.join('; ')} (${(performance.now() - t0).toFixed(0)} ms, checksums verified)`)
    }
    rebuilt.push({ seq, ranks: missing })
  }
  warn()
  return { rebuilt, passedOver }
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

/** One set to rebuild: its members (layout order) and the lost one. */
interface SetPlan {
  members: number[]
  lost: number
  record: XorSetRecord
}

/** Which sets to rebuild, or why not (the same on every rank: from the exchanged reports). */
function planRebuild(seq: number, missing: readonly number[], reports: readonly (SliceReport | undefined)[], store: CheckpointStore): { sets: SetPlan[]; reasons: string[] } {
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
    sets.push({ members: record.members, lost, record })
  }
  return { sets, reasons }
}

/**
 * The transfers of a rebuild (collective): each surviving member of a set
 * sends its contribution (see contributionOf: its slice and the chunks of
 * its file in the others' slices, one file's worth) to the lost member,
 * which XORs them together as they arrive, checks and writes its file.
 * This rank's problem, or undefined.
 */
async function exchange(
  comm: Communicator,
  seq: number,
  sets: readonly SetPlan[],
  ownFile: { bytes?: Uint8Array; problem?: string } | undefined,
  slice: Uint8Array | undefined,
  marker: CommitMarker,
  target: CheckpointStore,
): Promise<string | undefined> {
  const { rank } = comm
  const tag = FRAMEWORK_TAGS.xorRebuild
  const set = sets.find((s) => s.members.includes(rank))
  if (set === undefined) return undefined
  const { record, members } = set
  const me = members.indexOf(rank)
  const g = members.length
  if (set.lost !== rank) {
    const why =
      slice === undefined
        ? `rank ${rank} has no parity slice of checkpoint ${seq}`
        : ownFile?.bytes === undefined
          ? (ownFile?.problem ?? `rank ${rank} has no file of checkpoint ${seq}`)
          : ownFile.bytes.byteLength !== record.lengths[me]
            ? `rank ${rank}'s file of checkpoint ${seq} is ${ownFile.bytes.byteLength} bytes, its set's record says ${record.lengths[me]}`
            : undefined
    if (why !== undefined) await sendFailure(comm, set.lost, tag, why)
    else await sendBytes(comm, set.lost, tag, contributionOf(me, members.indexOf(set.lost), ownFile!.bytes!, slice!, g))
    return undefined
  }
  const name = target.fileOf(seq, rank)
  try {
    const out = new Uint8Array((g - 1) * record.chunkBytes)
    // Every contribution is received, whatever fails: no sender is left waiting.
    const received = await Promise.allSettled(
      members.map(async (m, j) => {
        if (j === me) return
        const got = await receiveInto(comm, m, tag, out, `rank ${m}'s part of the rebuild of checkpoint ${seq}`)
        if (got !== out.byteLength) throw new CheckpointError(`rank ${m} sent ${got} bytes toward the rebuild of checkpoint ${seq}, ${out.byteLength} expected`)
      }),
    )
    const failed = received.find((r): r is PromiseRejectedResult => r.status === 'rejected')
    if (failed) throw failed.reason
    const rebuilt = out.subarray(0, record.lengths[me])
    // Checked before it is written: the header against the set's record and the marker, then every payload CRC.
    const sum = headerChecksumOf(rebuilt)
    if (sum !== record.headerChecksums[me] || sum !== marker.ranks[rank]?.headerChecksum) throw new CheckpointCorruptError(name, 'the rebuilt header differs from the one the commit marker records')
    const file = decodeRankFile(rebuilt, `${name} (rebuilt from its XOR set)`)
    if (file.header.rank !== rank) throw new CheckpointCorruptError(name, `the rebuilt file holds rank ${file.header.rank}'s data`)
    // Written in place also under a COMMIT (a rank file lost alone): these are the very bytes the marker records.
    await makeDirectory(target.pathOf(seq))
    await writeDurably(name, [rebuilt], { sync: !target.volatile })
    return undefined
  } catch (e) {
    return `rank ${rank}'s file of checkpoint ${seq} could not be rebuilt from XOR set {${members.join(', ')}}: ${e instanceof CheckpointCorruptError ? e.reason : (e as Error).message}`
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
