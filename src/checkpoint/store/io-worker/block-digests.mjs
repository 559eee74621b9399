// @ts-check
// The change-detection digests of incremental checkpoints (format/delta.ts
// says why SHA-1 and not a CRC): plain JavaScript beside the I/O thread,
// which computes them for a flush off the rank's own thread, and read by the
// format's tests through format/delta.ts.
import { createHash } from 'node:crypto'

/** Bytes of one block's digest (SHA-1). */
export const DIGEST_BYTES = 20

/**
 * One SHA-1 per block of `blockSize` bytes of `bytes` (the last block may be
 * shorter), back to back.
 *
 * @param {Uint8Array} bytes @param {number} blockSize @returns {Uint8Array}
 */
export function blockDigests(bytes, blockSize) {
  const n = Math.ceil(bytes.byteLength / blockSize)
  const out = new Uint8Array(n * DIGEST_BYTES)
  for (let i = 0; i < n; i++) out.set(createHash('sha1').update(bytes.subarray(i * blockSize, (i + 1) * blockSize)).digest(), i * DIGEST_BYTES)
  return out
}
