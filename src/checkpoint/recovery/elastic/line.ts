import { CheckpointCorruptError, CheckpointMismatchError } from '../../../errors.js'
import type { RankFileHeader } from '../../format/rank-file.js'
import type { SkipReason } from '../line.js'
import type { RankFileSource } from './source.js'

/**
 * A recovery line written by another rank count, ready for an elastic
 * restore: every old rank's header (entries, boxes, offsets, checksums) and
 * where the files are. Payloads are read at restore time, when the new
 * partition is known.
 */
export interface ElasticLine {
  seq: number
  oldSize: number
  headers: RankFileHeader[]
  source: RankFileSource
}

/**
 * The line's checkpoint was found damaged while restoring it (a payload
 * checksum, a file that vanished): every rank throws it at the same point,
 * and the rank session runs the program again from the top with this
 * checkpoint passed over, as negotiation does for damage it sees itself.
 */
export class RecoveryLineDamagedError extends CheckpointCorruptError {
  constructor(
    readonly seq: number,
    readonly problems: SkipReason[],
  ) {
    super(problems[0]?.file ?? `checkpoint ${seq}`, problems.map((p) => p.reason).join('; '))
  }
}

/** What keeps a checkpoint from being resumed on another rank count. */
export interface ElasticBlocker {
  entry: string
  skeleton: number
  why: 'no-box' | 'differs'
}

/**
 * The heavy entries of a checkpoint that cannot be re-sliced: arrays saved
 * without their global box (registered without `{ box }`). Domain entries
 * always carry theirs.
 *
 * ```ts
 * heavyWithoutBox(headers)   // [{ entry: 'hist', skeleton: 0, why: 'no-box' }]
 * ```
 */
export function heavyWithoutBox(headers: readonly RankFileHeader[]): ElasticBlocker[] {
  const names = new Set<string>()
  for (const h of headers) for (const e of h.entries) if (e.kind === 'heavy' && e.box === undefined) names.add(e.name)
  const skeleton = headers[0]?.skeleton ?? -1
  return [...names].map((entry) => ({ entry, skeleton, why: 'no-box' as const }))
}

/** One sentence per blocker, for refusals and `molotof inspect`. */
export function describeBlocker(b: ElasticBlocker): string {
  return b.why === 'no-box'
    ? `"${b.entry}" (skeleton ${b.skeleton}) is an array saved without its global box: register it with { box } to make it elastic`
    : `"${b.entry}" (skeleton ${b.skeleton}) is a light value that differs between ranks: give it a merge rule (value(name, initial, { merge }))`
}

/**
 * Reads every old rank's header of checkpoint `seq` (header-only reads). A
 * file that cannot be read is returned as a problem (the line moves back);
 * an array without a box is refused, naming it: no older checkpoint of this
 * program would have one either.
 *
 * ```ts
 * const { line, problem } = await openElasticLine(source, seq, 4, 3)
 * ```
 */
export async function openElasticLine(
  source: RankFileSource,
  seq: number,
  oldSize: number,
  newSize: number,
): Promise<{ line?: ElasticLine; problem?: SkipReason }> {
  const headers: RankFileHeader[] = []
  for (let r = 0; r < oldSize; r++) {
    try {
      headers.push(await source.header(seq, r))
    } catch (e) {
      const reason = e instanceof CheckpointCorruptError ? e.reason : (e as Error).message
      return { problem: { seq, rank: r, file: source.nameOf(seq, r), reason } }
    }
  }
  return { line: { seq, oldSize, headers, source } }
}

/** Throws CheckpointMismatchError when the line holds an array that cannot be re-sliced. */
export function assertResliceable(line: ElasticLine, newSize: number): void {
  const blockers = heavyWithoutBox(line.headers)
  if (blockers.length === 0) return
  throw new CheckpointMismatchError(
    `cannot resume checkpoint ${line.seq}, taken on ${line.oldSize} rank${line.oldSize === 1 ? '' : 's'}, on ${newSize}: ` +
      `${blockers.map(describeBlocker).join('; ')}. Or resume on ${line.oldSize} ranks.`,
  )
}

/**
 * Whether checkpoint `seq` (of `size` ranks) can be resumed on another rank
 * count, and what blocks it: arrays saved without their box (refused), and
 * light values whose bytes differ between ranks (accepted only if the
 * program gives them a merge rule, which the files cannot tell). Reads every
 * header and every light payload (small), never a heavy one.
 *
 * ```ts
 * const { blockers } = await elasticBlockers(new DirectorySource(store), seq, 4)
 * ```
 */
export async function elasticBlockers(source: RankFileSource, seq: number, size: number): Promise<{ blockers: ElasticBlocker[] }> {
  const headers: RankFileHeader[] = []
  for (let r = 0; r < size; r++) headers.push(await source.header(seq, r))
  const blockers = heavyWithoutBox(headers)
  const light = headers[0].entries.filter((e) => e.kind === 'light' && e.name !== 'iterator')
  for (const e of light) {
    const bytes: Uint8Array[] = []
    for (let r = 0; r < size; r++) {
      const rec = headers[r].entries.find((x) => x.name === e.name)
      if (!rec) continue
      bytes.push((await source.readRanges(seq, r, [{ offset: rec.offset, length: rec.length }]))[0])
    }
    if (bytes.some((b) => !sameBytes(b, bytes[0]))) blockers.push({ entry: e.name, skeleton: headers[0].skeleton, why: 'differs' })
  }
  return { blockers }
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false
  return true
}
