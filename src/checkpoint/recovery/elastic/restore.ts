import type { DomainDesc, StorageOrder } from '../../../domains/desc.js'
import type { Domain } from '../../../domains/domain.js'
import { arrayOver, DTYPES, dtypeOf, type AnyTypedArray, type DType } from '../../../domains/dtype.js'
import { CheckpointCorruptError, CheckpointMismatchError, errorRecord, ReplayDivergenceError, reviveError, type ErrorRecord } from '../../../errors.js'
import type { Communicator } from '../../../routing/communicator.js'
import type { EntryRecord, RankFileHeader } from '../../format/rank-file.js'
import { decodeLight, digestOf } from '../../light/codec.js'
import type { RestoreOutcome, SkeletonState } from '../../skeleton-hooks.js'
import type { SkipReason } from '../line.js'
import { RecoveryLineDamagedError, type ElasticLine } from './line.js'
import { boxLayout, planRanges, slicePieces, type Layout, type Piece, type RangePlan } from './slices.js'
import { verifyCollectively, type Holding } from './verify.js'

/** What an elastic restore read, on one rank. */
export interface ElasticFigures {
  /** The rank count of the checkpoint. */
  fromRanks: number
  /** Payload bytes read to restore: the cells of this rank's boxes and the light values (and any small hole read through). */
  bytesRead: number
  /** Bytes of the cells and light values this rank restores. */
  bytesNeeded: number
  /** Preambles and headers read. */
  headerBytes: number
  /** Bytes read only to verify checksums: parts of old files no new rank needs. */
  verifyBytes: number
}

/** An array to fill: a domain's memory or a registered array, and where the entry's box sits in it. */
interface Target {
  name: string
  box: DomainDesc
  data: AnyTypedArray
  layout: Layout
  order: StorageOrder
  dtype: DType
  /** Values per cell (a domain's `components`; 1 for a registered array). */
  components: number
}

/**
 * Restores a rank of a run on P' ranks from a checkpoint of P ranks: each
 * entry's box for this rank (from the program's partition for P', or a
 * registered array's own box) is cut out of every old rank's entry that
 * intersects it (slicePieces), only those byte ranges are read (planRanges,
 * positioned reads of the source), the ranks verify every old payload's
 * checksum together (verifyCollectively), and the runs are copied in place.
 * Light values equal on every old rank carry over; one that differs needs a
 * merge rule. Collective: every rank calls it at the recovery step, and any
 * refusal or damage is thrown on every rank alike (damage as
 * RecoveryLineDamagedError, which passes the checkpoint over).
 *
 * ```ts
 * const { outcome, figures } = await restoreElastic(state, line, comm)
 * ```
 */
export async function restoreElastic(state: SkeletonState, line: ElasticLine, comm: Communicator): Promise<{ outcome: RestoreOutcome; figures: ElasticFigures }> {
  const plan = await agreeOnPlan(state, line, comm)
  const reads = rangesToRead(line, plan)
  const { buffers, bytesRead } = await readRanges(line, reads, comm)
  const verifyBytes = await verifyTogether(line, reads, buffers, comm)
  copyInPlace(line, reads, buffers)
  await agree(comm, settle(() => restoreLight(state, line, plan.light, reads.byRank, reads.plans, buffers, comm.rank, comm.size)))
  const { targets, light } = plan
  const bytesNeeded =
    targets.reduce((n, t) => n + t.box.volume * t.components * DTYPES[t.dtype].BYTES_PER_ELEMENT, 0) + light.reduce((n, l) => n + l.reduce((m, e) => m + e.length, 0), 0)
  return {
    outcome: { reroute: state.mode === 'border', read: plan.read, write: plan.write },
    figures: { fromRanks: line.oldSize, bytesRead, bytesNeeded, headerBytes: line.source.counters.headerBytes, verifyBytes },
  }
}

/** What this rank restores (see planTargets). */
type RestorePlan = ReturnType<typeof planTargets>

/** Per old rank: the pieces and light entries to read, their byte ranges, and the ranges read straight into a target. */
interface RangesToRead {
  byRank: Piece[][]
  plans: RangePlan[]
  direct: (Uint8Array | undefined)[][]
  targetOf: Map<string, Target>
}

/** Run `f`; its error as plain data (for `agree`), or undefined. */
function settle(f: () => void): ErrorRecord | undefined {
  try {
    f()
    return undefined
  } catch (e) {
    return errorRecord(e)
  }
}

/**
 * 1. Plan (local): the position and replay checks, then this rank's
 * targets and the pieces of old files they need. Every refusal is agreed,
 * so that no rank waits alone in a later collective.
 */
async function agreeOnPlan(state: SkeletonState, line: ElasticLine, comm: Communicator): Promise<RestorePlan> {
  let plan: RestorePlan | undefined
  const failure = settle(() => {
    checkPosition(state, line.headers[0], line.seq)
    checkReplayAcross(state, line.headers)
    plan = planTargets(state, line, comm.rank)
  })
  await agree(comm, failure)
  return plan!
}

/**
 * 2a. The byte ranges of every old file this rank needs (pieces that touch
 * read as one); a range that is one whole run of a target is read straight
 * into the target's memory.
 */
function rangesToRead({ oldSize }: ElasticLine, { targets, pieces, light }: RestorePlan): RangesToRead {
  const byRank = Array.from({ length: oldSize }, (_, r) => {
    const list = [...pieces[r]]
    for (const rec of light[r]) list.push({ rank: r, entry: rec.name, fileOffset: rec.offset, elements: rec.length, target: -1 })
    return list
  })
  const dtypeOfEntry = new Map<string, DType>(targets.map((t) => [t.name, t.dtype]))
  const bpe = (p: Piece) => (p.target < 0 ? 1 : DTYPES[dtypeOfEntry.get(p.entry)!].BYTES_PER_ELEMENT)
  const plans = byRank.map((list) => planRanges(list, bpe))
  const targetOf = new Map(targets.map((t) => [t.name, t]))
  const direct = plans.map((p, r) => {
    const into: (Uint8Array | undefined)[] = new Array(p.ranges.length).fill(undefined)
    const pieceCount = new Array<number>(p.ranges.length).fill(0)
    for (const a of p.at) pieceCount[a.range]++
    byRank[r].forEach((piece, i) => {
      const { range } = p.at[i]
      if (piece.target < 0 || pieceCount[range] !== 1) return
      const t = targetOf.get(piece.entry)!
      const bpe = DTYPES[t.dtype].BYTES_PER_ELEMENT
      if (piece.elements * bpe !== p.ranges[range].length) return
      into[range] = new Uint8Array(t.data.buffer, t.data.byteOffset + piece.target * bpe, piece.elements * bpe)
    })
    return into
  })
  return { byRank, plans, direct, targetOf }
}

/**
 * 2b. Read those ranges (collective when the old files are spread over the
 * ranks' directories: each rank serves the files it holds). A damaged file
 * found on any rank passes the line over on every rank.
 */
async function readRanges(line: ElasticLine, { plans, direct }: RangesToRead, comm: Communicator): Promise<{ buffers: Uint8Array[][]; bytesRead: number }> {
  const { seq, source } = line
  const buffers: Uint8Array[][] = []
  let failure: ErrorRecord | undefined
  let damage: SkipReason | undefined
  let bytesRead = 0
  try {
    buffers.push(...(await source.readAll(seq, plans.map((p, r) => ({ dataStart: line.dataStarts[r], ranges: p.ranges, into: direct[r] })))))
    for (const p of plans) for (const g of p.ranges) bytesRead += g.length
  } catch (e) {
    if (!(e instanceof CheckpointCorruptError)) failure = errorRecord(e)
    else damage = { seq, rank: comm.rank, file: e.file, reason: e.reason }
  }
  await agree(comm, failure)
  const damaged = (await comm.allgather(damage)).filter((d): d is SkipReason => d !== undefined)
  if (damaged.length > 0) throw new RecoveryLineDamagedError(seq, damaged)
  return { buffers, bytesRead }
}

/** 3. Every old payload against its checksum, together (verifyCollectively); the bytes this rank read only for that. */
async function verifyTogether(line: ElasticLine, { plans }: RangesToRead, buffers: readonly Uint8Array[][], comm: Communicator): Promise<number> {
  const holdings: Holding[] = []
  plans.forEach((p, r) => p.ranges.forEach((g, i) => holdings.push({ rank: r, entry: p.entries[i], offset: g.offset, bytes: buffers[r][i] })))
  const { problems, extraBytes } = await verifyCollectively(comm, line, holdings)
  if (problems.length > 0) throw new RecoveryLineDamagedError(line.seq, problems)
  return extraBytes
}

/** 4. Copy the runs in place (those read straight into place are there already); the light values follow. */
function copyInPlace({ oldSize }: ElasticLine, { byRank, plans, direct, targetOf }: RangesToRead, buffers: readonly Uint8Array[][]): void {
  for (let r = 0; r < oldSize; r++) {
    const list = byRank[r]
    const at = plans[r].at
    for (let i = 0; i < list.length; i++) {
      const p = list[i]
      if (p.target < 0 || direct[r][at[i].range] !== undefined) continue
      const t = targetOf.get(p.entry)!
      const buf = buffers[r][at[i].range]
      t.data.set(arrayOver(t.dtype, buf.buffer, buf.byteOffset + at[i].within, p.elements) as never, p.target)
    }
  }
}

/** Throw the first rank's failure on every rank (collective). */
async function agree(comm: Communicator, failure: ErrorRecord | undefined): Promise<void> {
  const first = (await comm.allgather(failure)).find((f) => f !== undefined)
  if (first) throw reviveError(first)
}

function checkPosition(state: SkeletonState, h: RankFileHeader, seq: number): void {
  if (h.skeleton !== state.index || h.step !== state.step) {
    throw new ReplayDivergenceError('the replay position', `checkpoint ${seq} holds skeleton ${h.skeleton} step ${h.step}, but replay reached skeleton ${state.index} step ${state.step}`)
  }
}

/**
 * Replay must rebuild the iterator and the watched values: checked against
 * the digests every old rank recorded alike. A digest that differs between
 * old ranks belongs to a per-rank value, which another rank count cannot
 * reproduce: it is not checked.
 */
function checkReplayAcross(state: SkeletonState, headers: readonly RankFileHeader[]): void {
  const common = (key: string): string | undefined => {
    const d = headers[0].digests[key]
    return headers.every((h) => h.digests[key] === d) ? d : undefined
  }
  const it = common('iterator')
  if (it !== undefined && it !== digestOf(state.it, undefined, 'iterator')) throw new ReplayDivergenceError('the iterator', 'digest differs')
  for (const w of state.registry.watched.values()) {
    const want = common(`watch:${w.name}`)
    if (want !== undefined && want !== digestOf(w.get(), w.serializer, w.name)) {
      throw new ReplayDivergenceError(`watched value "${w.name}"`, 'its digest differs after replay')
    }
  }
}

/** This rank's targets and, per old rank, the pieces of them it holds and the light entries to read. */
function planTargets(state: SkeletonState, line: ElasticLine, rank: number) {
  const { headers, seq, oldSize } = line
  const entryOf = (r: number, name: string) => headers[r].entries.find((e) => e.name === name)
  const present = (name: string) => headers.every((_, r) => entryOf(r, name) !== undefined)
  const targets: Target[] = []
  const domainTarget = (name: string, d: Domain, box: DomainDesc) => {
    if (!d.box.contains(box)) throw new CheckpointMismatchError(`elastic restore: the box ${box} of entry "${name}" lies outside this rank's domain ${d.box}`)
    targets.push({ name, box, data: d.data, layout: { strides: d.strides, offset: d.offset }, order: d.order, dtype: d.dtype, components: d.components })
  }
  const reg = state.registry
  // The entries' boxes, as the committer chose them on the old ranks, now for this rank.
  const read = reg.includes('read') ? requirePresent(present('read'), 'read', seq) : present('read')
  if (read) {
    const box = state.mode === 'circulation' && state.next ? state.next.needed[rank] : state.partition.possessed[rank]
    domainTarget('read', state.write, box)
  }
  const write = present('write')
  if (write) domainTarget('write', state.read, state.partition.possessed[rank].intersect(state.read.box))
  for (const h of reg.heavy.values()) {
    requirePresent(present(h.name), h.name, seq)
    if (!h.box) {
      throw new CheckpointMismatchError(
        `cannot resume checkpoint ${seq}, taken on ${oldSize} ranks, on ${state.partition.possessed.length}: "${h.name}" (skeleton ${state.index}) is an array registered without its global box: register it with { box } to make it elastic`,
      )
    }
    targets.push({ name: h.name, box: h.box, data: h.array, layout: boxLayout(h.box, h.order), order: h.order, dtype: dtypeOf(h.array), components: 1 })
  }
  const pieces: Piece[][] = Array.from({ length: oldSize }, () => [])
  for (const t of targets) {
    const olds = headers.map((_, r) => ({ rank: r, record: entryOf(r, t.name)! }))
    for (const o of olds) {
      if (o.record.kind !== 'heavy' || (o.record.dtype ?? 'uint8') !== t.dtype) {
        throw new CheckpointMismatchError(`checkpoint entry "${t.name}" of rank ${o.rank} holds ${o.record.dtype ?? o.record.kind} values, the program restores ${t.dtype}`)
      }
    }
    const { pieces: ps, uncovered } = slicePieces(t.box, t.layout, t.order, olds, DTYPES[t.dtype].BYTES_PER_ELEMENT)
    if (uncovered.length > 0) {
      throw new CheckpointMismatchError(
        `elastic restore of checkpoint ${seq}: cells ${uncovered.map(String).join(', ')} of entry "${t.name}" are in no old rank's box (the partition for this rank count covers cells the old one did not)`,
      )
    }
    for (const p of ps) pieces[p.rank].push(p)
  }
  const light: EntryRecord[][] = headers.map((_, r) =>
    [...reg.light.values()].map((l) => {
      const e = entryOf(r, l.name)
      requirePresent(e !== undefined, l.name, seq)
      return e!
    }),
  )
  return { targets, pieces, light, read, write }
}

/** Light values: the merge rule when there is one; otherwise equal on every old rank → that value, or a refusal naming the value. */
function restoreLight(
  state: SkeletonState,
  line: ElasticLine,
  light: EntryRecord[][],
  byRank: Piece[][],
  plans: RangePlan[],
  buffers: Uint8Array[][],
  rank: number,
  size: number,
): void {
  const regs = [...state.registry.light.values()]
  regs.forEach((reg, k) => {
    const values = light.map((recs, r) => {
      const i = byRank[r].findIndex((p) => p.target < 0 && p.entry === recs[k].name)
      const { range, within } = plans[r].at[i]
      return decodeLight(buffers[r][range].subarray(within, within + recs[k].length), reg.serializer)
    })
    // A merge rule, when the program gives one, is how the value crosses rank counts, even when the old values agree.
    if (reg.merge) {
      reg.cell.value = reg.merge(values, { rank, size, oldSize: line.oldSize })
      return
    }
    const digests = values.map((v) => digestOf(v, reg.serializer, reg.name))
    if (digests.every((d) => d === digests[0])) {
      reg.cell.value = values[0]
    } else {
      throw new CheckpointMismatchError(
        `cannot resume checkpoint ${line.seq}, taken on ${line.oldSize} ranks, on ${size}: the light value "${reg.name}" (skeleton ${state.index}) differs between the old ranks; ` +
          `give it a merge rule (value(name, initial, { merge })) to make it elastic`,
      )
    }
  })
}

function requirePresent(ok: boolean, name: string, seq: number): true {
  if (!ok) throw new CheckpointMismatchError(`checkpoint ${seq} has no entry "${name}" on every rank, which this program registers; it was written by another version of the program`)
  return true
}
