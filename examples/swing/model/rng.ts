/**
 * A small seeded generator (xoshiro128**, 32-bit state words) for reproducible
 * Monte Carlo: `const rng = new Rng(42); const u = rng.uniform()` gives doubles in
 * [0, 1) with 53 random bits. The seed is spread over the state with splitmix32
 * so that nearby seeds give unrelated streams.
 */
export class Rng {
  private s0 = 0
  private s1 = 0
  private s2 = 0
  private s3 = 0

  constructor(seed: number) {
    let x = seed >>> 0
    const next = (): number => {
      // splitmix32: a Weyl sequence through an avalanching mix.
      x = (x + 0x9e3779b9) >>> 0
      let z = x
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b)
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35)
      return (z ^ (z >>> 16)) >>> 0
    }
    this.s0 = next()
    this.s1 = next()
    this.s2 = next()
    this.s3 = next()
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1 // the all-zero state is a fixed point
  }

  /** The next 32 random bits as an unsigned integer. */
  nextUint32(): number {
    const s1 = this.s1
    const result = Math.imul(rotl(Math.imul(s1, 5), 7), 9) >>> 0
    const t = s1 << 9
    this.s2 ^= this.s0
    this.s3 ^= this.s1
    this.s1 ^= this.s2
    this.s0 ^= this.s3
    this.s2 ^= t
    this.s3 = rotl(this.s3, 11)
    return result
  }

  /** A double uniform in [0, 1): 27 + 26 bits of two draws. */
  uniform(): number {
    const a = this.nextUint32() >>> 5
    const b = this.nextUint32() >>> 6
    return (a * 67108864 + b) / 9007199254740992
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k))
}
