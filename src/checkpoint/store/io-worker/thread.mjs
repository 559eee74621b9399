// @ts-check
// The checkpoint I/O thread of a rank (started by io-thread.ts, which says
// what it does and why). Plain JavaScript on purpose: the thread needs only
// zlib's crc32 and fs, and loads in a few milliseconds without TypeScript or
// the rest of molotof. `stage` writes the body of a rank file under a
// temporary name (a recycled file overwritten in place) and `seal` writes its
// header and renames it over the final name: writeDurably's crash rule
// without fsync, for the memory level, whose files live in RAM.
import { writeSync, renameSync, openSync, ftruncateSync, closeSync, unlinkSync } from 'node:fs'
import { parentPort } from 'node:worker_threads'
import { crc32 } from 'node:zlib'
import { GATE } from './gate.mjs'
import { compactRuns, copyRuns } from './runs.mjs'
import { compressPayload } from './payload-codec.mjs'
import { blockDigests } from './block-digests.mjs'

/**
 * A job for the thread (io-thread.ts posts it; `id` names its replies).
 * `stage`: copy, compact, checksum and write the body of a rank file once
 * the gate is open (see gate.mjs); `seal`: write the header and rename.
 *
 * @typedef {{ readonly tmp: string, readonly reuse?: string, readonly at: number, readonly parts: readonly Uint8Array[] }} StageBody
 * @typedef {{
 *   id: number,
 *   readonly op: 'stage',
 *   readonly gate: Int32Array,
 *   readonly copies: readonly import('./runs.mjs').DeferredCopy[],
 *   readonly uncompacted: readonly import('./runs.mjs').UncompactedPayload[],
 *   readonly sums: readonly (readonly Uint8Array[])[],
 *   readonly body?: StageBody,
 * }} StageRequest
 * @typedef {{ id: number, readonly op: 'seal', readonly tmp: string, readonly path: string, readonly header: Uint8Array }} SealRequest
 * @typedef {{ id: number, readonly op: 'compress', readonly payloads: readonly { readonly bytes: Uint8Array, readonly width: number }[] }} CompressRequest
 * @typedef {{ id: number, readonly op: 'digest', readonly payloads: readonly Uint8Array[], readonly blockSize: number }} DigestRequest
 * @typedef {StageRequest | SealRequest | CompressRequest | DigestRequest} IoRequest
 */

/**
 * A reply: `copied` once a stage job's copies are done (the domains are free
 * again), then `value` (a stage job's checksums and body length, a seal's
 * header length) or `error` (a file-system error, its code kept).
 *
 * @typedef {{ copied: number[], sums: number[], bytes: number }} StagedValue
 * @typedef {{ stored: Uint8Array, checksum: number } | null} CompressedPayload
 * @typedef {{ id: number, copied?: true, ready?: true, value?: StagedValue | number | CompressedPayload[] | Uint8Array[], error?: { message: string, code?: string } }} IoReply
 */

// How long a staged job waits at most for `release` (a rank that never calls it only delays its checkpoint).
const GATE_MS = 100

// Started as a worker thread: it has a parent port.
const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort)

/** @param {number} fd @param {Uint8Array} p @param {number} position */
function writeAll(fd, p, position) {
  let done = 0
  while (done < p.byteLength) done += writeSync(fd, p, done, p.byteLength - done, position + done)
}

/** Whether `b.reuse` (a recycled file) now stands under the name `b.tmp`. @param {StageBody} b */
function recycled(b) {
  if (b.reuse === undefined) return false
  try {
    renameSync(b.reuse, b.tmp)
    return true
  } catch (e) {
    if (/** @type {NodeJS.ErrnoException} */ (e).code === 'ENOENT') return false
    throw e
  }
}

/** @param {StageBody} b @returns {number} the body's end */
function writeBody(b) {
  const reused = recycled(b)
  const fd = openSync(b.tmp, reused ? 'r+' : 'wx', 0o644)
  let position = b.at
  try {
    for (const p of b.parts) {
      writeAll(fd, p, position)
      position += p.byteLength
    }
    if (reused) ftruncateSync(fd, position)
  } finally {
    closeSync(fd)
  }
  return position
}

/** @param {StageRequest} m @returns {StagedValue} */
function stage(m) {
  // Start once the rank has left its checkpoint point (release), or after GATE_MS at the latest. The counts
  // let a test see the job wait and leave on the release rather than guess it from the clock.
  Atomics.add(m.gate, GATE.arrived, 1)
  if (Atomics.wait(m.gate, GATE.open, 0, GATE_MS) !== 'timed-out') Atomics.add(m.gate, GATE.released, 1)
  Atomics.store(m.gate, GATE.open, 0)
  for (const c of m.copies) copyRuns(c)
  // The domains are free again: the owner may write them while the rest goes on.
  port.postMessage(/** @satisfies {IoReply} */ ({ id: m.id, copied: true }))
  const copied = m.copies.map((c) => crc32(c.to) >>> 0)
  for (const p of m.uncompacted) compactRuns(p)
  const sums = m.sums.map((pieces) => {
    let c = 0
    // Empty pieces skipped: Node's crc32 of a view of an empty SharedArrayBuffer is 0, whatever the running value.
    for (const p of pieces) if (p.byteLength > 0) c = crc32(p, c)
    return c >>> 0
  })
  return { copied, sums, bytes: m.body ? writeBody(m.body) : 0 }
}

/** @param {SealRequest} m @returns {number} the header's length */
function seal(m) {
  const fd = openSync(m.tmp, 'r+')
  try {
    writeAll(fd, m.header, 0)
  } finally {
    closeSync(fd)
  }
  renameSync(m.tmp, m.path)
  return m.header.byteLength
}

/**
 * Each payload compressed (see payload-codec.mjs) with the CRC32 of its
 * stored bytes, or null when compressing would not make it smaller.
 *
 * @param {CompressRequest} m @returns {CompressedPayload[]}
 */
function compress(m) {
  return m.payloads.map((p) => {
    const stored = compressPayload(p.bytes, p.width)
    return stored === undefined ? null : { stored, checksum: crc32(stored) >>> 0 }
  })
}

port.on('message', (/** @type {IoRequest} */ m) => {
  try {
    port.postMessage(/** @satisfies {IoReply} */ ({ id: m.id, value: m.op === 'stage' ? stage(m) : m.op === 'seal' ? seal(m) : m.op === 'digest' ? m.payloads.map((p) => blockDigests(p, m.blockSize)) : compress(m) }))
  } catch (e) {
    const tmp = m.op === 'stage' ? m.body?.tmp : m.op === 'seal' ? m.tmp : undefined
    try { if (tmp) unlinkSync(tmp) } catch {} // never created, or already gone: prune deletes leftovers anyway
    const { message, code } = /** @type {NodeJS.ErrnoException} */ (e)
    port.postMessage(/** @satisfies {IoReply} */ ({ id: m.id, error: { message, code } }))
  }
})

// Loaded and listening: what CheckpointIoThread.warm waits for (its id names no job).
port.postMessage(/** @satisfies {IoReply} */ ({ id: -1, ready: true }))
