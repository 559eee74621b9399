/**
 * The numbers of a run's new checkpoints: one past molotof's own newest
 * checkpoint (any level), never a number that a folder or file of someone
 * else's already has (a user's `ckpt-00000099`): such a number is skipped,
 * so nothing is ever written into it, and it does not move the numbering.
 *
 * ```ts
 * const numbers = new CheckpointNumbers(4, [5, 99])
 * numbers.take()   // 4
 * numbers.take()   // 6 (5 is someone else's)
 * ```
 */
export class CheckpointNumbers {
  private readonly taken: ReadonlySet<number>
  private seq: number
  private lastTaken: number | undefined

  /** `first`: one past molotof's newest checkpoint; `taken`: the numbers of entries that are not molotof's. */
  constructor(first: number, taken: Iterable<number> = []) {
    this.taken = new Set(taken)
    this.seq = first
    this.skipTaken()
  }

  /** The number the next checkpoint gets. */
  get next(): number {
    return this.seq
  }

  /** The number the last `take` gave (undefined before the first). */
  get last(): number | undefined {
    return this.lastTaken
  }

  /** The next checkpoint's number, used up. */
  take(): number {
    const seq = this.seq++
    this.lastTaken = seq
    this.skipTaken()
    return seq
  }

  private skipTaken(): void {
    while (this.taken.has(this.seq)) this.seq++
  }
}

/**
 * What the numbering of a level starts from: one past molotof's newest
 * checkpoint listed there (complete or not, a user's folder left out), and
 * the numbers in use by entries that are not molotof's checkpoints
 * (`inUse`: every number named in the directory, folders and files).
 *
 * ```ts
 * numberingOf(await store.list(), await store.numbersInUse())   // { first: 4, taken: [99] }
 * ```
 */
export function numberingOf(listed: readonly { seq: number; foreign?: boolean }[], inUse: readonly number[]): { first: number; taken: number[] } {
  const own = listed.filter((s) => !s.foreign)
  const ownSeqs = new Set(own.map((s) => s.seq))
  return { first: own.reduce((m, s) => Math.max(m, s.seq + 1), 0), taken: inUse.filter((n) => !ownSeqs.has(n)) }
}
