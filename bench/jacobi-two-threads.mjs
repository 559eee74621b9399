// A hand-written 2-thread Jacobi (no framework): two workers share both grids
// (SharedArrayBuffer), split the rows, and meet at an Atomics barrier after
// each sweep (spin, then wait). The ceiling molotof's 2 ranks are compared with in bench:jacobi.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads'

/** Seconds of `iterations` sweeps on an n×n interior with `threads` workers (loop only). */
export async function jacobiThreads(n, iterations, threads) {
  const w = n + 2
  const a = new SharedArrayBuffer(w * w * 8)
  const b = new SharedArrayBuffer(w * w * 8)
  const bar = new SharedArrayBuffer(8)
  const times = await Promise.all(
    Array.from({ length: threads }, (_, t) =>
      new Promise((resolve, reject) => {
        const worker = new Worker(new URL(import.meta.url), { workerData: { a, b, bar, t, threads, n, iterations } })
        worker.on('message', resolve)
        worker.on('error', reject)
      }),
    ),
  )
  return Math.max(...times)
}

if (!isMainThread) {
  const { a, b, bar, t, threads, n, iterations } = workerData
  const w = n + 2
  let u = new Float64Array(a)
  let v = new Float64Array(b)
  const sync = new Int32Array(bar)
  for (let j = 0; j < w; j++) {
    u[j] = 1
    v[j] = 1
  }
  const lo = 1 + Math.floor((n * t) / threads)
  const hi = 1 + Math.floor((n * (t + 1)) / threads)
  // Spin first (the other thread is usually a few µs away), then sleep on the counter.
  const barrier = (gen) => {
    const target = threads * gen
    if (Atomics.add(sync, 0, 1) + 1 === target) {
      Atomics.notify(sync, 0)
      return
    }
    for (let spin = 0; spin < 4000; spin++) if (Atomics.load(sync, 0) >= target) return
    let seen
    while ((seen = Atomics.load(sync, 0)) < target) Atomics.wait(sync, 0, seen, 10)
  }
  barrier(1)
  const t0 = performance.now()
  for (let it = 0; it < iterations; it++) {
    for (let i = lo; i < hi; i++) {
      const r = i * w
      for (let j = 1; j <= n; j++) v[r + j] = 0.25 * (u[r + j - 1] + u[r + j + 1] + u[r - w + j] + u[r + w + j])
    }
    barrier(it + 2)
    const x = u
    u = v
    v = x
  }
  parentPort.postMessage((performance.now() - t0) / 1000)
}
