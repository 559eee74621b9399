// @ts-check
// How a compressed payload of a rank file is stored: its bytes shuffled by
// element (byte 0 of every element, then byte 1, …, as Blosc does for floats:
// the sign-and-exponent bytes of neighbouring doubles are alike, their last
// mantissa bytes are noise), then compressed with brotli at quality 1
// (node:zlib, no native dependency). Chosen by measurement (docs/REFERENCE.md,
// "Compression"): on float64 grids the shuffle, not the codec, gives most of
// the gain. Plain JavaScript: the checkpoint I/O thread compresses, the rank
// file reader (format/rank-file.ts) decompresses, with the same code.
import { brotliCompressSync, brotliDecompressSync, constants } from 'node:zlib'

/** The one codec this version writes and reads. */
export const PAYLOAD_CODEC = 'brotli'

/**
 * How a payload is stored when it is not stored raw: `codec` over the bytes
 * shuffled by `shuffle`-byte element (1: not shuffled), `length` bytes
 * stored, `checksum` the CRC32 of those stored bytes.
 *
 * @typedef {{ codec: 'brotli', shuffle: number, length: number, checksum: number }} StoredEncoding
 */

// Quality 1: on shuffled doubles a ratio 1 % better than quality 0 for 5–10 % of its speed; deflate is 5× slower (bench:codecs).
const QUALITY = 1

/**
 * The bytes of `src` grouped by their position in a `width`-byte element: the
 * first bytes of every element, then the second bytes, … (a tail shorter than
 * one element stays at the end as it is).
 *
 * ```js
 * shuffleBytes(new Uint8Array([1, 2, 3, 4, 5, 6]), 2)   // [1, 3, 5, 2, 4, 6]
 * ```
 *
 * @param {Uint8Array} src @param {number} width @returns {Uint8Array}
 */
export function shuffleBytes(src, width) {
  const out = new Uint8Array(src.byteLength)
  const n = Math.floor(src.byteLength / width)
  if (width === 8) {
    // Unrolled for doubles: half as fast again as the plane-by-plane loop.
    const o1 = n, o2 = 2 * n, o3 = 3 * n, o4 = 4 * n, o5 = 5 * n, o6 = 6 * n, o7 = 7 * n
    for (let i = 0, s = 0; i < n; i++, s += 8) {
      out[i] = src[s]; out[o1 + i] = src[s + 1]; out[o2 + i] = src[s + 2]; out[o3 + i] = src[s + 3]
      out[o4 + i] = src[s + 4]; out[o5 + i] = src[s + 5]; out[o6 + i] = src[s + 6]; out[o7 + i] = src[s + 7]
    }
  } else {
    for (let b = 0; b < width; b++) for (let i = 0, o = b * n, s = b; i < n; i++, o++, s += width) out[o] = src[s]
  }
  out.set(src.subarray(n * width), n * width)
  return out
}

/**
 * The inverse of shuffleBytes, written into `out` (as long as `src`).
 *
 * @param {Uint8Array} src @param {number} width @param {Uint8Array} out @returns {Uint8Array}
 */
export function unshuffleBytes(src, width, out) {
  const n = Math.floor(src.byteLength / width)
  if (width === 8) {
    const o1 = n, o2 = 2 * n, o3 = 3 * n, o4 = 4 * n, o5 = 5 * n, o6 = 6 * n, o7 = 7 * n
    for (let i = 0, s = 0; i < n; i++, s += 8) {
      out[s] = src[i]; out[s + 1] = src[o1 + i]; out[s + 2] = src[o2 + i]; out[s + 3] = src[o3 + i]
      out[s + 4] = src[o4 + i]; out[s + 5] = src[o5 + i]; out[s + 6] = src[o6 + i]; out[s + 7] = src[o7 + i]
    }
  } else {
    for (let b = 0; b < width; b++) for (let i = 0, o = b * n, s = b; i < n; i++, o++, s += width) out[s] = src[o]
  }
  out.set(src.subarray(n * width), n * width)
  return out
}

/**
 * `raw` compressed as a payload is stored (shuffled by `width`-byte element,
 * then brotli), or undefined when that would not be smaller than `raw`.
 *
 * ```js
 * const stored = compressPayload(bytesOfAFloat64Array, 8)
 * ```
 *
 * @param {Uint8Array} raw @param {number} width @returns {Uint8Array | undefined}
 */
export function compressPayload(raw, width) {
  if (raw.byteLength === 0) return undefined
  const input = width > 1 ? shuffleBytes(raw, width) : raw
  const out = brotliCompressSync(input, {
    params: { [constants.BROTLI_PARAM_QUALITY]: QUALITY, [constants.BROTLI_PARAM_SIZE_HINT]: raw.byteLength },
  })
  if (out.byteLength >= raw.byteLength) return undefined
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength)
}

/**
 * The raw bytes of a payload stored compressed, in a fresh buffer (offset 0,
 * so typed arrays can view it): `length` bytes when the stream is intact (the
 * caller checks; more than `length` is never produced). Throws node:zlib's
 * error when `stored` is not a valid brotli stream.
 *
 * @param {Uint8Array} stored @param {number} width @param {number} length @returns {Uint8Array}
 */
export function decompressPayload(stored, width, length) {
  const inflated = brotliDecompressSync(stored, { maxOutputLength: Math.max(1, length) })
  const out = new Uint8Array(inflated.byteLength)
  if (width > 1) return unshuffleBytes(inflated, width, out)
  out.set(inflated)
  return out
}
