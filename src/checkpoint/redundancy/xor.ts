import { CheckpointError } from '../../errors.js'

// XOR parity of a set of G files (SCR's XOR scheme): each member's file is cut
// into G−1 chunks of one length (the longest file's share, the shorter files
// padded with zeros: their lengths are recorded beside the parity), and chunk
// k of member i goes into the parity slice member (i + k + 1) mod G keeps. So
// every member keeps one slice, the XOR of one chunk of each other member
// (1/(G−1) of a file), and a member's G−1 chunks sit in G−1 different slices
// on the others: any one member's file is rebuilt from the others' files and
// slices. Pure functions: the commit's exchange (exchange.ts) and a rebuild
// use the same layout.

/**
 * Bytes of each chunk (and of each parity slice) of a set whose files have
 * these lengths: the longest file's share, rounded up to 8 bytes so that
 * every chunk starts on a word (the XOR then runs word by word).
 */
export function chunkBytesOf(lengths: readonly number[]): number {
  const g = lengths.length
  if (g < 2) throw new CheckpointError(`an XOR set needs at least 2 members (got ${g})`)
  return Math.ceil(Math.max(0, ...lengths) / (g - 1) / 8) * 8
}

/** The member whose slice holds chunk `k` of member `i` in a set of `g`. */
export function sliceHolderOf(i: number, k: number, g: number): number {
  return (i + k + 1) % g
}

/** Which chunk of member `j` goes into the slice of member `p` (p ≠ j) in a set of `g`. */
export function chunkIndexFor(j: number, p: number, g: number): number {
  return (p - j - 1 + 2 * g) % g
}

/** Chunk `k` of `file` (a view; shorter than `chunkBytes`, or empty, past the file's end: the padding is zeros). */
export function chunkOf(file: Uint8Array, k: number, chunkBytes: number): Uint8Array {
  const from = Math.min(file.byteLength, k * chunkBytes)
  return file.subarray(from, Math.min(file.byteLength, from + chunkBytes))
}

/** target ^= source over source's length (≤ target's). */
export function xorInto(target: Uint8Array, source: Uint8Array): void {
  const n = source.byteLength
  // Whole 32-bit words where both are aligned: four times fewer steps (signed: an XOR of two int32 stays a small integer).
  if (target.byteOffset % 4 === 0 && source.byteOffset % 4 === 0) {
    const words = n >>> 2
    const t32 = new Int32Array(target.buffer, target.byteOffset, words)
    const s32 = new Int32Array(source.buffer, source.byteOffset, words)
    for (let w = 0; w < words; w++) t32[w] ^= s32[w]
    for (let b = words << 2; b < n; b++) target[b] ^= source[b]
    return
  }
  for (let b = 0; b < n; b++) target[b] ^= source[b]
}

/**
 * The parity slice of every member of a set (index i: the slice member i
 * keeps), from all the members' files.
 *
 * ```ts
 * const slices = encodeParity([a, b, c])   // each ⌈max length / 2⌉ bytes
 * ```
 */
export function encodeParity(files: readonly Uint8Array[]): Uint8Array[] {
  const g = files.length
  const chunk = chunkBytesOf(files.map((f) => f.byteLength))
  const slices = files.map(() => new Uint8Array(chunk))
  for (let j = 0; j < g; j++) {
    for (let k = 0; k < g - 1; k++) xorInto(slices[sliceHolderOf(j, k, g)], chunkOf(files[j], k, chunk))
  }
  return slices
}

/**
 * Member `lost`'s file, rebuilt from the other members' files and parity
 * slices (`files[lost]` and `slices[lost]` are not read) and the recorded
 * lengths. Refused (CheckpointError) when another member's file or slice is
 * missing too: two losses in one set cannot be rebuilt.
 *
 * ```ts
 * const back = rebuildMember(1, [a, undefined, c], [pa, undefined, pc], [a.length, bLength, c.length])
 * ```
 */
export function rebuildMember(
  lost: number,
  files: readonly (Uint8Array | undefined)[],
  slices: readonly (Uint8Array | undefined)[],
  lengths: readonly number[],
): Uint8Array {
  const g = lengths.length
  if (files.length !== g || slices.length !== g) throw new CheckpointError(`an XOR rebuild needs one file and one slice per member (${g} members)`)
  const missing = [...new Set(files.flatMap((f, i) => (f === undefined && i !== lost ? [i] : [])).concat(slices.flatMap((s, i) => (s === undefined && i !== lost ? [i] : []))))]
  if (missing.length > 0) {
    throw new CheckpointError(`two members of an XOR set are lost (members ${[lost, ...missing].sort((a, b) => a - b).join(', ')}): one parity slice per member rebuilds one lost member only`)
  }
  const chunk = chunkBytesOf(lengths)
  for (let i = 0; i < g; i++) {
    if (i !== lost && files[i]!.byteLength !== lengths[i]) throw new CheckpointError(`XOR member ${i}'s file is ${files[i]!.byteLength} bytes, the parity records ${lengths[i]}`)
    if (i !== lost && slices[i]!.byteLength !== chunk) throw new CheckpointError(`XOR member ${i}'s parity slice is ${slices[i]!.byteLength} bytes, ${chunk} expected`)
  }
  const out = new Uint8Array((g - 1) * chunk)
  for (let j = 0; j < g; j++) if (j !== lost) xorInto(out, contributionOf(j, lost, files[j]!, slices[j]!, g))
  return out.subarray(0, lengths[lost])
}

/**
 * What member `j` gives toward member `lost`'s file, (G−1) chunks long: at
 * chunk k, its own slice when it holds chunk k of `lost`, else its own
 * chunk that went into that slice. The slice of p is the XOR of chunk k of
 * `lost` and one chunk of every other member but p, so the XOR of the G−1
 * contributions is `lost`'s file (padded with zeros): a rebuild receives
 * one file's worth from each other member and only XORs.
 *
 * ```ts
 * const part = contributionOf(2, 0, fileOf2, sliceOf2, 3)   // sent by member 2 to member 0
 * ```
 *
 * `out`: where to put it ((G−1) chunks; in shared memory, the threads
 * transport sends it without a copy).
 */
export function contributionOf(j: number, lost: number, file: Uint8Array, slice: Uint8Array, g: number, out: Uint8Array = new Uint8Array((g - 1) * slice.byteLength)): Uint8Array {
  const chunk = slice.byteLength
  for (let k = 0; k < g - 1; k++) {
    const p = sliceHolderOf(lost, k, g)
    out.set(p === j ? slice : chunkOf(file, chunkIndexFor(j, p, g), chunk), k * chunk)
  }
  return out
}
