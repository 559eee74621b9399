import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { CheckpointError, ConfigError } from '../../errors.js'
import { SENT, type Communicator } from '../../routing/communicator.js'
import { FRAMEWORK_TAGS } from '../../routing/tags.js'
import { headerChecksumOf, PREAMBLE_BYTES, readHeaderOnly } from '../format/rank-file.js'

/** The sub-directory of a rank's checkpoint directory that holds its partner's copies. */
const PARTNER_DIR = 'partner'

/** Tag of partner copies sent after a checkpoint. */
export const PARTNER_COPY_TAG = FRAMEWORK_TAGS.partnerCopy

/** Tag of rank files sent back to their owner at recovery. */
export const PARTNER_RESTORE_TAG = FRAMEWORK_TAGS.partnerRestore

/** Bytes per message of a rank file (or file ranges) in transit: small enough not to hold a halo exchange long behind it on one connection. */
export const CHUNK_BYTES = 1 << 20

/**
 * Who keeps whose copies: rank r's file is also kept by `holderOf(r)`, the
 * same local rank on the next node (`(r + ranksPerNode) mod size`), and rank
 * r keeps the copies of `sourceOf(r)`, the same local rank on the previous
 * node. Any one node lost, every rank's file survives on another node.
 *
 * ```ts
 * const p = new PartnerRing(4, 2)   // 2 nodes × 2 ranks
 * p.holderOf(1)   // 3
 * p.sourceOf(1)   // 3
 * ```
 */
export class PartnerRing {
  constructor(
    readonly size: number,
    readonly ranksPerNode: number,
  ) {
    if (!Number.isSafeInteger(ranksPerNode) || ranksPerNode < 1 || size % ranksPerNode !== 0) {
      throw new ConfigError(`partner copies need whole nodes: ${size} ranks is not a multiple of ${ranksPerNode} ranks per node`)
    }
    if (size / ranksPerNode < 2) {
      throw new ConfigError('partner copies need at least two nodes (a partner lives on another node); this run has one')
    }
  }

  holderOf(rank: number): number {
    return (rank + this.ranksPerNode) % this.size
  }

  sourceOf(rank: number): number {
    return (rank - this.ranksPerNode + this.size) % this.size
  }
}

/** Where a rank keeps the copies it holds for its partner: a store beside its own checkpoints, on the same node. */
export function partnerDirOf(checkpointDir: string): string {
  return join(checkpointDir, PARTNER_DIR)
}

/**
 * Send the rank file at `path` to `dest` over the communicator: a length,
 * then the bytes in chunks of 1 MiB. A file that cannot be read is sent as a
 * failure (length -1 and the reason), so the receiver never waits in vain.
 * Background work: each chunk waits for the transport to release the
 * previous one, and the compute runs between them.
 *
 * ```ts
 * await sendRankFile(comm, holder, PARTNER_COPY_TAG, store.fileOf(seq, comm.rank))
 * ```
 */
export async function sendRankFile(comm: Communicator, dest: number, tag: number, path: string): Promise<void> {
  let bytes: Uint8Array
  try {
    bytes = await readFile(path)
  } catch (e) {
    await post(comm, dest, tag, Float64Array.of(-1))
    await post(comm, dest, tag, new TextEncoder().encode(`cannot read ${path}: ${(e as Error).message}`))
    return
  }
  await post(comm, dest, tag, Float64Array.of(bytes.byteLength))
  await postChunks(comm, dest, tag, bytes)
}

/**
 * Send the rank file of checkpoint `seq` at `pathOf(seq)` and, when it is a
 * delta, every earlier file of its chain (base first, as its header lists
 * them): a count first, then each file as sendRankFile sends it, so the
 * receiver (receiveRankFileChain) always knows how many transfers follow,
 * even when one of them is a failure.
 *
 * ```ts
 * await sendRankFileChain(comm, owner, PARTNER_RESTORE_TAG, seq, (s) => store.fileOf(s, owner))
 * ```
 */
export async function sendRankFileChain(comm: Communicator, dest: number, tag: number, seq: number, pathOf: (seq: number) => string): Promise<void> {
  // A header that cannot be read: the file alone is sent, and the receiver finds what is wrong with it.
  const needs = (await readHeaderOnly(pathOf(seq)).catch(() => undefined))?.header.delta?.needs ?? []
  await post(comm, dest, tag, Float64Array.of(1 + needs.length))
  await sendRankFile(comm, dest, tag, pathOf(seq))
  for (const need of needs) await sendRankFile(comm, dest, tag, pathOf(need))
}

/**
 * Receive what sendRankFileChain sent: the file (checked against `expect`
 * as receiveRankFile does), then each earlier file of its chain, in the
 * order of its header's `needs` (each as its parts, or the error of its
 * transfer). Every transfer is received before any failure is thrown: none
 * is left half read on the tag. The earlier files are checked by decoding
 * and assembling them (assembleChain).
 *
 * ```ts
 * const { file, chain } = await receiveRankFileChain(comm, holder, PARTNER_RESTORE_TAG, record, name)
 * ```
 */
export async function receiveRankFileChain(
  comm: Communicator,
  src: number,
  tag: number,
  expect: { bytes: number; headerChecksum: number } | undefined,
  what: string,
): Promise<{ file: Uint8Array[]; chain: (Uint8Array[] | Error)[] }> {
  const count = await recvStatus(comm, src, tag)
  let file: Uint8Array[] | Error
  try {
    file = await receiveRankFile(comm, src, tag, expect, what)
  } catch (e) {
    file = e as Error
  }
  const chain: (Uint8Array[] | Error)[] = []
  for (let i = 1; i < count; i++) chain.push(await receiveRankFile(comm, src, tag, undefined, what).catch((e: Error) => e))
  if (file instanceof Error) throw file
  return { file, chain }
}

/**
 * Receive a rank file sent by `sendRankFile`, as the parts it arrived in.
 * `expect` (the commit marker's record, when the receiver has it) is
 * checked: the size and the header checksum, which pins every payload's
 * CRC. Throws CheckpointError when the sender could not read its file or
 * the bytes are not the recorded ones.
 *
 * ```ts
 * const parts = await receiveRankFile(comm, source, PARTNER_COPY_TAG, { bytes, headerChecksum }, 'rank 1 file of checkpoint 4')
 * ```
 */
export async function receiveRankFile(
  comm: Communicator,
  src: number,
  tag: number,
  expect: { bytes: number; headerChecksum: number } | undefined,
  what: string,
): Promise<Uint8Array[]> {
  const length = await recvLength(comm, src, tag, what)
  const parts: Uint8Array[] = []
  for (let got = 0; got < length; ) {
    const m = await comm.recv(src, tag)
    parts.push(m.bytes.slice())
    got += m.bytes.byteLength
    m.release()
  }
  if (expect === undefined) return parts
  if (length !== expect.bytes) throw new CheckpointError(`${what}: received ${length} bytes, the commit marker records ${expect.bytes}`)
  if (headerChecksumIn(parts[0]) !== expect.headerChecksum) throw new CheckpointError(`${what}: the received header differs from the one the commit marker records`)
  return parts
}

/** The header checksum in a file's first bytes, or undefined when they are no rank file's. */
function headerChecksumIn(head: Uint8Array | undefined): number | undefined {
  if (head === undefined || head.byteLength < PREAMBLE_BYTES) return undefined
  try {
    return headerChecksumOf(head)
  } catch {
    // Not a rank file's header: undefined, which the caller reports as a mismatch with the marker.
    return undefined
  }
}

/**
 * The first message of a transfer (a byte count, or a negative number for a
 * failure whose text follows), as `post(comm, dest, tag, Float64Array.of(n))`
 * sent it.
 */
export async function recvStatus(comm: Communicator, src: number, tag: number): Promise<number> {
  const first = await comm.recv(src, tag)
  const status = new Float64Array(first.bytes.slice(0, 8).buffer)[0]
  first.release()
  return status
}

/**
 * The byte count a transfer starts with; when the sender posted a failure
 * instead, its text, as a CheckpointError naming `what`.
 */
export async function recvLength(comm: Communicator, src: number, tag: number, what: string): Promise<number> {
  const length = await recvStatus(comm, src, tag)
  if (length >= 0) return length
  const why = await comm.recv(src, tag)
  const text = new TextDecoder().decode(why.bytes)
  why.release()
  throw new CheckpointError(`${what}: rank ${src} could not send it (${text})`)
}

/** `bytes` in messages of at most CHUNK_BYTES, each released by the transport before the next is sent. */
export async function postChunks(comm: Communicator, dest: number, tag: number, bytes: Uint8Array): Promise<void> {
  for (let at = 0; at < bytes.byteLength; at += CHUNK_BYTES) await post(comm, dest, tag, bytes.subarray(at, at + CHUNK_BYTES))
}

/** One message, awaited until the transport releases its bytes. */
export async function post(comm: Communicator, dest: number, tag: number, data: Uint8Array | Float64Array): Promise<void> {
  const bytes = data instanceof Uint8Array ? data : new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
  const p = comm.send(dest, tag, bytes)
  if (p !== SENT) await p
}
