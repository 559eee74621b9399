import { open } from 'node:fs/promises'
import type { BufferAllocator } from '../../domains/dtype.js'
import { CheckpointError } from '../../errors.js'
import type { Communicator } from '../../routing/communicator.js'
import type { CommitMarker } from '../store/marker.js'
import { post, postChunks, recvLength } from '../store/partner.js'
import { encodeParityFile, type XorSetRecord } from './parity-file.js'
import type { XorSets } from './sets.js'
import { chunkBytesOf, chunkOf, sliceHolderOf, xorInto, chunkIndexFor } from './xor.js'

/**
 * This rank's parity slice of committed checkpoint `marker` (collective over
 * its set: every member calls it): the rank sends chunk k of its file (at
 * `path`) to the member whose slice holds it, and XORs the chunks the other
 * members send it into its own slice as they arrive. Each rank sends and
 * receives G−1 chunks, one file's worth, and holds 1/(G−1) of a file. The
 * parts of the parity file to write (see parity-file.ts).
 *
 * ```ts
 * const parts = await makeParitySlice(comm, sets, FRAMEWORK_TAGS.xorParity, disk.fileOf(seq, rank), marker)
 * await xorStore.writeRankFile(seq, rank, parts)
 * ```
 */
export async function makeParitySlice(comm: Communicator, sets: XorSets, tag: number, path: string, marker: CommitMarker): Promise<Uint8Array[]> {
  const { rank } = comm
  const members = sets.membersOf(rank)
  const g = members.length
  const me = members.indexOf(rank)
  const lengths = members.map((m) => marker.ranks[m].bytes)
  const chunk = chunkBytesOf(lengths)
  let file: Uint8Array | undefined
  let failure: string | undefined
  try {
    file = await readInto(path, comm.allocator)
    if (file.byteLength !== lengths[me]) failure = `${path} is ${file.byteLength} bytes, the commit marker records ${lengths[me]}`
  } catch (e) {
    failure = `cannot read ${path}: ${(e as Error).message}`
  }
  const parity = new Uint8Array(chunk)
  // In rounds, one chunk each way per round: in round k every member sends its chunk k to the member k + 1 ahead
  // and receives from the member k + 1 behind (a shift of the set, as a partner copy is one): one chunk in flight
  // each way, whatever G.
  let failed: unknown
  for (let k = 0; k < g - 1; k++) {
    const dest = members[sliceHolderOf(me, k, g)]
    const j = (me - k - 1 + g) % g
    const outcomes = await Promise.allSettled([
      failure === undefined ? sendBytes(comm, dest, tag, chunkOf(file!, k, chunk)) : sendFailure(comm, dest, tag, failure),
      receiveInto(comm, members[j], tag, parity, `chunk ${chunkIndexFor(j, me, g)} of rank ${members[j]}'s file of checkpoint ${marker.seq}`),
    ])
    failed ??= outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected')?.reason
  }
  if (failure !== undefined) throw new CheckpointError(`the parity slice of checkpoint ${marker.seq}: ${failure}`)
  if (failed !== undefined) throw failed
  const set: XorSetRecord = { seq: marker.seq, members, index: me, lengths, headerChecksums: members.map((m) => marker.ranks[m].headerChecksum), chunkBytes: chunk }
  return encodeParityFile(marker, rank, set, parity)
}

/** `bytes` to `dest`: their length, then the bytes in messages of 1 MiB at most (as sendRankFile). */
export async function sendBytes(comm: Communicator, dest: number, tag: number, bytes: Uint8Array): Promise<void> {
  await post(comm, dest, tag, Float64Array.of(bytes.byteLength))
  await postChunks(comm, dest, tag, bytes)
}

/** A failure instead of bytes (length −1, then the reason): the receiver never waits in vain. */
export async function sendFailure(comm: Communicator, dest: number, tag: number, why: string): Promise<void> {
  await post(comm, dest, tag, Float64Array.of(-1))
  await post(comm, dest, tag, new TextEncoder().encode(why))
}

/**
 * Bytes sent by sendBytes, XORed into `target` from its start as they
 * arrive; a sent failure, or more bytes than `target` holds, is a
 * CheckpointError naming `what` — after every message of the transfer was
 * received, so the sender never waits on a receiver that gave up.
 */
export async function receiveInto(comm: Communicator, src: number, tag: number, target: Uint8Array, what: string): Promise<number> {
  const length = await recvLength(comm, src, tag, what)
  for (let at = 0; at < length; ) {
    const m = await comm.recv(src, tag)
    const fits = Math.max(0, Math.min(m.bytes.byteLength, target.byteLength - at))
    xorInto(target.subarray(at, at + fits), m.bytes.subarray(0, fits))
    at += m.bytes.byteLength
    m.release()
  }
  if (length > target.byteLength) throw new CheckpointError(`${what}: rank ${src} sent ${length} bytes, at most ${target.byteLength} expected`)
  return length
}

/**
 * A file's bytes in a buffer of `allocate`'s (shared memory under the
 * threads transport, whose sends then pass a view of it, not a copy).
 */
export async function readInto(path: string, allocate: BufferAllocator): Promise<Uint8Array> {
  const handle = await open(path, 'r')
  try {
    const { size } = await handle.stat()
    const bytes = new Uint8Array(allocate(size))
    for (let at = 0; at < size; ) {
      const { bytesRead } = await handle.read(bytes, at, size - at, at)
      if (bytesRead === 0) return bytes.subarray(0, at)
      at += bytesRead
    }
    return bytes
  } finally {
    await handle.close()
  }
}
