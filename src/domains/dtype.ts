import { ConfigError } from '../errors.js'

/**
 * The numeric element types a domain or a checkpoint entry can hold, by name.
 * Names are what checkpoint headers store, so they never change meaning.
 */
export const DTYPES = {
  float64: Float64Array,
  float32: Float32Array,
  int32: Int32Array,
  uint32: Uint32Array,
  int16: Int16Array,
  uint16: Uint16Array,
  int8: Int8Array,
  uint8: Uint8Array,
  bigint64: BigInt64Array,
  biguint64: BigUint64Array,
} as const

/** An element type by name: `float64`, `float32`, `int32`, `uint32`, `int16`, `uint16`, `int8`, `uint8`, `bigint64`, `biguint64`. */
export type DType = keyof typeof DTYPES
/** The typed array of each element type name. */
export interface TypedArrayByName {
  float64: Float64Array<ArrayBufferLike>
  float32: Float32Array<ArrayBufferLike>
  int32: Int32Array<ArrayBufferLike>
  uint32: Uint32Array<ArrayBufferLike>
  int16: Int16Array<ArrayBufferLike>
  uint16: Uint16Array<ArrayBufferLike>
  int8: Int8Array<ArrayBufferLike>
  uint8: Uint8Array<ArrayBufferLike>
  bigint64: BigInt64Array<ArrayBufferLike>
  biguint64: BigUint64Array<ArrayBufferLike>
}
/** The typed array class instance for a dtype name (over any kind of buffer). */
export type TypedArrayOf<T extends DType> = TypedArrayByName[T]
/** Any typed array a domain may be backed by (numeric element type). */
export type NumericArray = TypedArrayOf<Exclude<DType, 'bigint64' | 'biguint64'>>
/** Any typed array a checkpoint entry may hold (BigInt arrays included). */
export type AnyTypedArray = TypedArrayOf<DType>

export function isDType(name: string): name is DType {
  return Object.prototype.hasOwnProperty.call(DTYPES, name)
}

/** The dtype name of a typed array instance. */
export function dtypeOf(a: AnyTypedArray): DType {
  for (const [name, ctor] of Object.entries(DTYPES)) if (a instanceof ctor) return name as DType
  throw new ConfigError(`not a supported typed array: ${Object.prototype.toString.call(a)}`)
}

/** A byte view over the same memory as `a` (no copy). */
export function bytesOf(a: ArrayBufferView): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength)
}

/**
 * Byte pieces joined into one buffer, in order: a message that arrived in
 * parts, a file's encoded parts. One piece is returned as it is (no copy).
 *
 * ```ts
 * joinBytes([Uint8Array.of(1, 2), Uint8Array.of(3)])   // Uint8Array [1, 2, 3]
 * ```
 */
export function joinBytes(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]
  let n = 0
  for (const p of parts) n += p.byteLength
  const out = new Uint8Array(n)
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.byteLength
  }
  return out
}

/**
 * Allocates the backing memory of domains. The threads runtime installs one that
 * uses SharedArrayBuffer, so that contiguous halos cross to another thread as a
 * view (no copy on the sending side); everywhere else plain ArrayBuffer is used.
 */
export type BufferAllocator = (byteLength: number) => ArrayBufferLike

export const plainAllocator: BufferAllocator = (n) => new ArrayBuffer(n)
export const sharedAllocator: BufferAllocator = (n) => new SharedArrayBuffer(n)

type ArrayCtor = new (buffer: ArrayBufferLike, byteOffset: number, length: number) => AnyTypedArray

/** A typed array of `dtype` over `length` elements of `buffer` starting at `byteOffset`. */
export function arrayOver<T extends DType>(dtype: T, buffer: ArrayBufferLike, byteOffset: number, length: number): TypedArrayOf<T> {
  return new (DTYPES[dtype] as unknown as ArrayCtor)(buffer, byteOffset, length) as TypedArrayOf<T>
}
