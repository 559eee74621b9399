import { crc32 } from 'node:zlib'
import type { Communicator } from '../../../routing/communicator.js'
import type { SkipReason } from '../line.js'
import { crc32Combine } from './crc-combine.js'
import type { ElasticLine } from './line.js'

/** Bytes this rank read from an old rank's file: `bytes` start at `offset` of its data section, inside entry `entry`. */
export interface Holding {
  rank: number
  entry: string
  offset: number
  bytes: Uint8Array
}

/** What a collective verification found. */
export interface Verification {
  /** Damaged files of the line (empty: every payload of every old file matches its checksum). */
  problems: SkipReason[]
  /** Bytes this rank read only to verify (parts of old files no new rank needs). */
  extraBytes: number
}

/**
 * Checks every payload of every old rank file against the CRC its header
 * records, although no rank read a whole file: the ranks tell each other
 * which byte ranges they hold, cut each payload at every range boundary, and
 * the lowest rank holding a segment computes its CRC; the CRCs of the
 * segments, combined in order (crc32Combine), must give the payload's. Bytes
 * no rank needs are read by one rank for this purpose alone. Collective; every
 * rank gets the same answer.
 *
 * ```ts
 * const { problems } = await verifyCollectively(comm, line, holdings)
 * if (problems.length > 0) throw new RecoveryLineDamaged(seq, problems)
 * ```
 */
export async function verifyCollectively(comm: Communicator, line: ElasticLine, holdings: readonly Holding[]): Promise<Verification> {
  const index = line.headers.map((h) => new Map(h.entries.map((e, i) => [e.name, i])))
  const intervals = await exchangeHoldings(comm, line, index, holdings)
  const { segments, extraRanges } = planSegments(line, intervals, comm.rank, comm.size)
  const { held, unreadable, extraBytes } = await readUnneeded(line, extraRanges, holdings)
  // One allgather for all: the files this rank could not read, then the CRCs of the segments it computes.
  const gathered = await comm.allgather([...unreadable, ...segmentCrcs(line, index, segments, held, comm.rank)])
  return { problems: judge(line, segments, gathered), extraBytes }
}

/** Each old payload's segments (cut at every boundary of a range some rank holds) and the rank computing each one's CRC. */
interface Segments {
  cuts: number[]
  holder: Int32Array
}

/** The key of old rank `r`'s entry `e` (its index in the header). */
const keyOf = (r: number, e: number) => `${r}:${e}`

/**
 * The ranks tell each other which byte ranges of which old payloads they
 * hold (one allgather, plain numbers): for each old (rank, entry), the
 * entry-relative intervals held, each with the rank holding it.
 */
async function exchangeHoldings(
  comm: Communicator,
  { headers }: ElasticLine,
  index: readonly Map<string, number>[],
  holdings: readonly Holding[],
): Promise<Map<string, [number, number, number][]>> {
  // Entry-relative intervals, as plain numbers: [old rank, entry index, from, to].
  const mine: number[] = []
  for (const h of holdings) {
    const e = index[h.rank].get(h.entry)!
    const rec = headers[h.rank].entries[e]
    const from = h.offset - rec.offset
    mine.push(h.rank, e, from, from + h.bytes.byteLength)
  }
  const all = await comm.allgather(mine)
  const intervals = new Map<string, [number, number, number][]>()
  all.forEach((list, q) => {
    for (let k = 0; k < list.length; k += 4) {
      const key = keyOf(list[k], list[k + 1])
      let l = intervals.get(key)
      if (!l) intervals.set(key, (l = []))
      l.push([list[k + 2], list[k + 3], q])
    }
  })
  return intervals
}

/**
 * Cut each old payload at every boundary of a held range; the lowest rank
 * holding a segment computes its CRC. A segment nobody holds goes to one
 * rank (the file's home when it has one, otherwise spread over the ranks):
 * `extraRanges`, this rank's share of them by old rank. The same plan on
 * every rank (it is made from the same gathered data).
 */
function planSegments(
  { headers, source }: ElasticLine,
  intervals: ReadonlyMap<string, [number, number, number][]>,
  me: number,
  size: number,
): { segments: Map<string, Segments>; extraRanges: Map<number, { e: number; from: number; to: number }[]> } {
  const segments = new Map<string, Segments>()
  const extraRanges = new Map<number, { e: number; from: number; to: number }[]>()
  headers.forEach((h, r) => {
    h.entries.forEach((rec, e) => {
      const key = keyOf(r, e)
      const list = intervals.get(key) ?? []
      const cutSet = new Set<number>([0, rec.length])
      for (const [a, b] of list) cutSet.add(a).add(b)
      const cuts = [...cutSet].sort((x, y) => x - y)
      const holder = new Int32Array(Math.max(0, cuts.length - 1)).fill(-1)
      for (const [a, b, q] of list) {
        for (let s = lowerBound(cuts, a); s < cuts.length - 1 && cuts[s] < b; s++) {
          if (holder[s] < 0 || q < holder[s]) holder[s] = q
        }
      }
      // What nobody read is read by one rank: the file's home when it has one, otherwise spread over the ranks.
      const assignee = source.homeOf?.(r) ?? (r + e) % size
      for (let s = 0; s < holder.length; s++) {
        if (holder[s] >= 0) continue
        holder[s] = assignee
        if (assignee === me) {
          let l = extraRanges.get(r)
          if (!l) extraRanges.set(r, (l = []))
          l.push({ e, from: cuts[s], to: cuts[s + 1] })
        }
      }
      segments.set(key, { cuts, holder })
    })
  })
  return { segments, extraRanges }
}

/**
 * Read the parts no rank needs that fell to this rank, beside what it holds.
 * A file that cannot be read is reported with the CRCs (entry -1), so that
 * every rank learns it at once.
 */
async function readUnneeded(
  { seq, source, headers, dataStarts }: ElasticLine,
  extraRanges: ReadonlyMap<number, { e: number; from: number; to: number }[]>,
  holdings: readonly Holding[],
): Promise<{ held: Holding[]; unreadable: number[]; extraBytes: number }> {
  const held: Holding[] = [...holdings]
  const crcs: number[] = []
  let extraBytes = 0
  for (const [r, list] of extraRanges) {
    const recs = headers[r].entries
    let bufs: Uint8Array[]
    try {
      bufs = await source.readRanges(
        seq,
        r,
        dataStarts[r],
        list.map((x) => ({ offset: recs[x.e].offset + x.from, length: x.to - x.from })),
      )
    } catch {
      // Reported to every rank with the CRCs below: the line is then damaged everywhere alike.
      crcs.push(r, -1, 0, 0)
      continue
    }
    list.forEach((x, i) => {
      held.push({ rank: r, entry: recs[x.e].name, offset: recs[x.e].offset + x.from, bytes: bufs[i] })
      extraBytes += x.to - x.from
    })
  }
  return { held, unreadable: crcs, extraBytes }
}

/** The CRCs of the segments this rank computes, each once, as plain numbers: [old rank, entry, segment, crc]. */
function segmentCrcs(
  { headers }: ElasticLine,
  index: readonly Map<string, number>[],
  segments: ReadonlyMap<string, Segments>,
  held: readonly Holding[],
  me: number,
): number[] {
  const crcs: number[] = []
  const done = new Set<string>()
  for (const h of held) {
    const e = index[h.rank].get(h.entry)!
    const key = keyOf(h.rank, e)
    const { cuts, holder } = segments.get(key)!
    const from = h.offset - headers[h.rank].entries[e].offset
    const to = from + h.bytes.byteLength
    for (let s = lowerBound(cuts, from); s < cuts.length - 1 && cuts[s + 1] <= to; s++) {
      if (holder[s] !== me || done.has(`${key}:${s}`)) continue
      done.add(`${key}:${s}`)
      crcs.push(h.rank, e, s, crc32(h.bytes.subarray(cuts[s] - from, cuts[s + 1] - from)) >>> 0)
    }
  }
  return crcs
}

/**
 * Every rank's CRCs together: the files some rank could not read, then each
 * payload whose segments' CRCs, combined in order, do not give the one its
 * header records (or that misses a segment's).
 */
function judge({ seq, source, headers }: ElasticLine, segments: ReadonlyMap<string, Segments>, gathered: readonly number[][]): SkipReason[] {
  const found = new Map<string, number>()
  for (const list of gathered) for (let k = 0; k < list.length; k += 4) found.set(`${list[k]}:${list[k + 1]}:${list[k + 2]}`, list[k + 3])
  const problems: SkipReason[] = []
  const unreadable = new Set<number>()
  for (const list of gathered) for (let k = 0; k < list.length; k += 4) if (list[k + 1] === -1) unreadable.add(list[k])
  for (const r of unreadable) problems.push({ seq, rank: r, file: source.nameOf(seq, r), reason: 'the file could not be read to verify its checksums' })
  headers.forEach((h, r) => {
    if (unreadable.has(r)) return
    h.entries.forEach((rec, e) => {
      const { cuts } = segments.get(keyOf(r, e))!
      let crc = 0
      for (let s = 0; s < cuts.length - 1; s++) {
        const part = found.get(`${r}:${e}:${s}`)
        if (part === undefined) {
          crc = -1
          break
        }
        crc = crc32Combine(crc, part, cuts[s + 1] - cuts[s])
      }
      if (crc !== rec.checksum) {
        problems.push({ seq, rank: r, file: source.nameOf(seq, r), reason: `checksum mismatch in entry "${rec.name}" (stored 0x${rec.checksum.toString(16).padStart(8, '0')})` })
      }
    })
  })
  return problems
}

/** The index of the first element of sorted `xs` that is ≥ `x`. */
function lowerBound(xs: readonly number[], x: number): number {
  let lo = 0
  let hi = xs.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (xs[mid] < x) lo = mid + 1
    else hi = mid
  }
  return lo
}
