// The harness of the node-loss tests: cluster runs under Debian's Open MPI
// `mpirun` with every "node" on this host (its own `{node}` directories, and
// as root its own network namespace, namespaces.ts), and node supervisors
// started by hand with a launcher's variables (PMI_RANK/PMI_SIZE). One copy of
// what each test needs: starting the job, waiting on its output, finding and
// signalling a node's processes, reading the status file and events, and the
// serial references of the examples.
//
// ```ts
// const job = startMpirun(4, [...MOLOTOF_RUN, ...jacobiArgs(40, 2000), '--spare-nodes', '1',
//   '--checkpoint-dir', `${marker}{node}`, '--rendezvous', `127.0.0.1:${await freePort()}`, '--status-file', status],
//   { secret: 'a secret of these tests', recovery: true })
// try {
//   await until(job.out, /checkpoint 2 committed to partner/, job.ended)
//   loseNode(1, marker, job.out())                          // SIGKILL its tree, delete its directory
//   expect(await job.code, job.out()).toBe(0)                // --enable-recovery: 0 whatever
//   expect(statusOf(status)).toMatchObject({ exitCode: 0 })
//   expect(sameJacobiBits(job.out(), 40, 2000)).toBe(true)
// } finally {
//   killAll(4, marker)
// }
// ```
import { spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { expect } from 'vitest'
import { interiorSum, jacobiSerial } from '../../../examples/jacobi/serial.js'
import { resolveParams } from '../../../examples/swing/model/params.js'
import { valueSwing } from '../../../examples/swing/model/serial.js'
import { processesOfNode } from '../../../bench/mpirun-nodes.js'
import type { NodeNamespaces } from './namespaces.js'

export { processesOfNode }

export const MPIRUN = '/usr/bin/mpirun'
export const haveMpirun = existsSync(MPIRUN)

/** What each node supervisor runs: `molotof run` from the checkout. */
export const MOLOTOF_RUN = ['node', 'bin/molotof.mjs', 'run']

/**
 * mpirun as root needs the OMPI_ALLOW_* pair; oversubscribe: more nodes than cores. MOLOTOF_SECRET as a batch
 * script exports it: mpirun passes the environment to the nodes on this host.
 */
export function mpiEnvironment(secret: string): NodeJS.ProcessEnv {
  return { ...process.env, OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1', OMPI_MCA_rmaps_base_oversubscribe: '1', MOLOTOF_SECRET: secret }
}

/** A TCP port free on 127.0.0.1 a moment ago (for a rendezvous). */
export async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()))
  const port = (s.address() as { port: number }).port
  await new Promise((r) => s.close(r))
  return port
}

/** A started job (mpirun, or one node supervisor): `out()` grows with everything it printed. */
export interface Job {
  out: () => string
  code: Promise<number | null>
  ended: () => boolean
  pid: number
}

function started(command: string, args: string[], env: NodeJS.ProcessEnv, detached = false): Job {
  const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'], detached })
  let out = ''
  let ended = false
  child.stdout.on('data', (b: Buffer) => (out += b.toString()))
  child.stderr.on('data', (b: Buffer) => (out += b.toString()))
  const code = new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c))).finally(() => (ended = true))
  return { out: () => out, code, ended: () => ended, pid: child.pid! }
}

export interface MpirunOptions {
  /** MOLOTOF_SECRET for the nodes. */
  secret: string
  /** `--enable-recovery`: mpirun keeps the others when one node's processes end (and then exits 0 whatever). */
  recovery?: boolean
}

/** `mpirun [--enable-recovery] --bind-to none -np <nodes> <command…>` started (--bind-to none: Open MPI would pin each node supervisor, and all its ranks, to one core). */
export function startMpirun(nodes: number, command: string[], options: MpirunOptions): Job {
  const flags = options.recovery === true ? ['--enable-recovery'] : []
  return started(MPIRUN, [...flags, '--bind-to', 'none', '-np', String(nodes), ...command], mpiEnvironment(options.secret))
}

/** `startMpirun` to its end: the exit code and everything printed. */
export async function mpirun(nodes: number, command: string[], options: MpirunOptions): Promise<{ code: number | null; out: string }> {
  const job = startMpirun(nodes, command, options)
  const code = await job.code
  return { code, out: job.out() }
}

/**
 * `mpirun --enable-recovery -np <net.count>`, node i running `molotof run <args>` in namespace i, the rendezvous at
 * node 0's address unless given. mpirun exits 0 whatever its processes return: each node's code is printed ("node 2
 * exited with 76").
 */
export function startInNamespaces(net: NodeNamespaces, args: string[], secret: string, rendezvous = `${net.address(0)}:29500`): Job {
  const cmd = `${net.enter} ${MOLOTOF_RUN.join(' ')} ${args.join(' ')} --rendezvous ${rendezvous}; echo "node $OMPI_COMM_WORLD_RANK exited with $?"`
  return startMpirun(net.count, ['sh', '-c', cmd], { secret, recovery: true })
}

/**
 * One node supervisor started as a launcher starts it (PMI_RANK/PMI_SIZE), in a process group of its own so that
 * the node can be killed whole (`process.kill(-job.pid, …)`). `secret` undefined: MOLOTOF_SECRET unset.
 */
export function startNode(node: number, nodes: number, args: string[], secret: string | undefined): Job {
  const env: NodeJS.ProcessEnv = { ...process.env, PMI_RANK: String(node), PMI_SIZE: String(nodes) }
  delete env.MOLOTOF_SECRET
  if (secret !== undefined) env.MOLOTOF_SECRET = secret
  return started(process.execPath, [...MOLOTOF_RUN.slice(1), ...args], env, true)
}

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Poll `done` every `every` ms until it holds or `ms` passed; the time it took (ms). */
export async function poll(done: () => boolean, ms: number, every = 20): Promise<number> {
  const start = Date.now()
  while (!done() && Date.now() - start < ms) await tick(every)
  return Date.now() - start
}

/** Wait until `pattern` is in `text()` (or `stop()`, e.g. the job ended, or `ms` passed); the time it took (ms). */
export function until(text: () => string, pattern: RegExp, stop: () => boolean = () => false, ms = 45_000): Promise<number> {
  return poll(() => pattern.test(text()) || stop(), ms)
}

/** What `text()` holds after the first line matching `mark` (empty before it): to wait for what follows an event. */
export const after = (text: () => string, mark: RegExp) => (): string => text().split(mark)[1] ?? ''

/** Whether process `pid` still exists. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    // No such process.
    return false
  }
}

/** Whether process `pid` ended: gone, or a zombie its parent (mpirun) has not reaped yet. */
export function exited(pid: number): boolean {
  try {
    return / Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    // No such process.
    return true
  }
}

/** Send `signal` to each of `pids`, those that ended already passed over. */
export function signalEach(pids: number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal)
    } catch {
      // Ended already.
    }
  }
}

/** The child processes of `pid` whose command line contains `word`, in pid order. */
export function childrenOf(pid: number, word: string): number[] {
  const found: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (ppid === pid && readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(word)) found.push(Number(name))
    } catch {
      // Ended while the list was read.
    }
  }
  return found.sort((a, b) => a - b)
}

/** Node `node`'s supervisor: of its processes, the one whose command line holds `word` (the run's checkpoint directory, or `bin/molotof.mjs`). */
export function supervisorOf(node: number, marker: string, word = marker): number | undefined {
  return processesOfNode(node, marker).find((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(word)
    } catch {
      // Ended while read: not the one.
      return false
    }
  })
}

/** The rank processes of node `node` (its supervisor's children running a boot file), in pid order. */
export function rankProcessesOf(node: number, marker: string, boot = 'boot.mjs'): number[] {
  const supervisor = supervisorOf(node, marker)
  return supervisor === undefined ? [] : childrenOf(supervisor, boot)
}

/** `signal` to node `node`'s whole tree (its supervisor and rank processes); the pids signalled, at least one (asserted). */
export function signalNode(node: number, marker: string, signal: NodeJS.Signals, out = ''): number[] {
  const pids = processesOfNode(node, marker)
  expect(pids.length, out).toBeGreaterThan(0)
  for (const pid of pids) process.kill(pid, signal)
  return pids
}

/**
 * Node `node` lost as a machine is: `signal` to its whole tree (SIGKILL: it dies at once; SIGSTOP: it falls silent),
 * and its disk (`${marker}${node}`) and memory directory (`${memory}${node}`) deleted. The pids signalled.
 */
export function loseNode(node: number, marker: string, out: string, options: { memory?: string; signal?: NodeJS.Signals } = {}): number[] {
  const pids = signalNode(node, marker, options.signal ?? 'SIGKILL', out)
  rmSync(`${marker}${node}`, { recursive: true, force: true })
  if (options.memory !== undefined) rmSync(`${options.memory}${node}`, { recursive: true, force: true })
  return pids
}

/** SIGKILL every process of nodes 0 … nodes−1 of the run marked `marker` (a test's cleanup). */
export function killAll(nodes: number, marker: string): void {
  for (let node = 0; node < nodes; node++) signalEach(processesOfNode(node, marker), 'SIGKILL')
}

export type Event = { event: string; [k: string]: unknown }
/** The events an `--events` file holds, in order. */
export const eventsIn = (file: string): Event[] => readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Event)

export type Status = { state: string; exitCode: number | null; outcome: string | null; node: number; resumable?: boolean; message?: string; resume?: string }
/** The `--status-file`, or undefined before it is written. */
export const statusOf = (file: string): Status | undefined => (existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Status) : undefined)

/** Wait until the status file says the run ended (mpirun waits for a stopped node: the outcome is read there). */
export function statusEnded(file: string, stop: () => boolean = () => false, ms = 45_000): Promise<number> {
  return poll(() => statusOf(file)?.state === 'ended' || stop(), ms, 50)
}

/**
 * Wait for node 0's end in the status file (a cut-off node's supervisor may keep mpirun waiting), then for the
 * others (they end when node 0 tells them, or before; 10 s at most). A node that lost node 0 writes its own end
 * (76) there first: node 0's must come after it and stay.
 */
export async function endedByNode0(file: string, job: Job): Promise<Status | undefined> {
  await poll(() => (statusOf(file)?.state === 'ended' && statusOf(file)?.node === 0) || job.ended(), 45_000, 50)
  await Promise.race([job.code, tick(10_000)])
  return statusOf(file)
}

/** The result `--json` prints, among the log lines. */
export const jsonOf = <T>(out: string): T => JSON.parse(out.slice(out.indexOf('{\n'), out.lastIndexOf('\n}') + 2)) as T

/** The Jacobi example's arguments. */
export const jacobiArgs = (n: number, iterations: number): string[] => ['examples/jacobi/jacobi.ts', '--n', String(n), '--iterations', String(iterations)]
/** The checksum Jacobi prints ("checksum <x>"). */
export const checksumIn = (out: string): number => Number(/checksum (\S+)/.exec(out)?.[1])
/** Jacobi's checksum by the serial reference, written without molotof (examples/jacobi/serial.ts). */
export const jacobiBits = (n: number, iterations: number): number => interiorSum(jacobiSerial(n, iterations), n)
/** The checksum the run printed equals the serial reference's, bit for bit. */
export const sameJacobiBits = (out: string, n: number, iterations: number): boolean => Object.is(checksumIn(out), jacobiBits(n, iterations))
/** Swing's value by the serial valuation of the same parameters (one process, no checkpoints). */
export const swingValue = (preset: string, overrides: Parameters<typeof resolveParams>[1] = {}): number => valueSwing(resolveParams(preset, overrides)).value
/** The residual and checksum a Jacobi run printed with --json. */
export function jacobiResultOf(out: string): { residual: number; checksum: number } {
  const r = jsonOf<{ residual: number; checksum: number }>(out)
  return { residual: r.residual, checksum: r.checksum }
}
