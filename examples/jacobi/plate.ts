import { Domain2D, DomainDesc, splitPoint } from 'molotof'

/**
 * The Jacobi grid: an n×n interior (rows and columns 1..n) with a one-cell
 * boundary (rows/columns 0 and n+1). Interior rows are split in strips, one
 * per rank (uneven splits allowed); each rank needs one extra row above and
 * below its strip plus the boundary columns.
 */
export class Plate extends Domain2D {
  constructor(readonly n: number) {
    super({ order: 'C' })
  }

  possessed(rank: number, size: number): DomainDesc<2> {
    const lo = 1 + splitPoint(this.n, size, rank)
    const hi = 1 + splitPoint(this.n, size, rank + 1)
    return DomainDesc.of([lo, 1], [hi, this.n + 1])
  }

  needed(rank: number, size: number, step: number): DomainDesc<2> {
    const p = this.possessed(rank, size)
    if (p.isEmpty) return p
    return DomainDesc.of([p.lower[0] - 1, 0], [p.upper[0] + 1, this.n + 2])
  }
}

/** Reference boundary: the whole top row (corners included) is 1, every other boundary cell 0. */
export function setBoundary(d: Plate): void {
  const n = d.n
  const b = d.box
  for (let i = b.lower[0]; i < b.upper[0]; i++) {
    if (i === 0) {
      for (let j = 0; j <= n + 1; j++) d.put(0, j, 1)
    } else if (i === n + 1) {
      for (let j = 0; j <= n + 1; j++) d.put(i, j, 0)
    } else {
      d.put(i, 0, 0)
      d.put(i, n + 1, 0)
    }
  }
}
