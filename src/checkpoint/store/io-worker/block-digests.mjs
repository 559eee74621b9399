// @ts-check
// The change-detection digests of incremental checkpoints (store/delta-chain.ts
// says why SHA-1 and not a CRC): plain JavaScript, so that the I/O thread
// computes them for a flush off the rank's own thread with the same code
// DeltaChain uses when no thread is given.
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
