import { existsSync, readdirSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { LEVEL_KINDS, type LevelKind, type LevelRoots } from '../checkpoint/coordination/levels.js'
import { readHeaderOnly, storedLength, type EntryRecord } from '../checkpoint/format/rank-file.js'
import type { DeltaRecord } from '../checkpoint/format/delta.js'
import { deltaShare } from '../checkpoint/store/delta-chain.js'
import { describeBlocker, elasticBlockers } from '../checkpoint/recovery/elastic/line.js'
import { DirectorySource, SpreadSource, type RankFileSource } from '../checkpoint/recovery/elastic/source.js'
import { CheckpointStore, validRanks, type ValidationReport } from '../checkpoint/store/checkpoint-store.js'
import type { MembershipRecord } from '../checkpoint/store/marker.js'
import { alive, lockHolder } from '../checkpoint/store/dir-lock.js'
import { memoryDirFor, memoryLevelDirectoryIn } from '../checkpoint/store/memory-level.js'
import { decodeParityFile } from '../checkpoint/redundancy/parity-file.js'
import { CheckpointCorruptError, ConfigError } from '../errors.js'
import { matchingDirectories } from '../runtime/cluster-env.js'
import { option } from '../skeletons/options.js'
import { HELP_OPTION, parseCommand } from './args.js'
import { formatHelp, STARTER_EXAMPLES_FROM } from './help.js'
import { formatSize } from '../util/bytes.js'

const INSPECT_OPTIONS = {
  memoryDir: option.string(undefined, "the memory level's directory (default: the one molotof run uses for this checkpoint directory, when present)"),
  sharedDir: option.string(
    undefined,
    "the shared level: the --shared-dir given to molotof run (its one program directory is taken; name <dir>/<program name> when it holds several) or that checkpoint directory itself",
  ),
  verify: option.boolean(false, 'read every payload and check its checksum'),
  json: option.boolean(false, 'print the listing as JSON'),
  ...HELP_OPTION,
}

const INSPECT_HELP = formatHelp({
  usage: 'molotof inspect <checkpoint-dir> [--shared-dir DIR] [--verify] [--json]',
  about: `Lists the checkpoints in a directory: skeleton, step, ranks, entries, sizes,
completeness (commit marker present) and validity (sizes and headers, and with
--verify every checksum), whether each can be resumed on another rank count
("elastic"; otherwise what blocks it), the spare files pruning left for the
next writes, and who holds the directory's lock. Every level is shown: the
disk level (the directory named), the memory level in RAM
(/dev/shm/molotof-<hash of that directory>, or --memory-dir) when present,
the partner level (the copies of other ranks' files the directory keeps in
partner/, with --partner-copies) when present, and the shared level with
--shared-dir. The same checkpoint number on several levels is the same
checkpoint (the disk copy is flushed from the memory one, the partner and
shared copies are copied from the disk one). A partner directory holds some
ranks' files only: the listing names them, and only those are checked. A
directory name with {node} or {rank} (as given to molotof run) inspects every
directory it matches on this host as one (a resume looks for them so, one
left or several): each rank's file is checked where it is; each matched
directory's partner/, and each memory level the template matches (a lost
node's left behind too), is listed on its own. A checkpoint of a cluster run
names the membership it was written under: which node carried which ranks,
and the spare nodes. A folder named like a checkpoint that is not molotof's
is named with its path, and never read. Under a checkpoint with a
missing or damaged rank file, the listing names the levels holding a valid
copy of that file (which a resume can read instead); the exit code follows
the memory and disk levels only: a damaged disk file is exit 1 even where a
partner or shared copy can replace it.`,
  sections: [{ title: 'Options', specs: INSPECT_OPTIONS }],
  exitCodes: [
    [0, 'the newest checkpoint (memory and disk levels) is complete and valid; partner and shared copies do not count'],
    [1, 'it is not, or there is no checkpoint'],
    [2, 'bad input (options, a directory that does not exist)'],
  ],
  examplesFrom: STARTER_EXAMPLES_FROM,
  examples: [
    'molotof inspect .molotof/relax --verify      # after molotof run relax.ts --checkpoint every:50',
    "molotof inspect '/scratch/ckpt-{node}' --shared-dir /shared      # a cluster run's, started with --checkpoint-dir '/scratch/ckpt-{node}' --shared-checkpoint every:4 --shared-dir /shared",
  ],
})

interface Row {
  seq: number
  complete: boolean
  /** Never committed: a write its run's end interrupted (see CheckpointSummary.uncommitted); listed, but no failure. */
  uncommitted?: boolean
  /** Named like a checkpoint but not molotof's (see CheckpointSummary.foreign): listed as such, with its path, never read. */
  foreign?: boolean
  /** Where the checkpoint's folder is (a folder that is not molotof's is named by it). */
  path: string
  valid: boolean
  skeleton: number | undefined
  step: number | undefined
  ranks: number | undefined
  bytes: number
  entries: string[]
  /** An incremental checkpoint: which chain it belongs to and how many heavy blocks it holds (over its rank files). */
  chain?: string
  /** The run lineage that wrote the checkpoint. */
  runId: string | undefined
  /** The hash of the program code that wrote it, and its files. */
  code: { hash: string; files: string[] } | undefined
  /** A cluster run's membership the checkpoint was written under (absent for one-host runs). */
  membership?: MembershipRecord
  problems: string[]
  /** Whether a resume on another rank count can re-slice it; `blockers` say why not (or what needs a merge rule). */
  elastic?: { ok: boolean; blockers: string[] }
  /** Ranks whose file is present. */
  present: number[]
  /** Ranks whose file is present and valid (none when the checkpoint is incomplete). */
  validRanks: number[]
  /** A level of XOR parity: each slice's rank and the set it is a slice of (unreadable slices are in `problems`). */
  slices?: { rank: number; set: number[] }[]
  /** Rank files this level should hold but are missing or damaged, each with the other levels holding a valid copy of it. */
  damaged?: { rank: number; validCopies: { level: LevelName; dir: string }[] }[]
}

type LevelName = LevelKind['name']

/** One level's listing; the disk level of several `{node}` directories names them all. */
interface Level {
  level: LevelName
  dir?: string
  dirs?: string[]
  checkpoints: Row[]
  spares?: { rank: number; bytes: number }[]
}

/** A level's listing and its kind (the kind stays out of the JSON). */
interface Listed {
  kind: LevelKind
  listing: Level
}

/** The kinds of level inspect lists, fastest first (see LEVEL_KINDS): the run's own levels and the copies it can find from a directory. */
const LISTED_KINDS = LEVEL_KINDS.filter((k) => k.inspectTitle !== undefined)

/** How a heavy entry is stored, when not raw and whole: `, compressed to 1.2 MiB`, `, 3 blocks held compressed to 40 KiB`. */
function storedOf(e: EntryRecord): string {
  if (e.stored) return `, compressed to ${formatSize(e.stored.length)}`
  if (e.blocks?.stored) return `, ${e.blocks.held.length} block${e.blocks.held.length === 1 ? '' : 's'} held compressed to ${formatSize(storedLength(e))}`
  return ''
}

/** `delta 2 of #5 (needs #5, #6), 12/256 blocks changed`: a delta checkpoint's chain and share, over its rank files. */
async function chainOf(dir: string, files: readonly { file: string }[], delta: DeltaRecord): Promise<string> {
  let changed = 0
  let total = 0
  for (const f of files) {
    // A header that cannot be read is reported by validation; the share counts the others.
    const info = await readHeaderOnly(`${dir}/${f.file}`).catch(() => undefined)
    if (!info) continue
    const share = deltaShare(info.header)
    changed += share.changed
    total += share.total
  }
  return `delta ${delta.depth} of #${delta.base} (needs ${delta.needs.map((n) => `#${n}`).join(', ')}), ${changed}/${total} blocks changed`
}

/** The XOR set of each parity slice of checkpoint `seq` in `store` (a slice that cannot be read is left out: validation names it). */
/**
 * The XOR set of each parity slice of checkpoint `seq` in `store`, every
 * checksum verified (a slice is read whole, as a rebuild reads it; the
 * `COMMIT` beside the slices is the protected checkpoint's, whose sizes are
 * its rank files'), and what is wrong with the others.
 */
async function slicesOf(store: CheckpointStore, seq: number, files: readonly { rank: number; file: string }[]): Promise<{ slices: { rank: number; set: number[] }[]; problems: ValidationReport['problems'] }> {
  const slices: { rank: number; set: number[] }[] = []
  const problems: ValidationReport['problems'] = []
  for (const { rank, file } of files) {
    const path = store.fileOf(seq, rank)
    try {
      slices.push({ rank, set: decodeParityFile(await readFile(path), path, seq, rank).set.members })
    } catch (e) {
      problems.push({ file, rank, reason: e instanceof CheckpointCorruptError ? e.reason : (e as Error).message })
    }
  }
  return { slices, problems }
}

/**
 * Every checkpoint of one level's store, with its validity; `presentOnly`:
 * check only the rank files this directory holds (one of several, or a partner directory).
 */
async function rowsOf(store: CheckpointStore, verify: boolean, presentOnly = false, parity = false): Promise<Row[]> {
  const rows: Row[] = []
  for (const c of await store.list()) {
    const size = c.marker?.size ?? c.files.length
    const present = c.files.map((x) => x.rank)
    const slices = parity ? await slicesOf(store, c.seq, c.files) : undefined
    const report = slices
      ? c.complete
        ? { ok: slices.problems.length === 0, problems: slices.problems }
        : undefined
      : c.complete
        ? await store.validate(c.seq, size, { checksums: verify, ranks: presentOnly ? present : undefined })
        : undefined
    const first = c.files[0]
    // An unreadable header only leaves its columns at "?": validate (complete checkpoints) or the missing marker says what is wrong.
    const header = first ? await readHeaderOnly(`${c.path}/${first.file}`).catch(() => undefined) : undefined
    // Re-slicing needs every old rank's header: one directory of several is judged with the others (inspectMany).
    const elastic = report?.ok && !presentOnly ? await elasticityOf(new DirectorySource(store), c.seq, size) : undefined
    const chain = header?.header.delta ? await chainOf(c.path, c.files, header.header.delta) : undefined
    rows.push({
      ...(slices ? { slices: slices.slices } : {}),
      ...(elastic ? { elastic } : {}),
      ...(chain ? { chain } : {}),
      seq: c.seq,
      complete: c.complete,
      ...(c.uncommitted ? { uncommitted: true } : {}),
      ...(c.foreign ? { foreign: true } : {}),
      ...(c.marker?.membership ? { membership: c.marker.membership } : {}),
      path: c.path,
      valid: report?.ok ?? false,
      skeleton: c.marker?.skeleton ?? header?.header.skeleton,
      step: c.marker?.step ?? header?.header.step,
      ranks: c.marker?.size ?? header?.header.size,
      bytes: c.files.reduce((s, f) => s + f.bytes, 0),
      entries: header ? header.header.entries.map((e) => `${e.name}(${e.kind === 'heavy' ? `${e.dtype} ${formatSize(e.length)}${storedOf(e)}` : 'light'})`) : [],
      runId: c.marker?.runId ?? header?.header.runId,
      code: codeOf(c.marker?.code ?? header?.header.code),
      // A folder that is not molotof's is named on its line; another problem about a folder names it here.
      problems: [...(c.problem && !c.foreign ? [c.problemPath ? `${c.problemPath}: ${c.problem}` : c.problem] : []), ...(report?.problems ?? []).map((p) => `${p.file}: ${p.reason}`)],
      present,
      validRanks: report ? validRanks(report, presentOnly ? present : Array.from({ length: size }, (_, r) => r)) : [],
    })
  }
  return rows
}

/**
 * For each complete checkpoint missing or holding a damaged rank file (the
 * present ones only, on a level holding some ranks' files): the other levels
 * with a valid copy of that file in the same checkpoint of the same run.
 */
function noteCopies(listed: readonly Listed[]): void {
  const levels = listed.map((x) => x.listing)
  for (const { kind, listing: l } of listed) {
    for (const r of l.checkpoints) {
      if (!r.complete || r.valid || r.ranks === undefined) continue
      const held = kind.someRanks ? r.present : Array.from({ length: r.ranks }, (_, k) => k)
      r.damaged = held
        .filter((rank) => !r.validRanks.includes(rank))
        .map((rank) => ({
          rank,
          validCopies: levels
            .filter((o) => o !== l && o.checkpoints.some((c) => c.seq === r.seq && c.runId === r.runId && c.validRanks.includes(rank)))
            .map((o) => ({ level: o.level, dir: o.dir ?? (o.dirs ?? []).join(', ') })),
        }))
    }
  }
}

function printRows(rows: readonly Row[], out: (s: string) => void, copies = false): void {
  for (const r of rows) {
    if (r.foreign) {
      // Nothing in it is read: its name and where it is are all there is to say.
      out(`  #${r.seq}  not molotof's: ${r.path} (no rank file or commit marker of its format): left as it is, never read as a checkpoint`)
      for (const p of r.problems) out(`      ${p}`)
      continue
    }
    const state = r.foreign ? "not molotof's" : r.uncommitted ? 'uncommitted' : !r.complete ? 'INCOMPLETE' : r.valid ? 'valid' : 'INVALID'
    // "elastic": resumable on another rank count; otherwise what blocks it, on the next line.
    const elastic = r.elastic ? (r.elastic.ok ? '  elastic' : '  not elastic') : ''
    // A partner directory holds other ranks' files: which ones.
    const held = r.slices
      ? `  parity slice${r.slices.length === 1 ? '' : 's'} of checkpoint #${r.seq}: ${r.slices.map((x) => `rank ${x.rank}'s of XOR set {${x.set.join(', ')}}`).join(', ') || '-'}`
      : copies
        ? `  copies of rank${r.present.length === 1 ? '' : 's'} ${r.present.join(', ') || '-'}`
        : ''
    out(
      `  #${r.seq}  ${state.padEnd(11)} skeleton ${r.skeleton ?? '?'} step ${r.step ?? '?'}  ${r.ranks ?? '?'} ranks${held}  ${formatSize(r.bytes)}  entries: ${r.entries.join(', ') || '-'}${r.chain ? `  ${r.chain}` : ''}${identityOf(r)}${elastic}`,
    )
    for (const p of r.problems) out(`      ${p}`)
    if (r.membership) out(`      ${membershipText(r.membership)}`)
    if (r.elastic && !r.elastic.ok) out(`      on another rank count: ${r.elastic.blockers.join('; ')}`)
    for (const d of r.damaged ?? []) {
      const where = d.validCopies.map((c) => `the ${c.level} level (${c.dir})`).join(', ')
      out(`      rank ${d.rank}'s file: ${where ? `a valid copy is on ${where}` : 'no valid copy on another level'}`)
    }
  }
}

/** One level in text: its heading, its checkpoints and its spare files. */
function printLevel({ kind, listing: l }: Listed, verify: boolean, out: (s: string) => void): void {
  const where = l.dir ?? (l.dirs ?? []).join(', ')
  const what = kind.inspectTitle
  if (l.checkpoints.length === 0) {
    out(`no checkpoints in ${where} (${what})`)
    return
  }
  out(`checkpoints in ${where} (${what})${verify ? ' (checksums verified)' : ''}:`)
  printRows(l.checkpoints, out, kind.someRanks)
  if (l.spares && l.spares.length > 0) {
    const bytes = l.spares.reduce((n, f) => n + f.bytes, 0)
    out(`  spare: ${l.spares.length} rank file${l.spares.length === 1 ? '' : 's'} of pruned checkpoints, ${formatSize(bytes)} (overwritten by the next checkpoints instead of new files)`)
  }
}

/** A level read from one directory; only the rank files present in a level holding some ranks' files (a partner directory). */
async function levelOf(kind: LevelKind, dir: string, verify: boolean): Promise<Listed> {
  const store = new CheckpointStore(dir, kind.volatile ? { volatile: true } : {})
  return { kind, listing: { level: kind.name, dir: store.dir, checkpoints: await rowsOf(store, verify, kind.someRanks, kind.name === 'xor'), spares: await store.spares() } }
}

/**
 * Every level of `kind` found from these roots (one per checkpoint directory
 * for a level kept inside it, one for a level they share), where present.
 */
async function levelsOf(kind: LevelKind, roots: readonly LevelRoots[], verify: boolean): Promise<Listed[]> {
  const dirs = [...new Set(roots.map((r) => kind.dirOf(r)))].filter((d): d is string => d !== undefined && existsSync(d))
  const levels: Listed[] = []
  for (const d of dirs) levels.push(await levelOf(kind, d, verify))
  return levels
}

/**
 * The shared level's checkpoint directory from --shared-dir: the directory
 * itself when it holds checkpoints, else its one sub-directory that does
 * (molotof run writes them to `<shared-dir>/<program name>`).
 */
function sharedLevelDir(dir: string): string {
  if (!existsSync(dir)) throw new ConfigError(`molotof inspect: --shared-dir ${dir} does not exist`)
  const holdsCheckpoints = (d: string): boolean => readdirSync(d).some((n) => CHECKPOINT_DIR.test(n))
  if (holdsCheckpoints(dir)) return dir
  const programs = readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && holdsCheckpoints(join(dir, e.name)))
    .map((e) => e.name)
    .sort()
  if (programs.length > 1) {
    throw new ConfigError(`molotof inspect: --shared-dir ${dir} holds the checkpoints of several programs (${programs.join(', ')}): name one, as in --shared-dir ${join(dir, programs[0])}`)
  }
  return programs.length === 1 ? join(dir, programs[0]) : dir
}

const CHECKPOINT_DIR = /^ckpt-\d{8,}$/

/** The memory level molotof run uses for `dir`, or undefined where there is no RAM directory. */
function defaultMemoryDir(dir: string): string | undefined {
  try {
    return memoryDirFor(dir)
  } catch {
    // No /dev/shm here: no default memory level to show.
    return undefined
  }
}

type InspectFlags = { verify: boolean; json: boolean; memoryDir: string | undefined; sharedDir: string | undefined }

/** `molotof inspect`: exit 0 when the newest checkpoint is complete and valid, 1 otherwise. */
export async function inspectCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const { values: f, positionals } = parseCommand(INSPECT_OPTIONS, argv, 1)
  if (f.help) {
    out(INSPECT_HELP)
    return 0
  }
  const [dir] = positionals
  if (!dir) throw new ConfigError('molotof inspect: name the checkpoint directory (see molotof inspect --help)')
  // A template is inspected over every directory it matches on this host, as a resume looks for them (one or several).
  if (TEMPLATE.test(dir)) return inspectMany(matchingDirs(dir), memoryTemplateOf(dir, f.memoryDir), f, out)
  if (!existsSync(dir)) throw new ConfigError(`molotof inspect: ${dir} does not exist`)
  const shared = f.sharedDir === undefined ? undefined : sharedLevelDir(f.sharedDir)
  // A --memory-dir that held the user's files has the level in its sub-directory molotof-memory.
  const memory = f.memoryDir !== undefined && f.memoryDir !== '' ? memoryLevelDirectoryIn(resolve(f.memoryDir)) : defaultMemoryDir(dir)
  const roots: LevelRoots = { disk: dir, ...(memory !== undefined ? { memory } : {}), ...(shared !== undefined ? { shared } : {}) }
  const listed: Listed[] = []
  for (const kind of LISTED_KINDS) listed.push(...(await levelsOf(kind, [roots], f.verify)))
  noteCopies(listed)
  const disk = listed.find((l) => l.kind.name === 'disk' && !l.kind.copy)!.listing
  const holder = await lockHolder(resolve(dir))
  const lock = holder ? { ...holder, running: alive(holder) } : undefined
  if (f.json) {
    // The disk level's fields stay at the top, as before levels existed.
    out(JSON.stringify({ dir: disk.dir, checkpoints: disk.checkpoints, spares: disk.spares, lock, levels: listed.map((l) => l.listing) }, null, 2))
  } else {
    for (const l of listed) {
      printLevel(l, f.verify, out)
      if (l.listing === disk && lock) {
        out(`  lock: pid ${lock.pid} on ${lock.host}, started ${lock.startedAt}${lock.running ? ' (running)' : ' (stale: that run is gone; the next run takes it over)'}`)
      }
    }
  }
  // The newest checkpoint of the memory and disk levels decides the exit code (the copies are only listed).
  const rows = listed
    .filter((l) => !l.kind.copy)
    .flatMap((l) => l.listing.checkpoints)
    .sort((x, y) => x.seq - y.seq || Number(x.valid) - Number(y.valid))
  return exitCodeOf(rows)
}

const TEMPLATE = /\{(node|rank)\}/

/** Every directory a `{node}`/`{rank}` template matches on this host (placeholders in any part of the path), sorted. */
function matchingDirs(template: string): string[] {
  const found = matchingDirectories(resolve(template))
  if (found.length === 0) throw new ConfigError(`molotof inspect: no directory matches ${template} on this host`)
  return found
}

/**
 * The memory level's directories for a template's checkpoint directories, as
 * a template: --memory-dir as given, else the default one molotof run uses
 * for it (one per node or rank as the template has them, see run.ts).
 */
function memoryTemplateOf(template: string, memoryDir: string | undefined): string | undefined {
  if (memoryDir !== undefined && memoryDir !== '') return resolve(memoryDir)
  const placeholders = ['{node}', '{rank}'].filter((p) => template.includes(p)).map((p) => `-${p}`).join('')
  const base = defaultMemoryDir(resolve(template))
  return base === undefined ? undefined : base + placeholders
}

/** Several directories of one run (`{node}`): a checkpoint is valid when every rank's file is valid in the directory holding it. */
async function inspectMany(dirs: string[], memoryTemplate: string | undefined, f: InspectFlags, out: (s: string) => void): Promise<number> {
  const shared = f.sharedDir === undefined ? undefined : sharedLevelDir(f.sharedDir)
  const bySeq = new Map<number, Row>()
  // Where each rank's file of each checkpoint is: re-slicing is judged from the files wherever they are.
  const sources = new Map(dirs.map((d) => [d, new DirectorySource(new CheckpointStore(d))]))
  const fileSources = new Map<number, RankFileSource[]>()
  for (const d of dirs) {
    for (const r of await rowsOf(new CheckpointStore(d), f.verify, true)) {
      const at = fileSources.get(r.seq) ?? fileSources.set(r.seq, []).get(r.seq)!
      for (const k of r.present) at[k] ??= sources.get(d)!
      const m = bySeq.get(r.seq)
      if (!m) bySeq.set(r.seq, r)
      else {
        Object.assign(m, { complete: m.complete && r.complete, valid: m.valid && r.valid, bytes: m.bytes + r.bytes })
        // Uncommitted only where no directory committed it: a marker in one and none in another is a damage.
        if (!(m.uncommitted && r.uncommitted)) delete m.uncommitted
        m.skeleton ??= r.skeleton
        m.step ??= r.step
        m.ranks ??= r.ranks
        m.membership ??= r.membership
        m.problems.push(...r.problems)
        // The same number in another directory that is not molotof's: named too (the row names the first one's).
        if (r.foreign) m.problems.push(`${r.path}: not molotof's either, left as it is`)
        m.present.push(...r.present)
        // Valid ranks count only while every directory's part is complete.
        m.validRanks = m.complete ? [...m.validRanks, ...r.validRanks] : []
      }
    }
  }
  const rows = [...bySeq.values()].sort((a, b) => a.seq - b.seq)
  for (const r of rows) {
    const missing = Array.from({ length: r.ranks ?? 0 }, (_, k) => k).filter((k) => !r.present.includes(k))
    if (missing.length > 0) {
      r.valid = false
      r.problems.push(`no directory holds the file of rank${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`)
    }
    if (r.complete && r.valid && r.ranks !== undefined) r.elastic = await elasticityOf(new SpreadSource(fileSources.get(r.seq)!), r.seq, r.ranks)
  }
  // The disk level is the directories together (above); the other levels each directory keeps are listed one by
  // one, and so is each memory level the memory template matches on this host (a lost node's left behind included).
  const memories = memoryTemplate === undefined ? [] : matchingDirectories(memoryTemplate).map(memoryLevelDirectoryIn)
  const roots: LevelRoots[] = [
    ...dirs.map((d) => ({ disk: d, ...(shared !== undefined ? { shared } : {}) })),
    ...memories.map((memory) => ({ disk: dirs[0], memory })),
  ]
  const levels: Listed[] = []
  for (const kind of LISTED_KINDS) {
    if (kind.name === 'disk' && !kind.copy) levels.push({ kind, listing: { level: kind.name, dirs, checkpoints: rows } })
    else levels.push(...(await levelsOf(kind, roots, f.verify)))
  }
  noteCopies(levels)
  if (f.json) out(JSON.stringify({ dirs, checkpoints: rows, levels: levels.map((l) => l.listing) }, null, 2))
  else {
    for (const l of levels) {
      if (l.listing.dirs === dirs) {
        // Listed even when empty: every matched directory is named.
        out(`checkpoints in ${dirs.join(', ')} (${l.kind.inspectTitle})${f.verify ? ' (checksums verified)' : ''}:`)
        printRows(rows, out)
      } else printLevel(l, f.verify, out)
    }
  }
  return exitCodeOf(rows)
}

/**
 * 0 when the newest checkpoint is complete and valid, else 1. A checkpoint
 * its run never committed (a write interrupted at the run's end) does not
 * count: it never was a recovery line, and the one before it is the newest.
 */
function exitCodeOf(rows: readonly Row[]): number {
  const newest = rows.filter((r) => !r.uncommitted && !r.foreign).pop()
  return newest && newest.complete && newest.valid ? 0 : 1
}

/** Whether a valid checkpoint can be resumed on another rank count (see elasticBlockers). */
async function elasticityOf(source: RankFileSource, seq: number, size: number): Promise<{ ok: boolean; blockers: string[] }> {
  const { blockers } = await elasticBlockers(source, seq, size)
  const refused = blockers.filter((b) => b.why === 'no-box')
  const merge = blockers.filter((b) => b.why === 'differs')
  const lines = [
    ...(refused.length > 0 ? [`no: ${refused.map(describeBlocker).join('; ')}`] : []),
    ...(merge.length > 0 ? [`${refused.length > 0 ? 'and' : 'only if the program merges them'}: ${merge.map(describeBlocker).join('; ')}`] : []),
  ]
  return { ok: blockers.length === 0, blockers: lines }
}

/** `written under membership epoch 1: node 0 ranks 0–1, node 3 ranks 2–3; spare nodes: none`. */
function membershipText(m: MembershipRecord): string {
  const rpn = m.ranksPerNode
  const ranks = (slot: number) => (rpn === 1 ? `rank ${slot}` : `ranks ${slot * rpn}–${slot * rpn + rpn - 1}`)
  const nodes = m.nodes.map((node, slot) => `node ${node} ${ranks(slot)}`).join(', ')
  return `written under membership epoch ${m.epoch}: ${nodes}; spare nodes: ${m.spares.length > 0 ? m.spares.join(', ') : 'none'}`
}

function codeOf(code: { hash: string; files: Record<string, string> } | undefined): Row['code'] {
  return code ? { hash: code.hash, files: Object.keys(code.files) } : undefined
}

/** The run and code a checkpoint belongs to, at the end of its line (the JSON lists the code's files). */
function identityOf(r: Row): string {
  if (r.runId === undefined && r.code === undefined) return ''
  return `  run ${r.runId || '-'} code ${r.code?.hash ?? '-'}`
}
