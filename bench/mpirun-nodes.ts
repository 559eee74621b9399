// The processes of one "node" of a run under mpirun on this host, for the benchmarks and tests that kill or
// stop a whole node (bench/node-loss.ts, test/runtime/cluster/).
import { readdirSync, readFileSync } from 'node:fs'

/** The processes of node `node` of the runs whose command line or environment names `marker`: the node supervisor and its rank processes. */
export function processesOfNode(node: number, marker: string): number[] {
  const pids: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const environ = readFileSync(`/proc/${name}/environ`, 'utf8').split('\0')
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8')
      if (environ.includes(`OMPI_COMM_WORLD_RANK=${node}`) && (cmdline.includes(marker) || environ.some((e) => e.includes(marker)))) pids.push(Number(name))
    } catch {
      // A process that ended while the list was read: not one to stop.
    }
  }
  return pids
}
