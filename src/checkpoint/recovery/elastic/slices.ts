import { DomainDesc, type StorageOrder } from '../../../domains/desc.js'
import { forEachRunPair } from '../../../domains/domain.js'
import type { BoxRecord, EntryRecord } from '../../format/rank-file.js'
import type { ByteRange } from './source.js'

/** Where an array's cells are: flat index of cell x = offset + Σ x[d]·strides[d] (the fastest stride is the values per cell). */
export interface Layout {
  strides: readonly number[]
  offset: number
}

/**
 * The layout of an array holding exactly the cells of `box` in storage order
 * `order`, `components` values each — a domain's over its allocated box, a
 * payload over its entry's box.
 *
 * ```ts
 * boxLayout(DomainDesc.of([2, 0], [4, 3]), 'C')   // { strides: [3, 1], offset: -6 }
 * ```
 */
export function boxLayout(box: DomainDesc, order: StorageOrder, components = 1): Layout {
  const n = box.dims
  const strides = new Array<number>(n).fill(0)
  let s = components
  for (let k = 0; k < n; k++) {
    const d = order === 'C' ? n - 1 - k : k
    strides[d] = s
    s *= box.extent(d)
  }
  let offset = 0
  for (let d = 0; d < n; d++) offset -= box.lower[d] * strides[d]
  return { strides, offset }
}

/** `a` minus `b`, as disjoint boxes (at most two per dimension). */
export function subtractBox<N extends number>(a: DomainDesc<N>, b: DomainDesc<N>): DomainDesc<N>[] {
  const cut = a.intersect(b)
  if (cut.isEmpty) return a.isEmpty ? [] : [a]
  const out: DomainDesc<N>[] = []
  const lower = [...a.lower]
  const upper = [...a.upper]
  for (let d = 0; d < a.dims; d++) {
    if (lower[d] < cut.lower[d]) {
      out.push(new DomainDesc<N>(lower, upper.map((u, k) => (k === d ? cut.lower[d] : u))))
      lower[d] = cut.lower[d]
    }
    if (upper[d] > cut.upper[d]) {
      out.push(new DomainDesc<N>(lower.map((l, k) => (k === d ? cut.upper[d] : l)), upper))
      upper[d] = cut.upper[d]
    }
  }
  return out
}

/** One old rank's entry of the name being restored. */
export interface OldEntry {
  rank: number
  record: EntryRecord
}

/** A run of cells to copy: `elements` values from an old rank's payload to the target array. */
export interface Piece {
  rank: number
  entry: string
  /** Byte offset of the run in the old file's data section. */
  fileOffset: number
  elements: number
  /** Flat index of the run's first cell in the target array. */
  target: number
}

/**
 * The runs of `target` (laid out as `layout` in `order`) found in the old
 * ranks' entries, taking each cell from the first old rank that holds it, and
 * the cells no old entry holds. The same box arithmetic as a routing plan:
 * the cells old rank p gives are `box_p ∩ target`, minus what an earlier rank
 * gave already (boxes of different ranks overlap only in circulation, where
 * several ranks may hold a copy of the same block).
 *
 * ```ts
 * const { pieces, uncovered } = slicePieces(newBox, boxLayout(domain.box, 'C'), 'C', olds, 8)
 * ```
 */
export function slicePieces(
  target: DomainDesc,
  layout: Layout,
  order: StorageOrder,
  olds: readonly OldEntry[],
  bytesPerElement: number,
): { pieces: Piece[]; uncovered: DomainDesc[] } {
  const pieces: Piece[] = []
  // Old payloads hold whole cells of as many values as the target's.
  const perCell = layout.strides[order === 'C' ? target.dims - 1 : 0]
  let remaining: DomainDesc[] = target.isEmpty ? [] : [target]
  for (const { rank, record } of olds) {
    if (remaining.length === 0) break
    if (!record.box) continue
    const box = boxOf(record.box)
    if (box.dims !== target.dims || box.isEmpty) continue
    const src = boxLayout(box, order, perCell)
    const next: DomainDesc[] = []
    for (const r of remaining) {
      const cut = r.intersect(box)
      if (cut.isEmpty) {
        next.push(r)
        continue
      }
      forEachRunPair(src, layout, cut, order, (s, t, len) => {
        pieces.push({ rank, entry: record.name, fileOffset: record.offset + s * bytesPerElement, elements: len, target: t })
      })
      next.push(...subtractBox(r, box))
    }
    remaining = next
  }
  return { pieces, uncovered: remaining }
}

/** The byte ranges to read from one old rank, and where each piece sits in them. */
export interface RangePlan {
  ranges: ByteRange[]
  /** The entry each range lies in. */
  entries: string[]
  /** For each piece (in the order given): the range holding it and its byte offset inside that range. */
  at: { range: number; within: number }[]
}

/**
 * Groups one old rank's pieces into byte ranges to read: pieces that touch
 * are read as one range, and a small hole between two long pieces of the
 * same entry is read through rather than split (at most 1/32 of the shorter
 * side, and never more than 64 KiB), so a strided box costs few reads and
 * almost no extra bytes. Ranges never cross from one entry to the next.
 *
 * ```ts
 * const plan = planRanges(piecesOfRank2, 8)
 * const buffers = await source.readRanges(seq, 2, plan.ranges)
 * ```
 */
export function planRanges(pieces: readonly Piece[], bytesPerElement: (p: Piece) => number): RangePlan {
  const order = pieces.map((_, i) => i).sort((a, b) => pieces[a].fileOffset - pieces[b].fileOffset)
  const ranges: ByteRange[] = []
  const entries: string[] = []
  const at: RangePlan['at'] = new Array(pieces.length)
  let lastPieceBytes = 0
  for (const i of order) {
    const p = pieces[i]
    const bytes = p.elements * bytesPerElement(p)
    const cur = ranges[ranges.length - 1]
    if (cur && entries[entries.length - 1] === p.entry) {
      const end = cur.offset + cur.length
      const gap = p.fileOffset - end
      if (p.fileOffset < end) {
        // Overlapping copies (the same cells wanted twice): read once.
        cur.length = Math.max(end, p.fileOffset + bytes) - cur.offset
        at[i] = { range: ranges.length - 1, within: p.fileOffset - cur.offset }
        lastPieceBytes = bytes
        continue
      }
      if (gap === 0 || (gap <= 65536 && gap * 32 <= Math.min(lastPieceBytes, bytes))) {
        cur.length = p.fileOffset + bytes - cur.offset
        at[i] = { range: ranges.length - 1, within: p.fileOffset - cur.offset }
        lastPieceBytes = bytes
        continue
      }
    }
    ranges.push({ offset: p.fileOffset, length: bytes })
    entries.push(p.entry)
    at[i] = { range: ranges.length - 1, within: 0 }
    lastPieceBytes = bytes
  }
  return { ranges, entries, at }
}

/** A box of a rank file's header as a DomainDesc. */
export function boxOf(b: BoxRecord): DomainDesc {
  return DomainDesc.of(b.lower, b.upper)
}
