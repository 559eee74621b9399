import { createHash } from 'node:crypto'
import { readFileSync, statSync } from 'node:fs'
import { basename, join, resolve } from 'node:path'
import type { FaultToleranceConfig } from '../checkpoint/config.js'
import { parseDuration } from '../checkpoint/policy/duration.js'
import { checkRedundancy } from '../checkpoint/redundancy/sets.js'
import { ConfigError } from '../errors.js'
import { detectLauncher, parseHostPort, RENDEZVOUS_ENV, type ClusterPlace, type HostPort } from '../runtime/cluster-env.js'
import { ClusterLeader, runClusterAgent, type ClusterOptions, type StandDown, type Succession } from '../runtime/cluster/cluster.js'
import { clusterSecret, SECRET_ENV } from '../runtime/cluster/secret.js'
import { compileProgram } from '../runtime/compiled-program.js'
import { findTsconfig } from '../runtime/launch/launcher.js'
import { option } from '../skeletons/options.js'

/** The flags of `molotof run` for runs started by a cluster launcher (mpirun, srun, flux). */
export const CLUSTER_OPTIONS = {
  ranksPerNode: option.int(1, 'under a cluster launcher (mpirun, srun, flux): ranks each node supervisor starts; ranks = nodes × this', { min: 1 }),
  rendezvous: option.string(undefined, `under a cluster launcher: host:port where node 0 listens and the other nodes join (else $${RENDEZVOUS_ENV}, else a file in --shared-dir)`),
  sharedDir: option.string(undefined, 'a directory every node sees: node 0 writes its address there when --rendezvous is not given, and --shared-checkpoint copies checkpoints there (read by --resume, with or without --shared-checkpoint)'),
  sharedCheckpoint: option.string(undefined, 'copy complete disk checkpoints to --shared-dir in the background: every:<k> (every k-th one) or a duration such as 10m (the first one after that long)'),
  partnerCopies: option.choice(['auto', 'on', 'off'] as const, 'auto', "keep each rank's disk checkpoint also on the next node (sent in the background): auto = on with two nodes or more"),
  redundancy: option.string('partner', "what protects a lost node's checkpoints: partner (each rank's files kept whole by a rank of the next node) or xor:<G> (the ranks of G nodes form a set; each keeps one parity slice of its set, 1/(G-1) of a file, and a lost member's files are rebuilt from the others)"),
  nodeTimeout: option.string('30s', 'under a cluster launcher: a node supervisor silent this long is lost (also the limit for the rendezvous)'),
  insecureCluster: option.boolean(
    false,
    `under a cluster launcher with neither $${SECRET_ENV} nor --shared-dir: run without a secret (no handshake: any process that reaches the nodes' ports could join the run; only on a network you trust)`,
  ),
  spareNodes: option.int(0, 'under a cluster launcher: the last K node supervisors stand by (rank processes started warm, computing nothing); a lost node (node 0 included) is replaced by one inside the run', { min: 0 }),
}

/** What `molotof run` reads for a cluster run. */
export interface ClusterFlags {
  ranksPerNode: number
  rendezvous: string | undefined
  sharedDir: string | undefined
  sharedCheckpoint: string | undefined
  partnerCopies: 'auto' | 'on' | 'off'
  redundancy: string
  nodeTimeout: string
  heartbeat: number
  insecureCluster: boolean
  spareNodes: number
}

/**
 * The copy levels of a run from its flags: partner copies (on by default
 * with two nodes or more; asked for on one node, refused: there is no
 * partner) and the shared level (`--shared-checkpoint` needs
 * `--shared-dir`; its checkpoints go to `<shared-dir>/<program name>`).
 * `--redundancy xor:G` replaces partner copies by XOR parity slices (sets of
 * G nodes: at least 2, at most the node count).
 *
 * ```ts
 * Object.assign(ft, copyLevels(flags, { nodes: 2, ranksPerNode: 1 }, 'examples/jacobi/jacobi.ts'))
 * ```
 */
export function copyLevels(
  flags: Pick<ClusterFlags, 'sharedDir' | 'sharedCheckpoint' | 'partnerCopies' | 'ranksPerNode'> & Partial<Pick<ClusterFlags, 'redundancy'>>,
  nodes: number,
  program: string,
): Pick<FaultToleranceConfig, 'partner' | 'shared' | 'xor'> {
  const out: Pick<FaultToleranceConfig, 'partner' | 'shared' | 'xor'> = {}
  const xor = xorFlag(flags.redundancy ?? 'partner', flags.partnerCopies, nodes, flags.ranksPerNode)
  if (flags.partnerCopies === 'on' && nodes < 2) {
    throw new ConfigError(
      '--partner-copies on: this run has one node, so there is no partner on another node to keep the copies ' +
        '(partner copies need a cluster launcher starting two node supervisors or more)',
    )
  }
  if (flags.sharedDir !== undefined && flags.sharedDir.trim() !== '' && isFile(resolve(flags.sharedDir))) {
    throw new ConfigError(`--shared-dir ${flags.sharedDir} is a file, not a directory`)
  }
  if (xor) out.xor = xor
  else if (flags.partnerCopies !== 'off' && nodes >= 2) out.partner = { ranksPerNode: flags.ranksPerNode }
  if (flags.sharedCheckpoint !== undefined) {
    if (flags.sharedDir === undefined) throw new ConfigError('--shared-checkpoint copies checkpoints to the shared directory: give --shared-dir DIR too (a directory every node sees)')
    if (flags.sharedDir.trim() === '') throw new ConfigError('--shared-dir needs a directory path (got an empty value)')
    const dir = join(resolve(flags.sharedDir), basename(program).replace(/\.[^.]+$/, ''))
    const every = /^every:(\d+)$/.exec(flags.sharedCheckpoint)
    const seconds = every ? undefined : parseDuration(flags.sharedCheckpoint)
    if (every && Number(every[1]) >= 1) out.shared = { dir, every: Number(every[1]) }
    else if (seconds !== undefined) out.shared = { dir, seconds }
    else throw new ConfigError(`--shared-checkpoint needs every:<k> (k ≥ 1) or a duration such as 10m (got "${flags.sharedCheckpoint}")`)
  }
  return out
}

/**
 * `--spare-nodes K` checked against the launcher's node count before any rank
 * starts: it needs a cluster launcher and at least one working node; and a
 * spare node restores a lost node's ranks from copies kept on other nodes, so
 * the run must keep some (partner copies or the shared level).
 *
 * ```ts
 * checkSpareNodes(1, 4)                                    // fine: 3 working nodes, 1 spare
 * checkSpareNodes(1, undefined)                            // ConfigError: needs a cluster launcher
 * checkSpareCopies(1, {})                                  // ConfigError: a lost node's data would be gone
 * ```
 */
export function checkSpareNodes(spareNodes: number, nodes: number | undefined): void {
  if (!Number.isInteger(spareNodes) || spareNodes < 0) throw new ConfigError(`--spare-nodes must be a non-negative whole number (got ${spareNodes})`)
  if (spareNodes === 0) return
  if (nodes === undefined) {
    throw new ConfigError(`--spare-nodes ${spareNodes}: spare nodes are node supervisors a cluster launcher starts (mpirun, srun, flux); this run has no launcher`)
  }
  if (spareNodes >= nodes) {
    throw new ConfigError(`--spare-nodes ${spareNodes}: the launcher started ${nodes} node supervisor${nodes > 1 ? 's' : ''}, so no node would be left to work (at most ${nodes - 1})`)
  }
}

/** With spare nodes, the run must keep copies of each node's checkpoints elsewhere, or their XOR parity (see checkSpareNodes). */
export function checkSpareCopies(spareNodes: number, copies: Pick<FaultToleranceConfig, 'partner' | 'shared' | 'xor'>): void {
  if (spareNodes > 0 && !copies.partner && !copies.xor && !copies.shared) {
    throw new ConfigError(
      `--spare-nodes ${spareNodes}: this run keeps no copy of a node's checkpoints on another node (--partner-copies off, or one working node, and no --shared-checkpoint), ` +
        "so a lost node's data would be gone and a spare node could not take its ranks over: keep partner copies (two working nodes or more), XOR parity (--redundancy xor:G) or a shared level",
    )
  }
}

/** `--redundancy`: undefined for `partner`, the XOR sets for `xor:G` (checked against the nodes: refused before they meet). */
function xorFlag(value: string, partnerCopies: ClusterFlags['partnerCopies'], nodes: number, ranksPerNode: number): FaultToleranceConfig['xor'] {
  if (value === 'partner') return undefined
  const m = /^xor:(\d+)$/.exec(value)
  if (!m) throw new ConfigError(`--redundancy needs partner or xor:<G> (G nodes per set, 2 or more), got "${value}"`)
  if (partnerCopies === 'on') throw new ConfigError(`--redundancy ${value} replaces partner copies: drop --partner-copies on`)
  const xor = { setSize: Number(m[1]), ranksPerNode }
  checkRedundancy(nodes * ranksPerNode, { xor })
  return xor
}

/** Something other than a directory is at `path` (absent: false). */
function isFile(path: string): boolean {
  try {
    return !statSync(path).isDirectory()
  } catch {
    // Nothing there: the directory is created later.
    return false
  }
}

/**
 * The cluster flags' values, checked whether or not a launcher started this
 * process: a typo in a batch script's `--node-timeout` or `--rendezvous` is
 * refused on a test run on one host too, not first on the cluster.
 *
 * ```ts
 * checkClusterFlags({ nodeTimeout: '30s', rendezvous: 'node001:29500' })   // { nodeTimeoutSeconds: 30, rendezvous: { host: 'node001', port: 29500 } }
 * ```
 */
export function checkClusterFlags(flags: Pick<ClusterFlags, 'nodeTimeout' | 'rendezvous'>): { nodeTimeoutSeconds: number; rendezvous: HostPort | undefined } {
  const nodeTimeoutSeconds = parseDuration(flags.nodeTimeout)
  if (nodeTimeoutSeconds === undefined) throw new ConfigError(`--node-timeout needs a positive duration such as 30s or 2m (got "${flags.nodeTimeout}")`)
  return { nodeTimeoutSeconds, rendezvous: flags.rendezvous === undefined ? undefined : parseHostPort(flags.rendezvous, '--rendezvous') }
}

/**
 * This process's part in a cluster run: none, node 0 (runs the supervisor), another node (runs its ranks as the
 * coordinator says, and returns the run's code), or the successor of a lost coordinator (runs the supervisor from
 * then on).
 */
export type ClusterRole =
  | { kind: 'leader'; leader: ClusterLeader; place: ClusterPlace }
  | { kind: 'agent'; code: number; leader?: undefined }
  | { kind: 'successor'; leader: ClusterLeader; place: ClusterPlace; succession: Succession }

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
  onDropped: (how: StandDown) => void = () => {},
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<ClusterRole | undefined> {
  const place = detectLauncher(env)
  if (!place) return undefined
  const { nodeTimeoutSeconds: seconds, rendezvous: given } = checkClusterFlags(flags)
  const fromEnv = env[RENDEZVOUS_ENV]
  const rendezvous = given ?? (fromEnv !== undefined && fromEnv !== '' ? parseHostPort(fromEnv, RENDEZVOUS_ENV) : undefined)
  const sharedDir = flags.sharedDir === undefined ? undefined : resolve(flags.sharedDir)
  // Before anything listens or connects: a run without a secret is refused unless asked for.
  const secret = clusterSecret(env, place.nodes, sharedDir, flags.insecureCluster)
  if (!secret) log(`warning: node ${place.node}: a cluster run without a secret (--insecure-cluster): any process that reaches the nodes' ports could join it`)
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
    sharedDir,
    nodeTimeoutMs: seconds * 1000,
    beatMs: Math.max(50, Math.min(flags.heartbeat, 1000)),
    identity,
    dir,
    log,
    secret,
    spareNodes: flags.spareNodes,
    rankHeartbeatMs: flags.heartbeat,
  }
  if (place.node === 0) return { kind: 'leader', leader: await ClusterLeader.open(opts), place }
  const tsconfig = findTsconfig(file)
  // This node's own copy: node 0's compiled file may not exist on this host.
  const { compiled } = await compileProgram(file, tsconfig)
  const end = await runClusterAgent(opts, { programFile: file, tsconfig, compiled }, onDropped)
  return typeof end === 'number' ? { kind: 'agent', code: end } : { kind: 'successor', leader: end.leader, place, succession: end }
}
