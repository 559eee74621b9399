// Network namespaces for the many-hosts tests: each "node" of an mpirun run on
// this host gets its own namespace, with its own address on a veth pair whose
// other end is a port of one bridge, so that TCP between nodes crosses real
// (virtual) interfaces, and a test can cut or slow one node's link.
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createConnection, createServer, type Server, type Socket } from 'node:net'

const ip = (...args: string[]): void => void execFileSync('ip', args, { stdio: 'pipe' })
const tc = (...args: string[]): void => void execFileSync('tc', args, { stdio: 'pipe' })

/** Why namespaces cannot be used here (undefined when they can): they need root and iproute2. */
export function namespacesUnavailable(): string | undefined {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'not root (ip netns needs CAP_NET_ADMIN)'
  if (!existsSync('/usr/sbin/ip') && !existsSync('/sbin/ip') && !existsSync('/bin/ip')) return 'iproute2 (ip) is missing'
  try {
    ip('netns', 'list')
  } catch (e) {
    return `ip netns is unavailable: ${(e as Error).message.split('\n')[0]}`
  }
  return undefined
}

/**
 * `count` namespaces on one bridge: node i is namespace `${prefix}n${i}`, address
 * `${subnet}.(i+1)`/24 on its `eth0`, whose peer on the bridge is `${prefix}v${i}`;
 * with `hostOnBridge`, the host itself is `${subnet}.254` on the bridge (for a proxy
 * between nodes: choose a subnet of the test's own then, the host routes it).
 * Interface names are at most 15 characters: keep `prefix` under 12.
 *
 * ```ts
 * const net = new NodeNamespaces('nns123a', 3)
 * net.create()
 * spawn('mpirun', ['-np', '3', 'sh', '-c', `${net.exec} molotof run …`])
 * net.linkDown(1)
 * net.remove()
 * ```
 */
export class NodeNamespaces {
  constructor(
    readonly prefix: string,
    readonly count: number,
    readonly subnet = '10.77.0',
    readonly hostOnBridge = false,
  ) {}

  /** The host's address on the bridge (with `hostOnBridge`). */
  get hostAddress(): string {
    return `${this.subnet}.254`
  }

  /** The namespace of node `i`. */
  ns(i: number): string {
    return `${this.prefix}n${i}`
  }

  /** Node `i`'s address. */
  address(i: number): string {
    return `${this.subnet}.${i + 1}`
  }

  /** The bridge's end of node `i`'s veth pair (on the host). */
  hostEnd(i: number): string {
    return `${this.prefix}v${i}`
  }

  /** A shell command prefix that runs the rest in the namespace of the node mpirun numbers $OMPI_COMM_WORLD_RANK. */
  get enter(): string {
    return `ip netns exec ${this.prefix}n$OMPI_COMM_WORLD_RANK`
  }

  /** `enter`, the shell replaced by the command. */
  get exec(): string {
    return `exec ${this.enter}`
  }

  create(): void {
    const { prefix } = this
    ip('link', 'add', `${prefix}br`, 'type', 'bridge')
    ip('link', 'set', `${prefix}br`, 'up')
    if (this.hostOnBridge) ip('addr', 'add', `${this.hostAddress}/24`, 'dev', `${prefix}br`)
    for (let i = 0; i < this.count; i++) {
      ip('netns', 'add', this.ns(i))
      ip('link', 'add', this.hostEnd(i), 'type', 'veth', 'peer', 'name', 'eth0', 'netns', this.ns(i))
      ip('link', 'set', this.hostEnd(i), 'master', `${prefix}br`, 'up')
      ip('-n', this.ns(i), 'addr', 'add', `${this.address(i)}/24`, 'dev', 'eth0')
      ip('-n', this.ns(i), 'link', 'set', 'eth0', 'up')
      ip('-n', this.ns(i), 'link', 'set', 'lo', 'up')
    }
  }

  /** Remove what `create` made, whatever part of it exists (setting up may have failed halfway). */
  remove(): void {
    for (let i = 0; i < this.count; i++) {
      // The veth pair first: a namespace outlives its name while the kernel still holds sockets of it (a link cut
      // mid-connection), and its pair would stay on the host. Absent already: nothing to remove.
      try {
        ip('link', 'del', this.hostEnd(i))
      } catch {}
      // Absent already: nothing to remove.
      try {
        ip('netns', 'del', this.ns(i))
      } catch {}
    }
    // Absent already: nothing to remove.
    try {
      ip('link', 'del', `${this.prefix}br`)
    } catch {}
  }

  /** Bytes node `i` sent out through its link so far (what the bridge's end received). */
  sentBy(i: number): number {
    return Number(execFileSync('cat', [`/sys/class/net/${this.hostEnd(i)}/statistics/rx_bytes`], { encoding: 'utf8' }))
  }

  /** Node `i`'s own interface down, inside its namespace, as a failed NIC or cable: it reaches no one and no one reaches it. */
  linkDown(i: number): void {
    ip('-n', this.ns(i), 'link', 'set', 'eth0', 'down')
  }

  /** Node `i` cut from the others at the bridge (its own interface stays up): a partition of it | the rest. */
  cutOff(i: number): void {
    ip('link', 'set', this.hostEnd(i), 'down')
  }

  /** Node `i` joined to the bridge again after `cutOff` (namespaces shared by the tests of a file). */
  reconnect(i: number): void {
    ip('link', 'set', this.hostEnd(i), 'up')
  }

  /** Node `i`'s link slowed both ways to `rate` (tc tbf, e.g. '2mbit'): what it sends, and what it is sent. */
  rateLimit(i: number, rate: string): void {
    const tbf = ['root', 'tbf', 'rate', rate, 'burst', '16kb', 'latency', '400ms']
    tc('-n', this.ns(i), 'qdisc', 'add', 'dev', 'eth0', ...tbf)
    tc('qdisc', 'add', 'dev', this.hostEnd(i), ...tbf)
  }
}

/** How `delayingProxy` shapes the connections from one address: every chunk late by `delayMs`, and everything held for `stallMs` every `stallEveryMs`. */
export interface LinkShape {
  from: string
  delayMs: number
  stallEveryMs: number
  stallMs: number
}

/**
 * A TCP proxy in the test process: listens at `listen`, forwards each
 * connection to `target`; those coming from `shape.from` are delayed both ways
 * and stalled now and then (bytes kept in order, none lost), as a slow,
 * congested link does. `stalls()` counts the stalls that held bytes back.
 */
export async function delayingProxy(listen: { host: string; port: number }, target: { host: string; port: number }, shape: LinkShape): Promise<{ close: () => void; stalls: () => number }> {
  const sockets = new Set<Socket>()
  let stalledUntil = 0
  let stalls = 0
  let held = false
  const stallTimer = setInterval(() => {
    stalledUntil = Date.now() + shape.stallMs
    held = false
  }, shape.stallEveryMs)
  /** Bytes from `a` written to `b`, each chunk at max(its arrival + delay, the stall's end), in order. */
  const pipe = (a: Socket, b: Socket, shaped: boolean): void => {
    let last = 0
    a.on('data', (chunk: Buffer) => {
      if (!shaped) return void b.write(chunk)
      const now = Date.now()
      if (now < stalledUntil && !held) {
        held = true
        stalls++
      }
      last = Math.max(last, now + shape.delayMs, stalledUntil)
      setTimeout(() => b.writable && b.write(chunk), last - now)
    })
    a.on('close', () => setTimeout(() => b.destroy(), shaped ? Math.max(0, last - Date.now()) : 0))
    a.on('error', () => b.destroy())
  }
  // The target may not listen yet (node 0 starting): the client waits, as at a listening port, while its connection is retried.
  const reach = (client: Socket, triesLeft: number): void => {
    const upstream = createConnection(target)
    upstream.once('error', () => {
      upstream.destroy()
      if (triesLeft > 0 && !client.destroyed) setTimeout(() => reach(client, triesLeft - 1), 100)
      else client.destroy()
    })
    upstream.once('connect', () => {
      upstream.removeAllListeners('error')
      sockets.add(upstream)
      const shaped = client.remoteAddress?.replace(/^::ffff:/, '') === shape.from
      pipe(client, upstream, shaped)
      pipe(upstream, client, shaped)
      client.resume()
    })
  }
  const server: Server = createServer({ pauseOnConnect: true }, (client) => {
    sockets.add(client)
    reach(client, 100)
  })
  await new Promise<void>((resolve) => server.listen(listen.port, listen.host, () => resolve()))
  return {
    close: () => {
      clearInterval(stallTimer)
      for (const s of sockets) s.destroy()
      server.close()
    },
    stalls: () => stalls,
  }
}
