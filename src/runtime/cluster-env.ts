import { readdirSync } from 'node:fs'
import { join, sep } from 'node:path'
import { ConfigError } from '../errors.js'

/** Which cluster launcher started this process. */
export type LauncherKind = 'openmpi' | 'pmix' | 'pmi' | 'flux' | 'slurm'

/** This process's place among the node supervisors a cluster launcher started. */
export interface ClusterPlace {
  launcher: LauncherKind
  /** This supervisor's node index, 0-based (node 0 hosts the rendezvous). */
  node: number
  /** Number of node supervisors started by the launcher. */
  nodes: number
  /** An id of this launch shared by every node (job and step), when the launcher gives one. */
  launchId: string | undefined
}

type Env = Readonly<Record<string, string | undefined>>

/**
 * The launchers molotof recognises, innermost first: when `mpirun` runs inside
 * a Slurm job, the job's `SLURM_*` variables leak into mpirun's processes, so
 * Open MPI's own variables must win. Each names its rank and size variables,
 * and the variables of the same launch that must agree with them.
 */
const LAUNCHERS: ReadonlyArray<{ kind: LauncherKind; rank: string; size: string[]; sameRank: string[]; id: string[] }> = [
  { kind: 'openmpi', rank: 'OMPI_COMM_WORLD_RANK', size: ['OMPI_COMM_WORLD_SIZE'], sameRank: ['PMIX_RANK'], id: ['OMPI_MCA_ess_base_jobid', 'PMIX_NAMESPACE'] },
  // PMIx sets no size variable; the launcher that started the PMIx server does.
  { kind: 'pmix', rank: 'PMIX_RANK', size: ['PMIX_SIZE', 'SLURM_NTASKS', 'FLUX_JOB_SIZE'], sameRank: ['SLURM_PROCID'], id: ['PMIX_NAMESPACE'] },
  { kind: 'flux', rank: 'FLUX_TASK_RANK', size: ['FLUX_JOB_SIZE'], sameRank: ['PMI_RANK'], id: ['FLUX_JOB_ID'] },
  { kind: 'pmi', rank: 'PMI_RANK', size: ['PMI_SIZE'], sameRank: ['SLURM_PROCID'], id: ['PMI_KVSNAME'] },
  { kind: 'slurm', rank: 'SLURM_PROCID', size: ['SLURM_NTASKS', 'SLURM_NPROCS'], sameRank: [], id: ['SLURM_JOB_ID'] },
]

/**
 * Where this process stands among the processes a cluster launcher (Open MPI's
 * `mpirun`, PMIx, PMI, Flux, Slurm's `srun`) started, or undefined when no
 * launcher started it (then molotof runs on one host as always). Refuses
 * inconsistent variables (a rank outside the size, a size missing, two
 * variables of the same launch that disagree) with a ConfigError naming them.
 *
 * ```ts
 * const place = detectLauncher(process.env)   // { launcher: 'openmpi', node: 1, nodes: 2, … }
 * ```
 */
export function detectLauncher(env: Env): ClusterPlace | undefined {
  for (const l of LAUNCHERS) {
    const rankText = env[l.rank]
    if (rankText === undefined || rankText === '') continue
    const node = count(l.rank, rankText)
    const sizeVar = l.size.find((v) => env[v] !== undefined && env[v] !== '')
    if (sizeVar === undefined) {
      throw new ConfigError(`the launcher set ${l.rank}=${rankText} but none of ${l.size.join(', ')}: molotof cannot tell how many node supervisors were started`)
    }
    const nodes = count(sizeVar, env[sizeVar]!)
    if (nodes < 1 || node >= nodes) {
      throw new ConfigError(`inconsistent launcher environment: ${l.rank}=${node} but ${sizeVar}=${nodes} (a rank must be below the size)`)
    }
    for (const v of l.sameRank) {
      const other = env[v]
      if (other !== undefined && other !== '' && other !== rankText) {
        throw new ConfigError(`inconsistent launcher environment: ${l.rank}=${rankText} but ${v}=${other} (both name this process's rank in one launch)`)
      }
    }
    const step = l.kind === 'slurm' && env.SLURM_STEP_ID !== undefined ? `.${env.SLURM_STEP_ID}` : ''
    const idVar = l.id.find((v) => env[v] !== undefined && env[v] !== '')
    return { launcher: l.kind, node, nodes, launchId: idVar === undefined ? undefined : `${l.kind}:${env[idVar]}${step}` }
  }
  return undefined
}

function count(name: string, text: string): number {
  if (!/^\d+$/.test(text.trim())) throw new ConfigError(`inconsistent launcher environment: ${name}=${JSON.stringify(text)} is not a non-negative integer`)
  return Number(text.trim())
}

/** A host and TCP port, as in `--rendezvous host:port`. */
export interface HostPort {
  host: string
  port: number
}

/**
 * Parse `host:port` (`[::1]:29500` for IPv6), refusing anything else by name.
 *
 * ```ts
 * parseHostPort('127.0.0.1:29500', '--rendezvous')   // { host: '127.0.0.1', port: 29500 }
 * ```
 */
export function parseHostPort(text: string, what: string): HostPort {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(text) ?? /^([^:\s]+):(\d+)$/.exec(text)
  const port = m ? Number(m[2]) : NaN
  if (!m || !(port >= 1 && port <= 65535)) {
    throw new ConfigError(`${what} needs host:port with a port in 1..65535, such as 127.0.0.1:29500 or node001:29500 (got ${JSON.stringify(text)})`)
  }
  return { host: m[1], port }
}

/** The environment variable that may give node 0's address instead of `--rendezvous`. */
export const RENDEZVOUS_ENV = 'MOLOTOF_RENDEZVOUS'

/** The file node 0 writes in `--shared-dir` when neither `--rendezvous` nor MOLOTOF_RENDEZVOUS says where it listens. */
export const RENDEZVOUS_FILE = 'molotof-rendezvous.json'

const PLACEHOLDER = /\{([^{}]*)\}/g

/**
 * Check the placeholders of a checkpoint directory template: `{node}` (this
 * node's index) and `{rank}` (the rank's global number) are known, anything
 * else in braces is refused.
 *
 * ```ts
 * checkDirTemplate('/local/ckpt-{node}')   // ok
 * ```
 */
export function checkDirTemplate(dir: string): { node: boolean; rank: boolean } {
  const found = { node: false, rank: false }
  for (const m of dir.matchAll(PLACEHOLDER)) {
    if (m[1] === 'node') found.node = true
    else if (m[1] === 'rank') found.rank = true
    else throw new ConfigError(`--checkpoint-dir ${dir}: unknown placeholder {${m[1]}} (known: {node}, {rank})`)
  }
  return found
}

/**
 * The checkpoint directory of one rank: `{node}` and `{rank}` replaced.
 *
 * ```ts
 * expandDir('/local/ckpt-{node}/r{rank}', 1, 3)   // '/local/ckpt-1/r3'
 * ```
 */
export function expandDir(dir: string, node: number, rank: number): string {
  return dir.replaceAll('{node}', String(node)).replaceAll('{rank}', String(rank))
}

/**
 * Every existing directory on this host that a `{node}`/`{rank}` template
 * matches (any path component may hold placeholders), sorted; the template
 * itself when it has none (whether or not it exists). A resume reads them
 * all: after a lost node the survivors' directories carry other numbers than
 * the ranks of the relaunch.
 *
 * ```ts
 * matchingDirectories('/local/ckpt-{node}')   // ['/local/ckpt-0', '/local/ckpt-1'] (those present)
 * ```
 */
export function matchingDirectories(template: string): string[] {
  if (!/\{(node|rank)\}/.test(template)) return [template]
  const parts = template.split(sep)
  let found = [parts[0] === '' ? sep : parts[0]]
  for (const part of parts.slice(1)) {
    if (part === '') continue
    if (!/\{(node|rank)\}/.test(part)) {
      found = found.map((d) => join(d, part))
      continue
    }
    const pattern = new RegExp(`^${part.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{(node|rank)\}/g, '\\d+')}$`)
    found = found.flatMap((d) => {
      try {
        return readdirSync(d, { withFileTypes: true })
          .filter((e) => e.isDirectory() && pattern.test(e.name))
          .map((e) => join(d, e.name))
      } catch {
        // Absent or unreadable: nothing of the run there.
        return []
      }
    })
  }
  return found.sort()
}
