import { ConfigError, InternalError } from '../errors.js'
import { formatSize } from '../util/bytes.js'
import { DomainDesc, type StorageOrder } from './desc.js'
import { arrayOver, DTYPES, plainAllocator, type BufferAllocator, type DType, type NumericArray } from './dtype.js'

/** Element types a domain may use (BigInt arrays cannot hold numbers). */
export type NumericDType = Exclude<DType, 'bigint64' | 'biguint64'>

/** How a domain stores its cells (constructor options of `Domain2D`, `Domain3D` and `Domain`). */
export interface DomainOptions {
  /** Element type of the backing array; `float64` by default. */
  dtype?: NumericDType
  /** `C` (last index fastest, the default) or `F` (first index fastest). */
  order?: StorageOrder
  /**
   * Keep the values of cells that stay inside the box when the box changes
   * (default true). Turn off for domains whose every needed cell is rewritten
   * each superstep, so a resize never copies.
   */
  preserveOnResize?: boolean
  /**
   * Values per cell (default 1): the 9 distributions of a D2Q9 lattice
   * Boltzmann cell, the 3 components of a velocity. They form an innermost
   * axis that is not a dimension of the boxes: halos, `expand` and routing
   * move whole cells, and memory is exactly cells × components. Component c
   * of cell x is at `index(x) + c`; the strides count values, so the fastest
   * axis's stride is `components`.
   */
  components?: number
  /**
   * Axes whose halos wrap around (a ring, a channel with periodic ends):
   * `true` for every axis, or one flag per axis. Along a periodic axis a
   * needed box may reach up to one period past the global box (the hull of
   * every rank's possessed box); those cells receive the values of the cells
   * one period away, from whichever rank possesses them (itself included).
   */
  periodic?: boolean | readonly boolean[]
}

/**
 * The data one rank holds of a distributed N-dimensional array: a typed array
 * covering the box this rank *needs*, addressed in global coordinates.
 *
 * Users subclass it and provide the two *partition methods*. They must be pure
 * functions of (rank, size, step) so that any rank can evaluate any other
 * rank's partition — that is how routing plans are computed without messages.
 *
 * ```ts
 * class Strip extends Domain<1> {
 *   constructor(readonly n: number) { super(1) }
 *   possessed(rank: number, size: number) { return DomainDesc.of([splitPoint(this.n, size, rank)], [splitPoint(this.n, size, rank + 1)]) }
 *   needed(rank: number, size: number) { return this.possessed(rank, size).expand(1).intersect(DomainDesc.of([0], [this.n])) }
 * }
 * ```
 *
 * The skeleton allocates the domain (`resize`) before the first superstep and
 * whenever the partition changes; hot loops read `data`, `strides` and
 * `offset` once per call and index the array directly.
 */
export abstract class Domain<N extends number = number, A extends NumericArray = Float64Array<ArrayBufferLike>> {
  readonly dims: N
  readonly dtype: NumericDType
  readonly order: StorageOrder
  readonly preserveOnResize: boolean
  /** Values per cell (see `DomainOptions.components`). */
  readonly components: number
  /** Per axis, whether halos wrap around (see `DomainOptions.periodic`). */
  readonly periodic: readonly boolean[]
  /**
   * Memory source; the threads runtime installs a SharedArrayBuffer allocator.
   * @internal runtime plumbing, not set by programs
   */
  allocator: BufferAllocator = plainAllocator

  private _box: DomainDesc<N>
  private _possessed: DomainDesc<N>
  private _data: A
  private _strides: number[]
  private _offset = 0
  private _lease: DomainLease | undefined

  constructor(dims: N, options: DomainOptions = {}) {
    if (!Number.isInteger(dims) || dims < 1) throw new ConfigError(`a domain needs at least one dimension (got ${dims})`)
    const dtype = options.dtype ?? 'float64'
    if (!(dtype in DTYPES) || dtype.startsWith('big')) throw new ConfigError(`unsupported domain dtype "${dtype}"`)
    const order = options.order ?? 'C'
    if (order !== 'C' && order !== 'F') throw new ConfigError(`storage order must be "C" or "F" (got "${String(order)}")`)
    this.dims = dims
    this.dtype = dtype
    this.order = order
    this.preserveOnResize = options.preserveOnResize ?? true
    const components = options.components ?? 1
    if (!Number.isSafeInteger(components) || components < 1) throw new ConfigError(`a domain needs a positive whole number of components per cell (got ${components})`)
    this.components = components
    const periodic = options.periodic ?? false
    if (typeof periodic !== 'boolean' && periodic.length !== dims) {
      throw new ConfigError(`periodic gives ${periodic.length} axes for a domain of ${dims} dimensions: give one flag per axis, or true for all`)
    }
    this.periodic = Object.freeze(typeof periodic === 'boolean' ? new Array<boolean>(dims).fill(periodic) : periodic.map((p) => p === true))
    this._box = DomainDesc.empty(dims)
    this._possessed = this._box
    this._data = new DTYPES[dtype](0) as A
    this._strides = new Array<number>(dims).fill(0)
    this.computeLayout()
  }

  /** The cells this rank computes (owns) at superstep `step`. Boxes of all ranks must not overlap. */
  abstract possessed(rank: number, size: number, step: number): DomainDesc<N>
  /** The cells this rank must hold at superstep `step`: its possessed box plus halos. */
  abstract needed(rank: number, size: number, step: number): DomainDesc<N>

  /**
   * When the partition may change: two steps with the same epoch must give
   * every rank the same `possessed` and `needed` boxes, so the framework
   * evaluates the partition (and builds routing plans) once per epoch, not
   * once per superstep. The default, one epoch for the whole run, suits a
   * partition that ignores `step`; override it when the boxes move:
   *
   * ```ts
   * class Ring extends Plate {
   *   override partitionEpoch(step: number) { return step }  // changes every superstep
   * }
   * class Rebalanced extends Plate {
   *   override partitionEpoch(step: number) { return Math.floor(step / 100) }  // every 100 steps
   * }
   * ```
   *
   * A pure function of `step`, like the partition methods. The skeleton
   * spot-checks this rank's boxes at steps 1, 2, 4, 8, … and stops with a
   * PartitionError when they moved inside one epoch.
   */
  partitionEpoch(_step: number): number {
    return 0
  }

  /**
   * The cells this rank computes in the current superstep (set by the
   * skeleton before each `calculate`): the loop bounds of a kernel.
   */
  get possessedBox(): DomainDesc<N> {
    return this._possessed
  }

  /** @internal Called by the skeleton once per superstep. */
  setPossessedBox(box: DomainDesc<N>): void {
    this._possessed = box
  }

  /**
   * @internal True while a background copy reads this domain's memory (a
   * memory checkpoint's payload copied by the checkpoint I/O thread during
   * the next superstep): nothing may write or resize it until `returned()`.
   */
  get lent(): boolean {
    return this._lease !== undefined
  }

  /**
   * @internal Lend the memory to a reader that is done when `until` settles
   * (either way); `waited` learns how long the owner had to wait for it.
   */
  lend(until: Promise<unknown>, waited: (ms: number) => void): void {
    const end = () => {
      if (this._lease === lease) this._lease = undefined
    }
    const lease: DomainLease = { until: until.then(end, end), waited }
    this._lease = lease
  }

  /** @internal Resolves once no background copy reads the memory any more (see `lent`). */
  async returned(): Promise<void> {
    const lease = this._lease
    if (!lease) return
    const t0 = performance.now()
    await lease.until
    lease.waited(performance.now() - t0)
  }

  /** The box currently allocated. */
  get box(): DomainDesc<N> {
    return this._box
  }
  /** Backing array; element `index(x)` holds global cell x (its first component). Replaced by `resize`. */
  get data(): A {
    return this._data
  }
  /** Flat-index step per dimension, in values (the fastest dimension's is `components`). */
  get strides(): readonly number[] {
    return this._strides
  }
  /** Flat index of the global origin: `index(x) = offset + Σ x[d]·strides[d]`. */
  get offset(): number {
    return this._offset
  }

  /**
   * Make the domain cover `box`. Cells in both the old and the new box keep
   * their values when `preserveOnResize` is on; other cells start at 0 when
   * memory is new and are undefined when memory is reused.
   */
  resize(box: DomainDesc<N>): void {
    if (box.dims !== this.dims) throw new ConfigError(`resize: box has ${box.dims} dimensions, domain has ${this.dims}`)
    if (box.equals(this._box) && this._data.length === box.volume * this.components) return
    // A background copy still reads the old memory, which may be reused below: the skeleton waits first.
    if (this._lease) throw new InternalError('a domain was resized while a checkpoint copy still read it')
    const old = { box: this._box, data: this._data, strides: this._strides, offset: this._offset }
    const volume = box.volume * this.components
    const keep = this.preserveOnResize && !old.box.isEmpty && old.box.overlaps(box)
    const bytes = volume * DTYPES[this.dtype].BYTES_PER_ELEMENT
    if (keep || this._data.buffer.byteLength < bytes) {
      this._data = this.allocate(bytes, box)
    } else {
      this._data = arrayOver(this.dtype, this._data.buffer, 0, volume) as A
    }
    this._box = box.isEmpty ? DomainDesc.empty(this.dims) : box
    this.computeLayout()
    if (keep) {
      const common = old.box.intersect(box)
      copyBox(old.data, old, this._data, { strides: this._strides, offset: this._offset }, common, this.order)
    }
  }

  /** Flat index of a global cell's first component (no bounds check; use `box.containsPoint` when unsure). */
  index(x: readonly number[]): number {
    let k = this._offset
    for (let d = 0; d < this.dims; d++) k += x[d] * this._strides[d]
    return k
  }

  /** Memory for `box`; an impossible size (beyond typed array limits or this machine) is bad input, not a crash to restart from. */
  private allocate(bytes: number, box: DomainDesc<N>): A {
    try {
      return arrayOver(this.dtype, this.allocator(bytes), 0, box.volume * this.components) as A
    } catch (e) {
      if (!(e instanceof RangeError)) throw e
      const cells = this.components === 1 ? `${box.volume} ${this.dtype} cells` : `${box.volume} cells of ${this.components} ${this.dtype} values`
      throw new ConfigError(`cannot allocate a domain of ${box} (${cells}, ${formatSize(bytes)}): ${e.message}; choose a smaller problem size`)
    }
  }

  /** Value (component `c`, default 0) at a global cell; throws outside the allocated box. */
  get(x: readonly number[], c = 0): number {
    this.check(x, c)
    return this._data[this.index(x) + c] as number
  }

  /** Store (component `c`, default 0) at a global cell; throws outside the allocated box. */
  set(x: readonly number[], value: number, c = 0): void {
    this.check(x, c)
    this._data[this.index(x) + c] = value
  }

  /** Value at a local cell (0-based from the box's lower corner). */
  getLocal(l: readonly number[], c = 0): number {
    return this.get(l.map((v, d) => v + this._box.lower[d]), c)
  }

  /** Store at a local cell (0-based from the box's lower corner). */
  setLocal(l: readonly number[], value: number, c = 0): void {
    this.set(l.map((v, d) => v + this._box.lower[d]), value, c)
  }

  /** Fill every value of every cell of `box ∩ this.box` with `value`. */
  fill(value: number, box: DomainDesc<N> = this._box): void {
    const b = box.intersect(this._box)
    if (b.isEmpty) return
    forEachRun(this._strides, this._offset, b, this.order, (start, len) => this._data.fill(value, start, start + len))
  }

  /** True when the cells of `sub` (inside the allocated box) are one run of the backing array. */
  isContiguous(sub: DomainDesc<N>): boolean {
    return isContiguousIn(this._box, sub, this.order)
  }

  /** The values of the cells of a contiguous `sub` as a view on the backing array (no copy). */
  view(sub: DomainDesc<N>): A {
    if (!this._box.contains(sub)) throw new ConfigError(`view: ${sub} is outside the allocated box ${this._box}`)
    if (!this.isContiguous(sub)) throw new ConfigError(`view: ${sub} is not contiguous in ${this._box} (${this.order} order)`)
    const start = sub.isEmpty ? 0 : this.index(sub.lower)
    return this._data.subarray(start, start + sub.volume * this.components) as A
  }

  private computeLayout(): void {
    const n = this.dims
    const strides = new Array<number>(n).fill(0)
    let s = this.components
    const dims = this.order === 'C' ? [...Array(n).keys()].reverse() : [...Array(n).keys()]
    for (const d of dims) {
      strides[d] = s
      s *= this._box.extent(d)
    }
    this._strides = strides
    let off = 0
    for (let d = 0; d < n; d++) off -= this._box.lower[d] * strides[d]
    this._offset = off
  }

  private check(x: readonly number[], c: number): void {
    if (x.length !== this.dims || !this._box.containsPoint(x)) {
      throw new ConfigError(`cell (${x.join(', ')}) is outside the allocated box ${this._box}`)
    }
    if (!(c >= 0 && c < this.components && Number.isInteger(c))) {
      throw new ConfigError(`component ${c} of a cell with ${this.components} components`)
    }
  }
}

/** Whether `sub` (inside `outer`) is one contiguous run of an array laid out over `outer`. */
export function isContiguousIn(outer: DomainDesc, sub: DomainDesc, order: StorageOrder): boolean {
  if (sub.isEmpty) return true
  const n = outer.dims
  const dims = order === 'C' ? [...Array(n).keys()] : [...Array(n).keys()].reverse() // slowest first
  // Skip leading (slow) dims of extent 1; the first dim of extent > 1 may be partial;
  // every faster dim must span the outer box fully.
  let k = 0
  while (k < n && sub.extent(dims[k]) === 1) k++
  for (let m = k + 1; m < n; m++) {
    const d = dims[m]
    if (sub.lower[d] !== outer.lower[d] || sub.upper[d] !== outer.upper[d]) return false
  }
  return true
}

/**
 * Call `run(start, length)` for each maximal run of consecutive flat indices
 * covering `box` in an array with the given layout, in storage order. A
 * layout is dense: its fastest dimension's stride is the number of values
 * per cell (`Domain.components`, 1 for most domains), so a run of cells is a
 * run of `cells × stride` values, whole cells.
 */
export function forEachRun(
  strides: readonly number[],
  offset: number,
  box: DomainDesc,
  order: StorageOrder,
  run: (start: number, length: number) => void,
): void {
  const layout = { strides, offset }
  forEachRunPair(layout, layout, box, order, (s, _t, len) => run(s, len))
}

/**
 * Call `run(start, length)` for each maximal run of consecutive flat indices
 * covering `box` in an array with the given layout, in storage order, passing
 * also the run's start in a second layout (same storage order, other box).
 */
export function forEachRunPair(
  a: { strides: readonly number[]; offset: number },
  b: { strides: readonly number[]; offset: number },
  box: DomainDesc,
  order: StorageOrder,
  run: (startA: number, startB: number, length: number) => void,
): void {
  if (box.isEmpty) return
  const n = box.dims
  const fast = order === 'C' ? n - 1 : 0
  const perCell = a.strides[fast]
  if (b.strides[fast] !== perCell) throw new InternalError(`two layouts with ${perCell} and ${b.strides[fast]} values per cell`)
  const len = box.extent(fast) * perCell
  const p = [...box.lower]
  const outerDims = order === 'C' ? [...Array(n - 1).keys()].reverse() : [...Array(n).keys()].slice(1)
  for (;;) {
    let sa = a.offset
    let sb = b.offset
    for (let d = 0; d < n; d++) {
      sa += p[d] * a.strides[d]
      sb += p[d] * b.strides[d]
    }
    run(sa, sb, len)
    let k = 0
    for (; k < outerDims.length; k++) {
      const d = outerDims[k]
      if (++p[d] < box.upper[d]) break
      p[d] = box.lower[d]
    }
    if (k === outerDims.length) return
  }
}

/** Copy the cells of `box` between two arrays with their own layouts (same storage order). */
export function copyBox(
  src: NumericArray,
  srcLayout: { strides: readonly number[]; offset: number },
  dst: NumericArray,
  dstLayout: { strides: readonly number[]; offset: number },
  box: DomainDesc,
  order: StorageOrder,
): void {
  forEachRunPair(srcLayout, dstLayout, box, order, (s, t, len) => {
    dst.set(src.subarray(s, s + len) as never, t)
  })
}

/** A background reader of a domain's memory (see `Domain.lend`). */
interface DomainLease {
  readonly until: Promise<void>
  readonly waited: (ms: number) => void
}
