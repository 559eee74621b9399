import { CheckpointCorruptError, CheckpointMismatchError } from '../../../errors.js'
import type { Communicator } from '../../../routing/communicator.js'
import type { RankFileHeader } from '../../format/rank-file.js'
import type { SkipReason } from '../line.js'
import type { RankFileSource, SourceHeader } from './source.js'

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
  /** Where each old file's data section starts. */
  dataStarts: number[]
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
 * Every old rank's header of checkpoint `seq`, read once over all ranks: each
 * old rank's header is read by its file's home rank (`source.homeOf`; where
 * every rank can read every file, old rank r by new rank r mod size), with
 * header-only reads, and the ranks exchange them (collective). A file that cannot be read
 * is this rank's `problem` and leaves `line` undefined on every rank (the
 * caller moves the line back); arrays without a box are refused afterwards
 * (assertResliceable), once the line is final.
 *
 * ```ts
 * const { line, problem } = await openElasticLine(source, seq, 4, comm)
 * ```
 */
export async function openElasticLine(
  source: RankFileSource,
  seq: number,
  oldSize: number,
  comm: Communicator,
): Promise<{ line?: ElasticLine; problem?: SkipReason }> {
  const mine: [number, SourceHeader][] = []
  let problem: SkipReason | undefined
  for (let r = 0; r < oldSize && problem === undefined; r++) {
    if ((source.homeOf?.(r) ?? r % comm.size) !== comm.rank) continue
    try {
      mine.push([r, await source.header(seq, r)])
    } catch (e) {
      const reason = e instanceof CheckpointCorruptError ? e.reason : (e as Error).message
      problem = { seq, rank: r, file: source.nameOf(seq, r), reason }
    }
  }
  const all = await comm.allgather({ headers: mine, failed: problem !== undefined })
  if (all.some((a) => a.failed)) return { problem }
  const headers: RankFileHeader[] = new Array(oldSize)
  const dataStarts: number[] = new Array(oldSize)
  for (const a of all) {
    for (const [r, h] of a.headers) {
      headers[r] = h.header
      dataStarts[r] = h.dataStart
    }
  }
  return { line: { seq, oldSize, headers, dataStarts, source } }
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
  const files: SourceHeader[] = []
  for (let r = 0; r < size; r++) files.push(await source.header(seq, r))
  const headers = files.map((f) => f.header)
  const blockers = heavyWithoutBox(headers)
  const light = headers[0].entries.filter((e) => e.kind === 'light' && e.name !== 'iterator')
  for (const e of light) {
    const bytes: Uint8Array[] = []
    for (let r = 0; r < size; r++) {
      const rec = headers[r].entries.find((x) => x.name === e.name)
      if (!rec) continue
      bytes.push((await source.readRanges(seq, r, files[r].dataStart, [{ offset: rec.offset, length: rec.length }]))[0])
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
