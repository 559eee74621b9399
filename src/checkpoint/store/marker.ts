import { crc32 } from 'node:zlib'
import { CheckpointCorruptError, ConfigError } from '../../errors.js'
import { isCodeIdentity, type CodeIdentity } from '../format/code-record.js'
import { checkJsonObject, isPlainObject, type JsonObject } from '../format/json.js'

/** What the commit marker says about one rank's file. */
export interface RankFileRecord {
  rank: number
  /** File name inside the checkpoint directory (`rank-<r>.mlf`). */
  file: string
  /** Exact size of the file. */
  bytes: number
  /**
   * CRC32 of the file's header. The header holds every payload's CRC, so this
   * one number pins the whole file without a second pass over the payloads.
   */
  headerChecksum: number
  /**
   * A delta file's chain (its header's `needs`: base first): every earlier
   * checkpoint it is restored with. Recorded here too so that pruning any
   * level's copy of this checkpoint (parity slices included, which are no
   * rank file) keeps what every rank's chain needs, not only the ranks whose
   * files that directory holds.
   */
  needs?: number[]
}

/**
 * The membership of a cluster run when a checkpoint was written (see
 * runtime/cluster/membership.ts): which node carried which ranks, and the
 * spare nodes standing by. Absent for one-host runs.
 */
export interface MembershipRecord {
  /** How many membership changes (nodes lost) came before: 0 as the run started. */
  epoch: number
  /** The node carrying each slot of ranks: `nodes[s]` carried ranks s·ranksPerNode … (s+1)·ranksPerNode − 1. */
  nodes: number[]
  ranksPerNode: number
  /** The spare nodes standing by, carrying no rank. */
  spares: number[]
}

/**
 * The `COMMIT` file of a checkpoint. Its presence is what makes a checkpoint
 * complete: it is written only after every rank's file is durable.
 */
export interface CommitMarker {
  seq: number
  skeleton: number
  step: number
  size: number
  fingerprint: string
  settings: JsonObject
  /** One record per rank, in rank order. */
  ranks: RankFileRecord[]
  createdAt: string
  /** The run lineage that wrote the checkpoint (automatic restarts use only their own run's checkpoints); absent for checkpoints written outside an identified run. */
  runId?: string
  /** The program's code, when known (a resume with other code is refused unless allowed). */
  code?: CodeIdentity
  /** A cluster run's membership the checkpoint was written under (`molotof inspect` names it). */
  membership?: MembershipRecord
}

/**
 * Serialises a marker as JSON with a `checksum` field (CRC32 of the JSON of the
 * other fields), so a damaged marker is detected rather than half-believed.
 * Throws ConfigError when the marker is inconsistent (caller bug).
 *
 * ```ts
 * await writeDurably(markerPath, [encodeMarker(marker)])
 * ```
 */
export function encodeMarker(m: CommitMarker): Uint8Array {
  for (const k of ['seq', 'skeleton', 'step', 'size'] as const) {
    if (!Number.isSafeInteger(m[k])) throw new ConfigError(`commit marker ${k} must be an integer (got ${String(m[k])})`)
  }
  if (m.ranks.length !== m.size || m.ranks.some((r, i) => r.rank !== i)) {
    throw new ConfigError(`commit marker for ${m.size} ranks must list ranks 0..${m.size - 1} in order`)
  }
  const body: CommitMarker = {
    seq: m.seq,
    skeleton: m.skeleton,
    step: m.step,
    size: m.size,
    fingerprint: m.fingerprint,
    settings: checkJsonObject('settings', m.settings),
    ranks: m.ranks.map((r) => ({ rank: r.rank, file: r.file, bytes: r.bytes, headerChecksum: r.headerChecksum, ...(r.needs !== undefined ? { needs: r.needs } : {}) })),
    createdAt: m.createdAt,
    ...(m.runId !== undefined ? { runId: m.runId } : {}),
    ...(m.code !== undefined ? { code: m.code } : {}),
    ...(m.membership !== undefined ? { membership: m.membership } : {}),
  }
  const json = JSON.stringify(body)
  const withSum = JSON.stringify({ ...body, checksum: crc32(json) >>> 0 })
  return new TextEncoder().encode(withSum + '\n')
}

/**
 * Parses and checks a marker file; throws CheckpointCorruptError(name, reason).
 * The checksum is verified by re-serialising the parsed fields: JSON.stringify
 * of parsed JSON reproduces the original text for everything encodeMarker writes.
 *
 * ```ts
 * const marker = parseMarker(await readFile(path), path)
 * ```
 */
export function parseMarker(bytes: Uint8Array, name: string): CommitMarker {
  let v: unknown
  try {
    v = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes))
  } catch (e) {
    throw new CheckpointCorruptError(name, `the commit marker is not valid JSON (${(e as Error).message})`)
  }
  const bad = (reason: string): never => {
    throw new CheckpointCorruptError(name, `invalid commit marker: ${reason}`)
  }
  if (!isPlainObject(v)) return bad('not an object')
  const { checksum, ...rest } = v
  if ((crc32(JSON.stringify(rest)) >>> 0) !== checksum) bad('checksum mismatch')
  for (const k of ['seq', 'skeleton', 'step', 'size'] as const) if (!Number.isSafeInteger(rest[k])) bad(`${k} is not an integer`)
  if (typeof rest.fingerprint !== 'string') bad('fingerprint is not a string')
  if (typeof rest.createdAt !== 'string') bad('createdAt is not a string')
  if (rest.runId !== undefined && typeof rest.runId !== 'string') bad('runId is not a string')
  if (rest.code !== undefined && !isCodeIdentity(rest.code)) bad('code is not a code identity')
  if (rest.membership !== undefined && !isMembershipRecord(rest.membership)) bad('membership is not a membership record')
  if (!isPlainObject(rest.settings)) bad('settings is not an object')
  if (!Array.isArray(rest.ranks) || rest.ranks.length !== rest.size) bad('ranks does not list every rank')
  for (const [i, r] of (rest.ranks as unknown[]).entries()) {
    if (
      !isPlainObject(r) || r.rank !== i || typeof r.file !== 'string' ||
      !Number.isSafeInteger(r.bytes) || !Number.isInteger(r.headerChecksum) ||
      (r.needs !== undefined && !(Array.isArray(r.needs) && r.needs.every((n) => Number.isSafeInteger(n) && (n as number) >= 0)))
    ) bad(`the record of rank ${i} is invalid`)
  }
  return rest as unknown as CommitMarker
}

function isMembershipRecord(v: unknown): v is MembershipRecord {
  const naturals = (a: unknown) => Array.isArray(a) && a.every((n) => Number.isSafeInteger(n) && (n as number) >= 0)
  return isPlainObject(v) && Number.isSafeInteger(v.epoch) && Number.isSafeInteger(v.ranksPerNode) && (v.ranksPerNode as number) > 0 && naturals(v.nodes) && naturals(v.spares)
}
