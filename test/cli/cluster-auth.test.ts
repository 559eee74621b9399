// Only a run's own processes get into a cluster run: the rendezvous handshake
// on the run's secret, with nodes started by hand as a launcher would start
// them (PMI_RANK/PMI_SIZE), as in cluster.test.ts.
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs'
import { createConnection, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { serialize } from 'node:v8'
import { afterAll, describe, expect, it } from 'vitest'
import type { JacobiResult } from '../../examples/jacobi/jacobi.js'
import { launch } from '../../src/runtime/launch/launcher.js'
import { childrenOf, freePort, jacobiResultOf, startNode, until as untilSeen } from '../runtime/cluster/mpirun-job.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-cluster-auth-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
const JACOBI = 'examples/jacobi/jacobi.ts'
const JACOBI_ARGS = ['--n', '40', '--iterations', '300']

/** The pids of the rank processes `parent` started: a node keeps them across attempts (spare-boot.mjs hosts). */
const ranksOf = (parent: number): number[] => childrenOf(parent, 'spare-boot.mjs')

/** The TCP port process `pid` listens on, if any (its socket inodes matched in /proc/net/tcp). */
function listeningPort(pid: number): number | undefined {
  const inodes = new Set<string>()
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))
      if (m) inodes.add(m[1])
    }
    for (const line of readFileSync(`/proc/${pid}/net/tcp`, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/)
      if (f[3] === '0A' && inodes.has(f[9])) return parseInt(f[1].split(':')[1], 16)
    }
  } catch {
    // The process ended: it listens on nothing.
  }
  return undefined
}

/** Poll `find` until it gives a value (at most a minute). */
async function until<T>(find: () => T | undefined): Promise<T> {
  for (const end = Date.now() + 60_000; Date.now() < end; ) {
    const v = find()
    if (v !== undefined) return v
    await new Promise((r) => setTimeout(r, 5))
  }
  throw new Error('not found within a minute')
}

/** A raw frame of the rank transports (frames.ts): u32 length, u32 kind, f64 tag, payload. */
function rankFrame(kind: number, tag: number, payload: Uint8Array): Buffer {
  const h = Buffer.alloc(16 + payload.byteLength)
  h.writeUInt32LE(payload.byteLength, 0)
  h.writeUInt32LE(kind, 4)
  h.writeDoubleLE(tag, 8)
  h.set(payload, 16)
  return h
}

/** A connection to `port` once something listens there (node 0 takes a moment to start). */
async function connectWhenListening(port: number): Promise<Socket> {
  for (const until = Date.now() + 60_000; Date.now() < until; ) {
    const s = await new Promise<Socket | undefined>((resolve) => {
      const c = createConnection({ host: '127.0.0.1', port })
      c.once('connect', () => resolve(c))
      c.once('error', () => resolve(undefined))
    })
    if (s) return s
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`nothing listens at 127.0.0.1:${port}`)
}

/** One message of the rendezvous wire (cluster-wire.ts): u32 length, v8.serialize(message). */
function wireMessage(m: unknown): Buffer {
  const body = serialize(m)
  const head = Buffer.alloc(4)
  head.writeUInt32LE(body.length, 0)
  return Buffer.concat([head, body])
}

const common = (port: number, name: string) => [JACOBI, ...JACOBI_ARGS, '--rendezvous', `127.0.0.1:${port}`, '--checkpoint-dir', join(root, `${name}-{node}`), '--hang-timeout', '20000']

describe('cluster runs: only the run\'s own processes get in', () => {
  it("a stranger's well-formed messages at the rendezvous are refused and logged, and the run gives the bits of a run without it", async () => {
    const port = await freePort()
    const secret = 'the secret of this run, 32 chars'
    const args = [...common(port, 'stranger'), '--node-timeout', '30s', '--json']
    const a = startNode(0, 2, args, secret)
    const stranger = await connectWhenListening(port)
    stranger.on('error', () => {})
    const from = `127.0.0.1:${stranger.localPort}`
    // Well-formed, of the current attempt: a join as node 1 (which, read, would refuse the whole run: wrong size),
    // then a rank's message of generation 1.
    stranger.write(
      Buffer.concat([
        wireMessage({ t: 'join', node: 1, nodes: 3, identity: {}, machine: 'stranger', dir: '/tmp/x' }),
        wireMessage({ t: 'rank', gen: 1, m: { type: 'log', rank: 1, text: 'written by a stranger' } }),
      ]),
    )
    await new Promise<void>((r) => stranger.once('close', () => r())) // node 0 drops it
    await untilSeen(a.out, /refused a connection/, undefined, 60_000)
    const b = startNode(1, 2, args, secret)
    expect(await a.code, a.out()).toBe(0)
    expect(await b.code, b.out()).toBe(0)
    expect(a.out()).toContain(`warning: node 0: refused a connection to the rendezvous from ${from}: it did not start with the molotof handshake`)
    expect(a.out()).not.toMatch(/written by a stranger|inconsistent launcher sizes/)
    const straight = (await launch<JacobiResult>(JACOBI, { ranks: 2, argv: JACOBI_ARGS, onLog: () => {} })).value
    expect(jacobiResultOf(a.out())).toEqual({ residual: straight.residual, checksum: straight.checksum })
  })

  it("a stranger's well-formed frame of the current attempt at a rank's port is refused and logged, and the run gives the bits of a run without it", async () => {
    const port = await freePort()
    const secret = 'the secret of this run, 32 chars'
    const args = [...common(port, 'rankport'), '--node-timeout', '30s', '--json']
    const a = startNode(0, 2, args, secret)
    const b = startNode(1, 2, args, secret)
    // Node 1's rank held (stopped) as soon as it exists: node 0's rank 0 then listens until it is let go.
    const rank1 = await until(() => ranksOf(b.pid)[0])
    process.kill(rank1, 'SIGSTOP')
    try {
      const rank0 = await until(() => ranksOf(a.pid)[0])
      const rankPort = await until(() => listeningPort(rank0))
      const stranger = await connectWhenListening(rankPort)
      stranger.on('error', () => {})
      const from = `127.0.0.1:${stranger.localPort}`
      // A HELLO of rank 1 in attempt 1 (group of 2), then a halo-sized message it hopes gets delivered.
      const hello = Buffer.alloc(8)
      hello.writeUInt32LE(2, 0)
      hello.writeUInt32LE(1, 4)
      stranger.write(Buffer.concat([rankFrame(1, 1, hello), rankFrame(2, 0, new Uint8Array(336).fill(7))]))
      await new Promise<void>((r) => stranger.once('close', () => r())) // rank 0 drops it
      await untilSeen(a.out, /rank 0: refused a connection/, undefined, 60_000)
      expect(a.out()).toContain(`warning: rank 0: refused a connection from ${from}: it did not start with the molotof handshake`)
    } finally {
      process.kill(rank1, 'SIGCONT')
    }
    expect(await a.code, a.out()).toBe(0)
    expect(await b.code, b.out()).toBe(0)
    expect(a.out()).not.toMatch(/restarts [1-9]/) // no rank failed on the way
    const straight = (await launch<JacobiResult>(JACOBI, { ranks: 2, argv: JACOBI_ARGS, onLog: () => {} })).value
    expect(jacobiResultOf(a.out())).toEqual({ residual: straight.residual, checksum: straight.checksum })
  })

  it('nodes given different secrets: the joining node is refused with a clear error, node 0 names the failed handshake', async () => {
    const port = await freePort()
    const args = [...common(port, 'wrong'), '--node-timeout', '3s']
    const a = startNode(0, 2, args, 'the secret node 0 was given....')
    const b = startNode(1, 2, args, 'another secret, given to node 1')
    expect(await b.code, b.out()).toBe(2)
    expect(b.out()).toMatch(new RegExp(`node 1: the rendezvous at 127\\.0\\.0\\.1:${port} failed the handshake: it did not prove it knows this run's secret; the nodes were given different secrets`))
    expect(await a.code, a.out()).toBe(1)
    expect(a.out()).toMatch(/warning: node 0: refused a connection to the rendezvous from 127\.0\.0\.1:\d+: it closed the connection during the handshake/)
    expect(a.out()).toMatch(/node 1 did not join the rendezvous within 3\.0 s \(--node-timeout\); 1 connection failed the handshake \(a node given another secret\?\)/)
  })

  it('without a secret a cluster run is refused before it listens, saying how to give one; --insecure-cluster runs it with a warning', async () => {
    const port = await freePort()
    const refused = startNode(0, 2, common(port, 'none'), undefined)
    expect(await refused.code).toBe(2)
    expect(refused.out()).toMatch(/a cluster run needs a secret shared by its nodes.*export MOLOTOF_SECRET=\$\(openssl rand -hex 32\).*--shared-dir DIR.*--insecure-cluster/)
    const short = startNode(0, 2, common(port, 'none'), 'short')
    expect(await short.code).toBe(2)
    expect(short.out()).toMatch(/\$MOLOTOF_SECRET is 5 bytes long: a secret needs 16 or more/)

    const args = [...common(port, 'insecure'), '--insecure-cluster', '--json']
    const a = startNode(0, 2, args, undefined)
    const b = startNode(1, 2, args, undefined)
    expect(await a.code, a.out()).toBe(0)
    expect(await b.code, b.out()).toBe(0)
    expect(a.out()).toMatch(/warning: node 0: a cluster run without a secret \(--insecure-cluster\): any process that reaches the nodes' ports could join it/)
  })

  it('with --shared-dir and no MOLOTOF_SECRET, the nodes share a mode-0600 secret file there', async () => {
    const shared = join(root, 'shared')
    const args = [JACOBI, ...JACOBI_ARGS, '--shared-dir', shared, '--checkpoint-dir', join(root, 'file-{node}'), '--hang-timeout', '20000', '--node-timeout', '30s', '--json']
    const a = startNode(0, 2, args, undefined)
    const b = startNode(1, 2, args, undefined)
    expect(await a.code, a.out()).toBe(0)
    expect(await b.code, b.out()).toBe(0)
    expect(statSync(join(shared, 'molotof-secret')).mode & 0o777).toBe(0o600)
  })
})
