/**
 * "Has this long passed?" asked once per superstep, reading the clock only
 * every k-th time: a clock read allocates (16 bytes for the boxed number),
 * which a superstep must not. k adapts so that reads stay about 2–20 ms
 * apart whatever the superstep's length.
 *
 * ```ts
 * const every250 = new SparseClock(250)
 * if (every250.due()) report()   // at most ~20 ms late
 * ```
 */
export class SparseClock {
  private every = 1
  private calls = 0
  private lastRead: number
  private lastDue: number

  constructor(private readonly periodMs: number) {
    this.lastRead = this.lastDue = performance.now()
  }

  /** True (and the period restarts) when `periodMs` has passed since the last time it was true. */
  due(): boolean {
    if (++this.calls < this.every) return false
    this.calls = 0
    const now = performance.now()
    const gap = now - this.lastRead
    this.lastRead = now
    if (gap < 2 && this.every < 4096) this.every *= 2
    else if (gap > 20 && this.every > 1) this.every >>= 1
    if (now - this.lastDue < this.periodMs) return false
    this.lastDue = now
    return true
  }

  /** Restart the period now. */
  reset(): void {
    this.lastDue = performance.now()
  }
}
