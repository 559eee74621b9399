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
  const { seq, source, headers, dataStarts } = line
  const me = comm.rank
  // Entry-relative intervals, as plain numbers: [old rank, entry index, from, to].
  const index = headers.map((h) => new Map(h.entries.map((e, i) => [e.name, i])))
  const mine: number[] = []
  for (const h of holdings) {
    const e = index[h.rank].get(h.entry)!
    const rec = headers[h.rank].entries[e]
    const from = h.offset - rec.offset
    mine.push(h.rank, e, from, from + h.bytes.byteLength)
  }
  const all = await comm.allgather(mine)

  // For each (old rank, entry): the cuts, and who computes each segment's CRC.
  const segments = new Map<string, { cuts: number[]; holder: Int32Array }>()
  const keyOf = (r: number, e: number) => `${r}:${e}`
  const intervals = new Map<string, [number, number, number][]>()
  all.forEach((list, q) => {
    for (let k = 0; k < list.length; k += 4) {
      const key = keyOf(list[k], list[k + 1])
      let l = intervals.get(key)
      if (!l) intervals.set(key, (l = []))
      l.push([list[k + 2], list[k + 3], q])
    }
  })
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
      const assignee = source.homeOf?.(r) ?? (r + e) % comm.size
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

  // Read the unneeded parts assigned to this rank. A file that cannot be read
  // is reported with the CRCs (entry -1), so that every rank learns it at once.
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

  // CRCs of the segments this rank computes: [old rank, entry, segment, crc].
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
  const gathered = await comm.allgather(crcs)
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
  return { problems, extraBytes }
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
