import { CheckpointError, CheckpointMismatchError } from '../../errors.js'
import { arrayOver, DTYPES, type AnyTypedArray, type DType, type TypedArrayOf } from '../../domains/dtype.js'
import type { DecodedEntry } from './rank-file.js'

/**
 * The typed array stored in a decoded heavy entry. It is a view over the file
 * buffer when the payload is aligned for its element type (the normal case:
 * payloads sit on 8-byte boundaries of a freshly read file); only a misaligned
 * payload — a file buffer that itself starts at an odd offset — is copied into
 * a new, aligned buffer. Pass the expected dtype to get a precisely typed array
 * and a clear error if the checkpoint holds another element type.
 *
 * ```ts
 * const saved = entryArray(file.entries.get('write')!, 'float64')  // Float64Array
 * domain.data.set(saved)
 * ```
 */
export function entryArray<T extends DType>(entry: DecodedEntry, dtype: T): TypedArrayOf<T>
export function entryArray(entry: DecodedEntry): AnyTypedArray
export function entryArray(entry: DecodedEntry, expected?: DType): AnyTypedArray {
  if (entry.kind !== 'heavy') throw new CheckpointMismatchError(`checkpoint entry "${entry.name}" is a light value, not an array`)
  const dtype: DType = entry.dtype ?? 'uint8'
  if (expected !== undefined && expected !== dtype) {
    throw new CheckpointMismatchError(`checkpoint entry "${entry.name}" holds ${dtype} elements, expected ${expected}`)
  }
  const bpe = DTYPES[dtype].BYTES_PER_ELEMENT
  const bytes = entry.bytes
  const length = bytes.byteLength / bpe
  if (!Number.isInteger(length)) {
    throw new CheckpointError(`checkpoint entry "${entry.name}": ${bytes.byteLength} bytes is not a whole number of ${dtype} elements`)
  }
  if (bytes.byteOffset % bpe === 0) return arrayOver(dtype, bytes.buffer, bytes.byteOffset, length)
  const copy = new Uint8Array(bytes.byteLength)
  copy.set(bytes)
  return arrayOver(dtype, copy.buffer, 0, length)
}
