import { existsSync, readdirSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { readHeaderOnly } from '../checkpoint/format/rank-file.js'
import { describeBlocker, elasticBlockers } from '../checkpoint/recovery/elastic/line.js'
import { DirectorySource } from '../checkpoint/recovery/elastic/source.js'
import { CheckpointStore } from '../checkpoint/store/checkpoint-store.js'
import { alive, lockHolder } from '../checkpoint/store/dir-lock.js'
import { memoryDirFor } from '../checkpoint/store/memory-level.js'
import { ConfigError } from '../errors.js'
import { option } from '../skeletons/options.js'
import { HELP_OPTION, parseCommand } from './args.js'
import { formatHelp } from './help.js'
import { formatBytes } from './run.js'

const INSPECT_OPTIONS = {
  memoryDir: option.string(undefined, "the memory level's directory (default: the one molotof run uses for this checkpoint directory, when present)"),
  verify: option.boolean(false, 'read every payload and check its checksum'),
  json: option.boolean(false, 'print the listing as JSON'),
  ...HELP_OPTION,
}

const INSPECT_HELP = formatHelp({
  usage: 'molotof inspect <checkpoint-dir> [--verify] [--json]',
  about: `Lists the checkpoints in a directory: skeleton, step, ranks, entries, sizes,
completeness (commit marker present) and validity (sizes and headers, and with
--verify every checksum), whether each can be resumed on another rank count
("elastic"; otherwise what blocks it), the spare files pruning left for the
next writes, and who holds the directory's lock. Every level is shown: the
disk level (the directory named) and the memory level in RAM
(/dev/shm/molotof-<hash of that directory>, or --memory-dir) when present.
The same checkpoint number on both levels is the same checkpoint (the disk
copy is flushed from the memory one). A directory name with {node} or {rank}
(as given to molotof run) inspects every directory it matches as one: each
rank's file is checked where it is.`,
  sections: [{ title: 'Options', specs: INSPECT_OPTIONS }],
  exitCodes: [
    [0, 'the newest checkpoint is complete and valid'],
    [1, 'it is not, or there is no checkpoint'],
    [2, 'bad input (options, a directory that does not exist)'],
  ],
  examples: ['molotof inspect .molotof/jacobi --verify', "molotof inspect '/scratch/ckpt-{node}'"],
})

interface Row {
  seq: number
  complete: boolean
  valid: boolean
  skeleton: number | undefined
  step: number | undefined
  ranks: number | undefined
  bytes: number
  entries: string[]
  /** The run lineage that wrote the checkpoint. */
  runId: string | undefined
  /** The hash of the program code that wrote it, and its files. */
  code: { hash: string; files: string[] } | undefined
  problems: string[]
  /** Whether a resume on another rank count can re-slice it; `blockers` say why not (or what needs a merge rule). */
  elastic?: { ok: boolean; blockers: string[] }
  /** Ranks whose file is present. */
  present: number[]
}

/**
 * Every checkpoint of one level's store, with its validity; `presentOnly`:
 * check only the rank files this directory holds (one of several).
 */
async function rowsOf(store: CheckpointStore, verify: boolean, presentOnly = false): Promise<Row[]> {
  const rows: Row[] = []
  for (const c of await store.list()) {
    const size = c.marker?.size ?? c.files.length
    const ranks = presentOnly ? c.files.map((x) => x.rank) : undefined
    const report = c.complete ? await store.validate(c.seq, size, { checksums: verify, ranks }) : undefined
    const first = c.files[0]
    // An unreadable header only leaves its columns at "?": validate (complete checkpoints) or the missing marker says what is wrong.
    const header = first ? await readHeaderOnly(`${c.path}/${first.file}`).catch(() => undefined) : undefined
    // Re-slicing needs every old rank's header: not judged from one directory of several.
    const elastic = report?.ok && !presentOnly ? await elasticityOf(store, c.seq, size) : undefined
    rows.push({
      ...(elastic ? { elastic } : {}),
      seq: c.seq,
      complete: c.complete,
      valid: report?.ok ?? false,
      skeleton: c.marker?.skeleton ?? header?.header.skeleton,
      step: c.marker?.step ?? header?.header.step,
      ranks: c.marker?.size ?? header?.header.size,
      bytes: c.files.reduce((s, f) => s + f.bytes, 0),
      entries: header ? header.header.entries.map((e) => `${e.name}(${e.kind === 'heavy' ? `${e.dtype} ${formatBytes(e.length)}` : 'light'})`) : [],
      runId: c.marker?.runId ?? header?.header.runId,
      code: codeOf(c.marker?.code ?? header?.header.code),
      problems: [...(c.problem ? [c.problem] : []), ...(report?.problems ?? []).map((p) => `${p.file}: ${p.reason}`)],
      present: c.files.map((x) => x.rank),
    })
  }
  return rows
}

function printRows(rows: readonly Row[], out: (s: string) => void): void {
  for (const r of rows) {
    const state = !r.complete ? 'INCOMPLETE' : r.valid ? 'valid' : 'INVALID'
    // "elastic": resumable on another rank count; otherwise what blocks it, on the next line.
    const elastic = r.elastic ? (r.elastic.ok ? '  elastic' : '  not elastic') : ''
    out(
      `  #${r.seq}  ${state.padEnd(10)} skeleton ${r.skeleton ?? '?'} step ${r.step ?? '?'}  ${r.ranks ?? '?'} ranks  ${formatBytes(r.bytes)}  entries: ${r.entries.join(', ') || '-'}${identityOf(r)}${elastic}`,
    )
    for (const p of r.problems) out(`      ${p}`)
    if (r.elastic && !r.elastic.ok) out(`      on another rank count: ${r.elastic.blockers.join('; ')}`)
  }
}

/** The memory level molotof run uses for `dir`, or undefined where there is no RAM directory. */
function defaultMemoryDir(dir: string): string | undefined {
  try {
    return memoryDirFor(dir)
  } catch {
    // No /dev/shm here: no default memory level to show.
    return undefined
  }
}

/** `molotof inspect`: exit 0 when the newest checkpoint is complete and valid, 1 otherwise. */
export async function inspectCommand(argv: readonly string[], out: (s: string) => void): Promise<number> {
  const { values: f, positionals } = parseCommand(INSPECT_OPTIONS, argv, 1)
  if (f.help) {
    out(INSPECT_HELP)
    return 0
  }
  const [dir] = positionals
  if (!dir) throw new ConfigError('molotof inspect: name the checkpoint directory (see molotof inspect --help)')
  const dirs = matchingDirs(dir)
  if (dirs.length > 1) return inspectMany(dirs, f, out)
  if (!existsSync(dir)) throw new ConfigError(`molotof inspect: ${dir} does not exist`)
  const levels: { level: string; store: CheckpointStore }[] = [{ level: 'disk', store: new CheckpointStore(dir) }]
  const memoryDir = f.memoryDir ?? defaultMemoryDir(dir)
  if (memoryDir !== undefined && existsSync(memoryDir)) levels.unshift({ level: 'memory', store: new CheckpointStore(memoryDir, { volatile: true }) })
  const listed = []
  for (const l of levels) listed.push({ level: l.level, dir: l.store.dir, checkpoints: await rowsOf(l.store, f.verify), spares: await l.store.spares() })
  const disk = listed[listed.length - 1]
  const holder = await lockHolder(disk.dir)
  const lock = holder ? { ...holder, running: alive(holder) } : undefined
  if (f.json) {
    // The disk level's fields stay at the top, as before levels existed.
    out(JSON.stringify({ dir: disk.dir, checkpoints: disk.checkpoints, spares: disk.spares, lock, levels: listed }, null, 2))
  } else {
    for (const l of listed) {
      const what = `${l.level} level`
      if (l.checkpoints.length === 0) {
        out(`no checkpoints in ${l.dir} (${what})`)
        continue
      }
      out(`checkpoints in ${l.dir} (${what})${f.verify ? ' (checksums verified)' : ''}:`)
      printRows(l.checkpoints, out)
      if (l.spares.length > 0) {
        const bytes = l.spares.reduce((n, f) => n + f.bytes, 0)
        out(`  spare: ${l.spares.length} rank file${l.spares.length === 1 ? '' : 's'} of pruned checkpoints, ${formatBytes(bytes)} (overwritten by the next checkpoints instead of new files)`)
      }
    }
  }
  if (lock && !f.json) {
    out(`  lock: pid ${lock.pid} on ${lock.host}, started ${lock.startedAt}${lock.running ? ' (running)' : ' (stale: that run is gone; the next run takes it over)'}`)
  }
  // The newest checkpoint over every level decides the exit code.
  const rows = listed.flatMap((l) => l.checkpoints).sort((x, y) => x.seq - y.seq || Number(x.valid) - Number(y.valid))
  const newest = rows[rows.length - 1]
  return newest && newest.complete && newest.valid ? 0 : 1
}

/** `{node}`/`{rank}` in the last path component: every directory it matches (sorted); otherwise the name itself. */
function matchingDirs(template: string): string[] {
  if (!/\{(node|rank)\}/.test(template)) return [template]
  const parent = dirname(template)
  if (/\{(node|rank)\}/.test(parent)) throw new ConfigError(`molotof inspect: put {node} and {rank} in the last part of the directory name only (got ${template})`)
  const pattern = new RegExp(`^${basename(template).replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{(node|rank)\\?\}/g, '\\d+')}$`)
  const found = existsSync(parent) ? readdirSync(parent).filter((n) => pattern.test(n)).map((n) => join(parent, n)) : []
  if (found.length === 0) throw new ConfigError(`molotof inspect: no directory matches ${template}`)
  return found.sort()
}

/** Several directories of one run (`{node}`): a checkpoint is valid when every rank's file is valid in the directory holding it. */
async function inspectMany(dirs: string[], f: { verify: boolean; json: boolean }, out: (s: string) => void): Promise<number> {
  const bySeq = new Map<number, Row>()
  for (const d of dirs) {
    for (const r of await rowsOf(new CheckpointStore(d), f.verify, true)) {
      const m = bySeq.get(r.seq)
      if (!m) bySeq.set(r.seq, r)
      else {
        Object.assign(m, { complete: m.complete && r.complete, valid: m.valid && r.valid, bytes: m.bytes + r.bytes })
        m.skeleton ??= r.skeleton
        m.step ??= r.step
        m.ranks ??= r.ranks
        m.problems.push(...r.problems)
        m.present.push(...r.present)
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
  }
  if (f.json) out(JSON.stringify({ dirs, checkpoints: rows }, null, 2))
  else {
    out(`checkpoints in ${dirs.join(', ')}${f.verify ? ' (checksums verified)' : ''}:`)
    printRows(rows, out)
  }
  const newest = rows[rows.length - 1]
  return newest && newest.complete && newest.valid ? 0 : 1
}

/** Whether a valid checkpoint can be resumed on another rank count (see elasticBlockers). */
async function elasticityOf(store: CheckpointStore, seq: number, size: number): Promise<{ ok: boolean; blockers: string[] }> {
  const { blockers } = await elasticBlockers(new DirectorySource(store), seq, size)
  const refused = blockers.filter((b) => b.why === 'no-box')
  const merge = blockers.filter((b) => b.why === 'differs')
  const lines = [
    ...(refused.length > 0 ? [`no: ${refused.map(describeBlocker).join('; ')}`] : []),
    ...(merge.length > 0 ? [`${refused.length > 0 ? 'and' : 'only if the program merges them'}: ${merge.map(describeBlocker).join('; ')}`] : []),
  ]
  return { ok: blockers.length === 0, blockers: lines }
}

function codeOf(code: { hash: string; files: Record<string, string> } | undefined): Row['code'] {
  return code ? { hash: code.hash, files: Object.keys(code.files) } : undefined
}

/** The run and code a checkpoint belongs to, at the end of its line (the JSON lists the code's files). */
function identityOf(r: Row): string {
  if (r.runId === undefined && r.code === undefined) return ''
  return `  run ${r.runId || '-'} code ${r.code?.hash ?? '-'}`
}
