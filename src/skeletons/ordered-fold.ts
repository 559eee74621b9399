import { DomainDesc, type StorageOrder } from '../domains/desc.js'
import { forEachRun, type Domain } from '../domains/domain.js'
import { arrayOver, bytesOf, DTYPES, type NumericArray } from '../domains/dtype.js'
import type { Communicator } from '../routing/communicator.js'
import { FRAMEWORK_TAGS } from '../routing/tags.js'
import { InternalError } from '../errors.js'

/** Cells of the global array per band: rank 0 holds at most two bands of received cells. */
const BAND_CELLS = 1 << 20
const TAG_DATA = FRAMEWORK_TAGS.orderedFoldData
const TAG_ACK = FRAMEWORK_TAGS.orderedFoldAck
const TAG_RESULT = FRAMEWORK_TAGS.orderedFoldResult

/**
 * How rank 0 combines: `sum` adds every value in a tight loop, `fold` calls
 * the user's function on each value, `cells` on each whole cell with its
 * global coordinates (`cell` and `at` are reused arrays, valid during the call).
 */
export type Combine =
  | { kind: 'sum' }
  | { kind: 'fold'; step: (acc: number, value: number) => number }
  | { kind: 'cells'; step: (acc: number, cell: Float64Array, at: readonly number[]) => number }

/**
 * Fold the cells every rank possesses in `domain` (its `possessedBox`) in the
 * global storage order of the whole array, and give every rank the result.
 * The order is that of a serial loop over the global array (C: last index
 * fastest; F: first), whatever the decomposition — strips, a 2-D grid of
 * ranks, uneven boxes — so a floating-point sum has the same bits as that loop.
 * A cell of several components (`Domain.components`) gives its values in
 * order, or, with `cells`, all of them at once.
 *
 * Cost: a serial pass. Every possessed cell crosses once to rank 0, band by
 * band along the slowest dimension (about 2^20 cells a band; rank 0 holds at
 * most two bands of received cells), and rank 0 folds them one by one while
 * the next band arrives. For results and checksums, not for every superstep.
 *
 * ```ts
 * const total = await foldInStorageOrder(comm, grid, 0, { kind: 'sum' })
 * ```
 */
export async function foldInStorageOrder(comm: Communicator, domain: Domain, initial: number, combine: Combine): Promise<number> {
  const { rank, size } = comm
  const mine = domain.possessedBox
  const boxes = (await comm.allgather(mine.isEmpty ? null : mine.toJSON())).map((b) => (b ? DomainDesc.of(b.lower, b.upper) : undefined))
  const nonEmpty = boxes.filter((b): b is DomainDesc => b !== undefined)
  if (nonEmpty.length === 0) return initial
  const global = nonEmpty.reduce((h, b) => h.hull(b))
  const order = domain.order
  const slow = order === 'C' ? 0 : global.dims - 1
  const perSlice = global.volume / global.extent(slow)
  const bandExtent = Math.max(1, Math.floor(BAND_CELLS / perSlice))
  const bands: DomainDesc[] = []
  for (let lo = global.lower[slow]; lo < global.upper[slow]; lo += bandExtent) {
    const lower = [...global.lower]
    const upper = [...global.upper]
    lower[slow] = lo
    upper[slow] = Math.min(lo + bandExtent, global.upper[slow])
    bands.push(DomainDesc.of(lower, upper))
  }

  if (rank !== 0) {
    let sentBefore = false
    for (const band of bands) {
      const piece = mine.intersect(band)
      if (piece.isEmpty) continue
      // One band in flight per rank: rank 0 acknowledges each piece as it takes it.
      if (sentBefore) (await comm.recv(0, TAG_ACK)).release()
      await comm.send(0, TAG_DATA, bytesOf(cellsOf(domain, piece)))
      sentBefore = true
    }
    if (sentBefore) (await comm.recv(0, TAG_ACK)).release()
    const m = await comm.recv(0, TAG_RESULT)
    const result = new Float64Array(m.bytes.slice().buffer)[0]
    m.release()
    return result
  }

  let acc = initial
  const ack = new Uint8Array(0)
  for (const band of bands) {
    const pieces: { box: DomainDesc; values: NumericArray }[] = []
    for (let q = 0; q < size; q++) {
      const b = boxes[q]
      const piece = b ? b.intersect(band) : undefined
      if (!piece || piece.isEmpty) continue
      if (q === 0) {
        pieces.push({ box: piece, values: cellsOf(domain, piece) })
        continue
      }
      const m = await comm.recv(q, TAG_DATA)
      const values = arrayOver(domain.dtype, m.bytes.slice().buffer, 0, piece.volume * domain.components)
      m.release()
      void comm.send(q, TAG_ACK, ack).catch(() => {}) // a failed transport fails the next recv anyway
      pieces.push({ box: piece, values })
    }
    acc = foldBand(band, order, domain.components, pieces, acc, combine)
  }
  const out = new Uint8Array(Float64Array.of(acc).buffer)
  await Promise.all([...Array(size - 1).keys()].map((i) => comm.send(i + 1, TAG_RESULT, out)))
  return acc
}

/** The cells of `piece` in storage order: a view when contiguous, else packed. */
function cellsOf(d: Domain, piece: DomainDesc): NumericArray {
  if (!d.box.contains(piece)) throw new InternalError(`possessed box ${piece} is outside the allocated box ${d.box}`) // the skeleton allocates every possessed box
  if (d.isContiguous(piece)) return d.view(piece)
  const out = new DTYPES[d.dtype](piece.volume * d.components) as NumericArray
  let pos = 0
  const src = d.data
  forEachRun(d.strides, d.offset, piece, d.order, (start, len) => {
    out.set(src.subarray(start, start + len) as never, pos)
    pos += len
  })
  return out
}

/**
 * Walk `band` line by line in storage order. On each line (all indices fixed
 * but the fastest) the pieces that cross it tile it; taking them by their
 * lower bound on the fastest dimension visits the line's cells in order, and
 * each piece's values are consumed in its own storage order — which is the
 * global order restricted to that piece. A cell is `perCell` values.
 */
function foldBand(band: DomainDesc, order: StorageOrder, perCell: number, pieces: { box: DomainDesc; values: NumericArray }[], acc: number, combine: Combine): number {
  const n = band.dims
  const fast = order === 'C' ? n - 1 : 0
  const outer = order === 'C' ? [...Array(n - 1).keys()] : [...Array(n).keys()].slice(1).reverse() // slowest first
  pieces.sort((a, b) => a.box.lower[fast] - b.box.lower[fast])
  const cursor = new Array<number>(pieces.length).fill(0)
  const at = outer.map((d) => band.lower[d])
  // The cell and coordinates handed to a `cells` step: reused, one pair per band.
  const cell = new Float64Array(perCell)
  const x = [...band.lower]
  for (;;) {
    for (let p = 0; p < pieces.length; p++) {
      const box = pieces[p].box
      let crosses = true
      for (let k = 0; k < outer.length && crosses; k++) crosses = at[k] >= box.lower[outer[k]] && at[k] < box.upper[outer[k]]
      if (!crosses) continue
      const v = pieces[p].values
      const from = cursor[p]
      const to = from + box.extent(fast) * perCell
      if (combine.kind === 'sum') for (let i = from; i < to; i++) acc += v[i] as number
      else if (combine.kind === 'fold') for (let i = from; i < to; i++) acc = combine.step(acc, v[i] as number)
      else {
        for (let k = 0; k < outer.length; k++) x[outer[k]] = at[k]
        let xf = box.lower[fast]
        for (let i = from; i < to; i += perCell) {
          for (let c = 0; c < perCell; c++) cell[c] = v[i + c] as number
          x[fast] = xf++
          acc = combine.step(acc, cell, x)
        }
      }
      cursor[p] = to
    }
    // Next line: the fastest of the outer dimensions moves first.
    let k = outer.length - 1
    for (; k >= 0; k--) {
      const d = outer[k]
      if (++at[k] < band.upper[d]) break
      at[k] = band.lower[d]
    }
    if (k < 0) return acc
  }
}
