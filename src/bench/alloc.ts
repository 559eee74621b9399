import v8 from 'node:v8'

/** A running count of the bytes this thread's V8 heap allocates (see `startAllocationCount`). */
export interface AllocationCount {
  readonly profiler: v8.GCProfiler
  readonly usedAtStart: number
}

/**
 * Start counting the bytes the V8 heap of this thread allocates: what the
 * heap grew by, plus what every garbage collection in between freed (from
 * V8's own heap statistics before and after each collection).
 *
 * ```ts
 * const c = startAllocationCount()
 * work()
 * allocatedBytes(c)   // bytes allocated by work() (and anything else this thread ran)
 * ```
 */
export function startAllocationCount(): AllocationCount {
  const profiler = new v8.GCProfiler()
  profiler.start()
  return { profiler, usedAtStart: v8.getHeapStatistics().used_heap_size }
}

/** Stop the count and return the bytes allocated since `startAllocationCount`. */
export function allocatedBytes(c: AllocationCount): number {
  const usedAtEnd = v8.getHeapStatistics().used_heap_size
  const data = c.profiler.stop()
  let freed = 0
  for (const s of data?.statistics ?? []) freed += s.beforeGC.heapStatistics.usedHeapSize - s.afterGC.heapStatistics.usedHeapSize
  return usedAtEnd - c.usedAtStart + freed
}
