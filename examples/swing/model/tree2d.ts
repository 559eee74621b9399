import { type Csr, type PriceLattice, latticeDrift, spotsFromFactor } from './lattice.js'
import { type Drift, type OuTree, TREE_DROP, TreeLattice } from './tree.js'

interface Slot {
  k: number
  used: number
  /** Full-size buffers, reused. */
  rowPtr: Int32Array
  col: Int32Array
  p: Float64Array
  /** Views of the part filled for date k. */
  csr: Csr
}

/**
 * The `g2d` price lattice: the product of two independent OU trees (same dates and
 * sub-steps). Node n of date k is the pair (n1, n2) with n = n1·n2count(k) + n2,
 * factor 1 major; x = x1 + x2, S = F_k·exp((x1 + x2) − c_k). With drift `ou`
 * (the default) c_k = c1_k + c2_k, the two trees' closed forms. With `lattice`,
 * c_k = log E[e^{x1 + x2}] under the product lattice's own marginals: the sum of
 * the two trees' lattice drifts when no product of transition entries is dropped
 * (then the product's marginals are the products of the factors'), otherwise
 * (tiny entries, many sub-steps) computed on the product itself, one pass over
 * all its transitions.
 * Transition probabilities are the products p1·p2 of the two trees' date
 * transitions, in (factor-1 successor, factor-2 successor) order, which is
 * ascending in n'; products ≤ 1e-9 are dropped like the trees' own entries.
 *
 * The product transitions of a date are large (9 per node and sub-step), so they
 * are built on demand into two reused buffers: transitions(k) stays valid until
 * two other dates have been asked for.
 */
export class ProductTreeLattice implements PriceLattice {
  readonly dates: number
  readonly f1: TreeLattice
  readonly f2: TreeLattice
  readonly c: Float64Array
  private readonly spotArr: Float64Array[] = []
  private readonly slots: Slot[] = []
  private clock = 0

  constructor(tree1: OuTree, tree2: OuTree, forward: Float64Array, drift: Drift = 'ou') {
    if (tree1.N !== tree2.N || tree1.subSteps !== tree2.subSteps) throw new Error('product of trees with different dates')
    // With `lattice`, f1.c and f2.c are the factors' own lattice drifts.
    this.f1 = new TreeLattice(tree1, forward, drift)
    this.f2 = new TreeLattice(tree2, forward, drift)
    this.dates = tree1.N
    let maxRows = 0
    let maxNnz = 0
    for (let k = 0; k < tree1.N; k++) {
      maxRows = Math.max(maxRows, this.nodes(k))
      maxNnz = Math.max(maxNnz, this.f1.transitions(k).p.length * this.f2.transitions(k).p.length)
    }
    for (let i = 0; i < 2; i++) {
      const rowPtr = new Int32Array(maxRows + 1)
      const col = new Int32Array(maxNnz)
      const p = new Float64Array(maxNnz)
      this.slots.push({ k: -1, used: 0, rowPtr, col, p, csr: { rowPtr, col, p } })
    }
    if (drift === 'ou' || this.nothingDropped()) {
      this.c = new Float64Array(tree1.N + 1)
      for (let k = 0; k <= tree1.N; k++) this.c[k] = this.f1.c[k] + this.f2.c[k]
    } else {
      this.c = latticeDrift(this, (k) => this.xSums(k))
    }
    for (let k = 0; k < tree1.N; k++) this.spotArr.push(spotsFromFactor(forward[k], this.xSums(k), this.c[k]))
  }
  /**
   * Whether fill() keeps every product p1·p2 at every date: true when the smallest
   * entries of the two trees' transitions multiply to more than TREE_DROP
   * (floating-point multiplication is monotone, so every other product does too).
   */
  private nothingDropped(): boolean {
    for (let k = 0; k < this.dates; k++) {
      if (!(minEntry(this.f1.transitions(k).p) * minEntry(this.f2.transitions(k).p) > TREE_DROP)) return false
    }
    return true
  }
  /** x1 + x2 of every node of date k (factor 1 major), for the spots and the lattice drift. */
  private xSums(k: number): Float64Array {
    const x1 = this.f1.x(k)
    const x2 = this.f2.x(k)
    const x = new Float64Array(x1.length * x2.length)
    for (let i1 = 0; i1 < x1.length; i1++) {
      for (let i2 = 0; i2 < x2.length; i2++) x[i1 * x2.length + i2] = x1[i1] + x2[i2]
    }
    return x
  }
  nodes(k: number): number {
    return this.f1.nodes(k) * this.f2.nodes(k)
  }
  /** Node index of the pair (n1, n2) at date k. */
  index(k: number, n1: number, n2: number): number {
    return n1 * this.f2.nodes(k) + n2
  }
  /** Factor value x1 + x2 of node n at date k. */
  xAt(k: number, n: number): number {
    const w = this.f2.nodes(k)
    return this.f1.x(k)[Math.floor(n / w)] + this.f2.x(k)[n % w]
  }
  spot(k: number, n: number): number {
    return this.spotArr[k][n]
  }
  spots(k: number): Float64Array {
    return this.spotArr[k]
  }
  transitions(k: number): Csr {
    this.clock++
    for (const s of this.slots) {
      if (s.k === k) {
        s.used = this.clock
        return s.csr
      }
    }
    const slot = this.slots[0].used <= this.slots[1].used ? this.slots[0] : this.slots[1]
    slot.k = k
    slot.used = this.clock
    const nnz = this.fill(k, slot.rowPtr, slot.col, slot.p)
    // Views of the used part; the buffers themselves are reused by later fills.
    slot.csr = {
      rowPtr: slot.rowPtr.subarray(0, this.nodes(k) + 1),
      col: slot.col.subarray(0, nnz),
      p: slot.p.subarray(0, nnz),
    }
    return slot.csr
  }

  private fill(k: number, rowPtr: Int32Array, col: Int32Array, p: Float64Array): number {
    const a = this.f1.transitions(k)
    const b = this.f2.transitions(k)
    const nA = this.f1.nodes(k)
    const nB = this.f2.nodes(k)
    const wNext = this.f2.nodes(k + 1)
    let e = 0
    rowPtr[0] = 0
    for (let i1 = 0; i1 < nA; i1++) {
      for (let i2 = 0; i2 < nB; i2++) {
        for (let ea = a.rowPtr[i1]; ea < a.rowPtr[i1 + 1]; ea++) {
          const pa = a.p[ea]
          const base = a.col[ea] * wNext
          for (let eb = b.rowPtr[i2]; eb < b.rowPtr[i2 + 1]; eb++) {
            const q = pa * b.p[eb]
            if (q > TREE_DROP) {
              col[e] = base + b.col[eb]
              p[e] = q
              e++
            }
          }
        }
        rowPtr[i1 * nB + i2 + 1] = e
      }
    }
    return e
  }
}

function minEntry(p: Float64Array): number {
  let m = Infinity
  for (let e = 0; e < p.length; e++) if (p[e] < m) m = p[e]
  return m
}
