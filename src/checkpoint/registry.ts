import { freeze } from 'immer'
import type { DomainDesc, StorageOrder } from '../domains/desc.js'
import { dtypeOf, type AnyTypedArray } from '../domains/dtype.js'
import { ConfigError } from '../errors.js'
import { checkSerializable, type Serializer } from './light/codec.js'

/**
 * The framework's default checkpoint entries, named by their role in the
 * superstep that *follows* the checkpoint: `read` is the domain just written
 * (the next superstep reads it), `write` the domain the next superstep
 * overwrites. Unregistering `write` halves a checkpoint at no cost: replay
 * never needs it.
 */
export type DefaultEntry = 'read' | 'write' | 'iterator'
const DEFAULTS: readonly DefaultEntry[] = ['read', 'write', 'iterator']
const RESERVED = new Set<string>([...DEFAULTS, 'step'])

/** A light value saved in checkpoints and put back on restore: read and write `.value`. */
export class Cell<T> {
  constructor(public value: T) {}
}

/** A typed array saved in checkpoints (`register`), as the registry lists it. */
export interface HeavyRegistration {
  readonly name: string
  readonly array: AnyTypedArray
  /** The global box the array holds (its cells in `order`): what lets a resume on another rank count re-slice it. */
  readonly box?: DomainDesc
  readonly order: StorageOrder
  /** Compressed in flushed disk checkpoints when the run compresses (false: always stored raw). */
  readonly compress: boolean
}
/** A light value saved in checkpoints (`value`), as the registry lists it. */
export interface LightRegistration {
  readonly name: string
  readonly cell: Cell<unknown>
  readonly serializer: Serializer<unknown> | undefined
  readonly merge: MergeRule<unknown> | undefined
}

/**
 * How a light value that differs between the ranks of a checkpoint becomes
 * the value of one rank of a resume on another rank count: `values` are the
 * old ranks' values, in rank order.
 *
 * ```ts
 * const merge: MergeRule<number> = (values) => values.reduce((a, b) => a + b, 0)   // a count split over the ranks
 * ```
 */
export type MergeRule<T> = (values: readonly T[], ctx: { rank: number; size: number; oldSize: number }) => T

/** Options of `register`: the array's global box makes it elastic (re-sliced when resuming on another rank count). */
export interface HeavyOptions {
  /** The cells the array holds, in global coordinates; its length must be the box's volume. */
  box?: DomainDesc
  /** Storage order of the array over its box (default `C`: the last dimension fastest). */
  order?: StorageOrder
  /**
   * `false`: stored raw even when the run compresses its disk checkpoints
   * (`--compress`): bytes that do not compress (already compressed, or
   * random), whose decompression would only cost time at a restore.
   */
  compress?: boolean
}

/** Options of `unregister`. */
export interface UnregisterOptions {
  /**
   * `initialize`: the values `initialize` puts in the domain are what the
   * next step reads after any checkpoint (a constant domain, or one the
   * kernel does not read), so a recovery needs no `rebuild` for it.
   */
  rebuiltBy?: 'initialize'
}

/** Options of `value`. */
export interface LightOptions<T> {
  serializer?: Serializer<T>
  /** Used only when resuming on another rank count and the old ranks' values differ. */
  merge?: MergeRule<T>
}
/** A value read at each checkpoint through a getter (`watch`), as the registry lists it. */
export interface WatchRegistration {
  readonly name: string
  /** Reads the current value when a checkpoint is taken. */
  readonly get: () => unknown
  readonly serializer: Serializer<unknown> | undefined
}

/**
 * What a skeleton's checkpoints contain. By default: both domains (their
 * possessed cells), the iterator and the step. Programs unregister what
 * replay can rebuild and register what it cannot.
 *
 * ```ts
 * sk.checkpoint.unregister('write')                          // minimal: only the domain just written
 * const hist = sk.checkpoint.register('history', new Float64Array(64))   // heavy, restored in place
 * const best = sk.checkpoint.value('best', { x: 0, at: new Date(0) })  // light, Cell<{ x: number; at: Date }>
 * const grid = sk.checkpoint.watch('lattice', { step: 0.5, points: [0, 0.5, 1] })  // rebuilt by replay: only its digest is saved, and compared after replay
 * ```
 */
export class CheckpointRegistry {
  private readonly defaults = new Set<DefaultEntry>(DEFAULTS)
  private readonly heavyEntries = new Map<string, HeavyRegistration>()
  private readonly lightEntries = new Map<string, LightRegistration>()
  private readonly watchEntries = new Map<string, WatchRegistration>()
  private readByInitialize = false

  constructor(private readonly owner: string) {}

  /**
   * Leave a default entry out of this skeleton's checkpoints. The next step
   * reads `read`: a skeleton that leaves it out is refused at start unless
   * its kernel has a `rebuild` that refills it, or the program declares that
   * `initialize`'s values are what that step reads (`{ rebuiltBy:
   * 'initialize' }`: a domain that never changes, or one the kernel does not
   * read). Either way a recovery checks the refilled cells against a digest
   * the checkpoint recorded.
   *
   * ```ts
   * sk.checkpoint.unregister('read')                               // the kernel's rebuild() refills it
   * sk.checkpoint.unregister('read', { rebuiltBy: 'initialize' })  // constant: initialize's values stay right
   * ```
   */
  unregister(name: DefaultEntry, options: UnregisterOptions = {}): void {
    if (!DEFAULTS.includes(name)) {
      throw new ConfigError(`${this.owner}: cannot unregister "${String(name)}": the defaults are ${DEFAULTS.join(', ')}`)
    }
    const { rebuiltBy } = options
    if (rebuiltBy !== undefined && rebuiltBy !== 'initialize') {
      throw new ConfigError(`${this.owner}: unregister("${name}"): rebuiltBy can only be "initialize" (a kernel's rebuild() needs no declaration)`)
    }
    if (rebuiltBy !== undefined && name !== 'read') {
      throw new ConfigError(`${this.owner}: unregister("${name}", { rebuiltBy }): only "read" is read by the next step; "${name}" needs no declaration`)
    }
    this.defaults.delete(name)
    if (rebuiltBy === 'initialize') this.readByInitialize = true
  }

  /** @internal The program declared that `initialize` leaves in the unregistered `read` what the next step reads. */
  get readRebuiltByInitialize(): boolean {
    return this.readByInitialize
  }

  /** Whether a default entry is saved. */
  includes(name: DefaultEntry): boolean {
    return this.defaults.has(name)
  }

  /**
   * Save a typed array as raw bytes; on restore its contents are put back in
   * place. With `{ box }` (the global cells it holds) a resume on another
   * rank count re-slices it; without, such a resume is refused naming it.
   *
   * ```ts
   * const rows = grid.possessed(ctx.rank, ctx.size)   // the global cells the array holds on this rank
   * const c = sk.checkpoint.register('C', new Float64Array(rows.volume), { box: rows })
   * const seeds = sk.checkpoint.register('seeds', new Uint32Array(64), { compress: false })   // random bits: stored raw
   * ```
   */
  register<T extends AnyTypedArray>(name: string, array: T, options: HeavyOptions = {}): T {
    this.checkName(name)
    if (!ArrayBuffer.isView(array)) throw new ConfigError(`${this.owner}: register("${name}") needs a typed array; use value() for light values`)
    dtypeOf(array) // throws for DataView and other views
    const { box, order = 'C', compress = true } = options
    if (typeof compress !== 'boolean') throw new ConfigError(`${this.owner}: register("${name}"): compress must be true or false`)
    if (order !== 'C' && order !== 'F') throw new ConfigError(`${this.owner}: register("${name}"): order must be "C" or "F"`)
    if (box !== undefined && box.volume !== array.length) {
      throw new ConfigError(`${this.owner}: register("${name}"): the array has ${array.length} elements, its box ${box} holds ${box.volume}`)
    }
    this.heavyEntries.set(name, { name, array, ...(box ? { box } : {}), order, compress })
    return array
  }

  /**
   * Save a light value (numbers, strings, objects, Map, Set, Date, BigInt, NaN,
   * -0…, or a user class with a `serializer`). It is checked now, so a value
   * that cannot be saved fails at registration, not at the first checkpoint.
   */
  value<T>(name: string, initial: T, options?: Serializer<T> | LightOptions<T>): Cell<T> {
    this.checkName(name)
    const { serializer, merge } = isSerializer(options) ? { serializer: options, merge: undefined } : (options ?? {})
    if (merge !== undefined && typeof merge !== 'function') throw new ConfigError(`${this.owner}: value("${name}"): merge must be a function`)
    checkSerializable(name, initial, serializer)
    const cell = new Cell(initial)
    this.lightEntries.set(name, {
      name,
      cell: cell as Cell<unknown>,
      serializer: serializer as Serializer<unknown> | undefined,
      merge: merge as MergeRule<unknown> | undefined,
    })
    return cell
  }

  /**
   * A light value replay must rebuild identically. Only its digest goes into
   * checkpoints; after replay the digest is compared and a difference is a
   * ReplayDivergenceError naming `name`. The value is deep-frozen (immer), so
   * a heavy phase cannot change it behind the framework's back.
   */
  watch<T>(name: string, value: T, serializer?: Serializer<T>): T {
    this.checkName(name)
    checkSerializable(name, value, serializer)
    const frozen = freeze(value, true)
    this.watchEntries.set(name, { name, get: () => frozen, serializer: serializer as Serializer<unknown> | undefined })
    return frozen
  }

  /** @internal */
  get heavy(): ReadonlyMap<string, HeavyRegistration> {
    return this.heavyEntries
  }
  /** @internal */
  get light(): ReadonlyMap<string, LightRegistration> {
    return this.lightEntries
  }
  /** @internal */
  get watched(): ReadonlyMap<string, WatchRegistration> {
    return this.watchEntries
  }

  private checkName(name: string): void {
    if (typeof name !== 'string' || name === '') throw new ConfigError(`${this.owner}: a checkpoint entry needs a non-empty name`)
    if (RESERVED.has(name)) throw new ConfigError(`${this.owner}: "${name}" is reserved for the framework's own entries`)
    if (this.heavyEntries.has(name) || this.lightEntries.has(name) || this.watchEntries.has(name)) {
      throw new ConfigError(`${this.owner}: "${name}" is already registered`)
    }
  }
}

function isSerializer<T>(o: Serializer<T> | LightOptions<T> | undefined): o is Serializer<T> {
  return o !== undefined && typeof (o as Serializer<T>).serialize === 'function'
}
