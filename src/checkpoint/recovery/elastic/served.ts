import { CheckpointCorruptError, CheckpointError, InternalError } from '../../../errors.js'
import type { Communicator } from '../../../routing/communicator.js'
import { FRAMEWORK_TAGS } from '../../../routing/tags.js'
import { post, postChunks, recvStatus } from '../../store/partner.js'
import type { FileServer } from './coverage.js'
import { sumCounters, type ByteRange, type RangeRequest, type RankFileSource, type SourceCounters, type SourceHeader } from './source.js'

/** The tag of served ranges. */
const TAG = FRAMEWORK_TAGS.elasticRead

/** A failure a server reports instead of the bytes asked for. */
interface ServeFailure {
  file: string
  reason: string
  /** The file is damaged (CheckpointCorruptError), rather than unreadable. */
  corrupt: boolean
}

/**
 * The old rank files of an elastic line spread over the ranks: each file is
 * read by its server (`servers[r]`, the rank that found it valid, on the
 * fastest level), and by any rank whose own store at that level is the same
 * directory (`local[r]`); every other rank asks the server for the byte
 * ranges it needs and gets exactly those over the communicator. So a run
 * that lost a node resumes on the ranks left from their own disks and the
 * partner copies they keep, on any rank count.
 *
 * ```ts
 * const source = new ServedSource(comm, servers, local, names, 'the ranks’ directories')
 * const buffers = await source.readAll(seq, requests)   // collective
 * ```
 */
export class ServedSource implements RankFileSource {
  constructor(
    private readonly comm: Communicator,
    private readonly servers: readonly FileServer[],
    /** Per old rank: where this rank reads the file itself, or undefined (it asks the server). */
    private readonly local: readonly (RankFileSource | undefined)[],
    /** Per old rank: the file where its server reads it, for messages. */
    private readonly names: readonly string[],
    readonly where: string,
  ) {}

  get counters(): SourceCounters {
    return sumCounters(this.local)
  }

  homeOf(oldRank: number): number {
    return this.servers[oldRank].rank
  }

  nameOf(_seq: number, rank: number): string {
    return this.names[rank]
  }

  header(seq: number, rank: number): Promise<SourceHeader> {
    return this.localOf(rank).header(seq, rank)
  }

  readRanges(seq: number, rank: number, dataStart: number, ranges: readonly ByteRange[], into?: readonly (Uint8Array | undefined)[]): Promise<Uint8Array[]> {
    return this.localOf(rank).readRanges(seq, rank, dataStart, ranges, into)
  }

  async readAll(seq: number, requests: readonly RangeRequest[]): Promise<Uint8Array[][]> {
    const { comm } = this
    const out: Uint8Array[][] = requests.map(() => [])
    // What this rank asks of servers: [old rank, data start, range count, offset, length, …].
    const asks: number[] = []
    const remote: number[] = []
    requests.forEach((q, r) => {
      if (q.ranges.length === 0 || this.local[r]) return
      remote.push(r)
      asks.push(r, q.dataStart, q.ranges.length)
      for (const g of q.ranges) asks.push(g.offset, g.length)
    })
    const all = await comm.allgather(asks)
    let failure: unknown
    const jobs: Promise<void>[] = []
    // Serve every rank what it asked of the files this rank serves, in the order asked (one tag: they arrive in order).
    all.forEach((list, q) => {
      if (q !== comm.rank) jobs.push(this.serve(seq, q, list))
    })
    // Read what this rank reads itself.
    jobs.push(
      (async () => {
        for (const [r, q] of requests.entries()) {
          if (q.ranges.length === 0 || !this.local[r]) continue
          try {
            out[r] = await this.local[r]!.readRanges(seq, r, q.dataStart, q.ranges, q.into)
          } catch (e) {
            failure ??= e
          }
        }
      })(),
    )
    // Receive the rest, from each server in the order asked. Every answer is received, a failure too, so none is left behind.
    const byServer = new Map<number, number[]>()
    for (const r of remote) {
      const s = this.servers[r].rank
      const list = byServer.get(s)
      if (list) list.push(r)
      else byServer.set(s, [r])
    }
    for (const [server, rs] of byServer) {
      jobs.push(
        (async () => {
          for (const r of rs) {
            const got = await this.receive(server, requests[r])
            if ('failure' in got) failure ??= got.failure.corrupt ? new CheckpointCorruptError(got.failure.file, got.failure.reason) : new CheckpointError(got.failure.reason)
            else out[r] = got.buffers
          }
        })(),
      )
    }
    await Promise.all(jobs)
    if (failure !== undefined) throw failure
    return out
  }

  /** Answer rank `q`'s asks (`list`, as `readAll` encodes them) of the files this rank serves: a file it cannot read is answered with the failure, not thrown (only a broken connection rejects). */
  private async serve(seq: number, q: number, list: readonly number[]): Promise<void> {
    for (let k = 0; k < list.length; ) {
      const r = list[k]
      const dataStart = list[k + 1]
      const count = list[k + 2]
      const ranges: ByteRange[] = []
      for (let i = 0; i < count; i++) ranges.push({ offset: list[k + 3 + 2 * i], length: list[k + 4 + 2 * i] })
      k += 3 + 2 * count
      if (this.servers[r].rank !== this.comm.rank) continue
      let buffers: Uint8Array[]
      try {
        buffers = await this.localOf(r).readRanges(seq, r, dataStart, ranges)
      } catch (e) {
        const failure: ServeFailure =
          e instanceof CheckpointCorruptError ? { file: e.file, reason: e.reason, corrupt: true } : { file: this.names[r], reason: (e as Error).message, corrupt: false }
        await post(this.comm, q, TAG, Float64Array.of(-1))
        await post(this.comm, q, TAG, new TextEncoder().encode(JSON.stringify(failure)))
        continue
      }
      await post(this.comm, q, TAG, Float64Array.of(ranges.length))
      for (const b of buffers) await postChunks(this.comm, q, TAG, b)
    }
  }

  /** The answer to one ask: the ranges' bytes (into `request.into` where given), or the server's failure. */
  private async receive(server: number, request: RangeRequest): Promise<{ buffers: Uint8Array[] } | { failure: ServeFailure }> {
    if ((await recvStatus(this.comm, server, TAG)) < 0) {
      const why = await this.comm.recv(server, TAG)
      const failure = JSON.parse(new TextDecoder().decode(why.bytes)) as ServeFailure
      why.release()
      return { failure }
    }
    const buffers = request.ranges.map((g, i) => {
      const given = request.into?.[i]
      return given && given.byteLength === g.length ? given : new Uint8Array(g.length)
    })
    for (const b of buffers) {
      for (let at = 0; at < b.byteLength; ) {
        const m = await this.comm.recv(server, TAG)
        b.set(m.bytes, at)
        at += m.bytes.byteLength
        m.release()
      }
    }
    return { buffers }
  }

  private localOf(rank: number): RankFileSource {
    const s = this.local[rank]
    if (!s) throw new InternalError(`elastic restore: old rank ${rank}'s file was read on this rank, which cannot read it (its server is rank ${this.servers[rank].rank})`)
    return s
  }
}
