import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { parseDuration } from '../checkpoint/policy/duration.js'
import { ConfigError } from '../errors.js'
import { detectLauncher, parseHostPort, RENDEZVOUS_ENV, type ClusterPlace } from '../runtime/cluster-env.js'
import { ClusterLeader, runClusterAgent, type ClusterOptions } from '../runtime/cluster.js'
import { findTsconfig } from '../runtime/launcher.js'
import { option } from '../skeletons/options.js'

/** The flags of `molotof run` for runs started by a cluster launcher (mpirun, srun, flux). */
export const CLUSTER_OPTIONS = {
  ranksPerNode: option.int(1, 'under a cluster launcher (mpirun, srun, flux): ranks each node supervisor starts; ranks = nodes × this', { min: 1 }),
  rendezvous: option.string(undefined, `under a cluster launcher: host:port where node 0 listens and the other nodes join (else $${RENDEZVOUS_ENV}, else a file in --shared-dir)`),
  sharedDir: option.string(undefined, 'under a cluster launcher: a directory every node sees (node 0 writes its address there when --rendezvous is not given)'),
  nodeTimeout: option.string('30s', 'under a cluster launcher: a node supervisor silent this long is lost (also the limit for the rendezvous)'),
}

/** What `molotof run` reads for a cluster run. */
export interface ClusterFlags {
  ranksPerNode: number
  rendezvous: string | undefined
  sharedDir: string | undefined
  nodeTimeout: string
  heartbeat: number
}

/** This process's part in a cluster run: none, node 0 (runs the supervisor), or another node (runs its ranks as node 0 says). */
export type ClusterRole =
  | { kind: 'leader'; leader: ClusterLeader; place: ClusterPlace }
  | { kind: 'agent'; code: number }

/**
 * When a cluster launcher started this process, meet the other node
 * supervisors: node 0 returns the leader (its `startGroup` runs every node's
 * ranks), another node runs until node 0 says the run is over and returns its
 * exit code. Without a launcher: undefined, and nothing changes.
 *
 * ```ts
 * const role = await joinCluster(flags, program, programArgv, identity, dir, log)
 * if (role?.kind === 'agent') return role.code
 * ```
 */
export async function joinCluster(
  flags: ClusterFlags,
  program: string,
  settings: Record<string, unknown>,
  dir: string,
  log: (text: string) => void,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<ClusterRole | undefined> {
  const place = detectLauncher(env)
  if (!place) return undefined
  const seconds = parseDuration(flags.nodeTimeout)
  if (seconds === undefined) throw new ConfigError(`--node-timeout needs a positive duration such as 30s or 2m (got "${flags.nodeTimeout}")`)
  const fromEnv = env[RENDEZVOUS_ENV]
  const rendezvous =
    flags.rendezvous !== undefined
      ? parseHostPort(flags.rendezvous, '--rendezvous')
      : fromEnv !== undefined && fromEnv !== ''
        ? parseHostPort(fromEnv, RENDEZVOUS_ENV)
        : undefined
  const file = resolve(program)
  const identity: Record<string, string> = {
    launcher: place.launcher,
    'program file': `${createHash('sha256').update(readFileSync(file)).digest('hex').slice(0, 16)} (sha256 of ${file.split('/').pop()})`,
    'ranks per node': String(flags.ranksPerNode),
  }
  for (const [k, v] of Object.entries(settings)) identity[k] = typeof v === 'string' ? v : (JSON.stringify(v) ?? '(none)')
  const opts: ClusterOptions = {
    place,
    ranksPerNode: flags.ranksPerNode,
    rendezvous,
    sharedDir: flags.sharedDir === undefined ? undefined : resolve(flags.sharedDir),
    nodeTimeoutMs: seconds * 1000,
    beatMs: Math.max(50, Math.min(flags.heartbeat, 1000)),
    identity,
    dir,
    log,
  }
  if (place.node === 0) return { kind: 'leader', leader: await ClusterLeader.open(opts), place }
  return { kind: 'agent', code: await runClusterAgent(opts, { programFile: file, tsconfig: findTsconfig(file) }) }
}
