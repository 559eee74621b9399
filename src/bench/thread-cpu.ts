import { readdirSync, readFileSync } from 'node:fs'

/** CPU time of a run's processes, split into their main threads and every other thread, ms. */
export interface ThreadCpu {
  /** The processes' main threads (a rank's supersteps, its stall at a checkpoint point). */
  main: number
  /** Every other thread: the checkpoint helper thread's copies, CRCs and writes, and V8's and libuv's own threads. */
  other: number
}

/**
 * Watches the CPU time of the children of this process (a run's rank
 * processes) thread by thread, from /proc/<pid>/task/<tid>/schedstat
 * (nanoseconds on the CPU, Linux), sampled every `everyMs` while the run
 * goes: a thread's last sample stands for it once it is gone, so work done
 * in the last interval is missed (at most `everyMs` of each thread, the same
 * with and without checkpoints). Other work on the machine slows a run's
 * supersteps; it changes much less how much CPU a helper thread's job takes,
 * which is what this is for: the background work a checkpoint level sets
 * off, measured whatever the load.
 *
 * ```ts
 * const cpu = new ThreadCpuWatch(100)
 * await launch(…)
 * const { main, other } = cpu.stop()
 * ```
 */
export class ThreadCpuWatch {
  private readonly last = new Map<string, { ns: number; main: boolean }>()
  private readonly timer: NodeJS.Timeout

  constructor(everyMs = 100) {
    this.timer = setInterval(() => this.sample(), everyMs)
  }

  /** Takes a last sample and stops watching. */
  stop(): ThreadCpu {
    this.sample()
    clearInterval(this.timer)
    let main = 0
    let other = 0
    for (const t of this.last.values()) {
      if (t.main) main += t.ns
      else other += t.ns
    }
    return { main: main / 1e6, other: other / 1e6 }
  }

  private sample(): void {
    for (const pid of childrenOf(process.pid)) {
      let tids: string[]
      try {
        tids = readdirSync(`/proc/${pid}/task`)
      } catch {
        // The process ended between the two reads.
        continue
      }
      for (const tid of tids) {
        try {
          const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0])
          if (Number.isFinite(ns)) this.last.set(`${pid}/${tid}`, { ns, main: tid === String(pid) })
        } catch {
          // The thread ended between the two reads: its previous sample stands.
        }
      }
    }
  }
}

/** The pids whose parent is `parent` (field 4 of /proc/<pid>/stat). */
function childrenOf(parent: number): number[] {
  const out: number[] = []
  for (const name of readdirSync('/proc')) {
    if (name.charCodeAt(0) < 48 || name.charCodeAt(0) > 57) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent) out.push(Number(name))
    } catch {
      // The process ended while the list was read.
    }
  }
  return out
}
