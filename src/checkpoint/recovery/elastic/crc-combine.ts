// CRC-32 (the zlib polynomial, reflected) of a concatenation from the CRCs of
// its parts: ranks that each read a piece of an old rank file can prove,
// together, that the whole payload matches the checksum its header records,
// without any rank reading bytes it does not need.

const POLY = 0xedb88320

/** a(x)·b(x) modulo the CRC polynomial, both in the reflected bit order of CRC-32. */
function multiplyModP(a: number, b: number): number {
  let m = 0x80000000
  let p = 0
  for (;;) {
    if (a & m) {
      p ^= b
      if ((a & (m - 1)) === 0) break
    }
    m >>>= 1
    b = b & 1 ? (b >>> 1) ^ POLY : b >>> 1
  }
  return p >>> 0
}

// x^(2^k) mod p for k = 0..31: squaring the previous one.
const X2N: number[] = (() => {
  const t = [0x40000000] // x^1 in reflected order
  for (let k = 1; k < 32; k++) t.push(multiplyModP(t[k - 1], t[k - 1]))
  return t
})()

/** x^(8·bytes) mod p: shifting a CRC over `bytes` zero bytes. */
function shiftForBytes(bytes: number): number {
  let p = 0x80000000 // x^0
  let k = 3 // 8 bits a byte: start at x^(2^3)
  // Bit by bit over `bytes` (up to 2^53: plain arithmetic, not 32-bit operators).
  for (let n = bytes; n > 0; n = Math.floor(n / 2), k++) {
    if (n % 2 === 1) p = multiplyModP(X2N[k % 32], p)
  }
  return p
}

/**
 * The CRC-32 of `A ‖ B` from `crc32(A)`, `crc32(B)` and B's length.
 *
 * ```ts
 * crc32Combine(crc32(a), crc32(b), b.byteLength) === crc32(Buffer.concat([a, b]))
 * ```
 */
export function crc32Combine(crcA: number, crcB: number, lengthB: number): number {
  return (multiplyModP(shiftForBytes(lengthB), crcA >>> 0) ^ (crcB >>> 0)) >>> 0
}
