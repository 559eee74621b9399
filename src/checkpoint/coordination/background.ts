/**
 * The file work a rank started in the background (memory writes, flushes,
 * commit markers, copies), tracked until it ends. A run stopped from outside
 * waits for all of it before its process may run the program again (a kept
 * survivor of a failure): nothing of the stopped run can then write, rename
 * or delete a checkpoint file behind the new run's back.
 *
 * ```ts
 * const background = new BackgroundWork()
 * const durable = background.track(writeInTheBackground())
 * await background.settled()   // every tracked promise has ended, however
 * ```
 */
export class BackgroundWork {
  private readonly running = new Set<Promise<unknown>>()

  /** `work`, tracked until it settles; returned as it is. */
  track<T>(work: Promise<T>): Promise<T> {
    this.running.add(work)
    const ended = () => this.running.delete(work)
    work.then(ended, ended)
    return work
  }

  /** Nothing tracked is running. */
  get idle(): boolean {
    return this.running.size === 0
  }

  /** Resolves once everything tracked (including what was tracked while waiting) has settled; never rejects. */
  async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running])
  }
}
