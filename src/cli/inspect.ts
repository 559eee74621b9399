import { existsSync, readdirSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { readHeaderOnly } from '../checkpoint/format/rank-file.js'
import { CheckpointStore } from '../checkpoint/store/checkpoint-store.js'
import { ConfigError } from '../errors.js'
import { option } from '../skeletons/options.js'
import { HELP_OPTION, parseCommand } from './args.js'
import { formatHelp } from './help.js'
import { formatBytes } from './run.js'

const INSPECT_OPTIONS = {
  verify: option.boolean(false, 'read every payload and check its checksum'),
  json: option.boolean(false, 'print the listing as JSON'),
  ...HELP_OPTION,
}

const INSPECT_HELP = formatHelp({
  usage: 'molotof inspect <checkpoint-dir> [--verify] [--json]',
  about: `Lists the checkpoints in a directory: skeleton, step, ranks, entries, sizes,
completeness (commit marker present) and validity (sizes and headers, and with
--verify every checksum), and the spare files pruning left for the next writes.
A directory name with {node} or {rank} (as given to molotof run) inspects every
directory it matches as one: each rank's file is checked where it is.`,
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
  problems: string[]
  /** Ranks whose file is present. */
  present: number[]
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
  if (!existsSync(dirs[0])) throw new ConfigError(`molotof inspect: ${dir} does not exist`)
  const store = new CheckpointStore(dirs[0])
  const rows = await rowsOf(store, f.verify, false)
  const spares = await store.spares()
  if (f.json) {
    out(JSON.stringify({ dir: store.dir, checkpoints: rows, spares }, null, 2))
  } else if (rows.length === 0) {
    out(`no checkpoints in ${store.dir}`)
  } else {
    out(`checkpoints in ${store.dir}${f.verify ? ' (checksums verified)' : ''}:`)
    printRows(rows, out)
  }
  if (spares.length > 0 && !f.json) {
    const bytes = spares.reduce((n, f) => n + f.bytes, 0)
    out(`  spare: ${spares.length} rank file${spares.length === 1 ? '' : 's'} of pruned checkpoints, ${formatBytes(bytes)} (overwritten by the next checkpoints instead of new files)`)
  }
  const newest = rows[rows.length - 1]
  return newest && newest.complete && newest.valid ? 0 : 1
}

function printRows(rows: readonly Row[], out: (s: string) => void): void {
  for (const r of rows) {
    const state = !r.complete ? 'INCOMPLETE' : r.valid ? 'valid' : 'INVALID'
    out(
      `  #${r.seq}  ${state.padEnd(10)} skeleton ${r.skeleton ?? '?'} step ${r.step ?? '?'}  ${r.ranks ?? '?'} ranks  ${formatBytes(r.bytes)}  entries: ${r.entries.join(', ') || '-'}`,
    )
    for (const p of r.problems) out(`      ${p}`)
  }
}

/** One row per checkpoint of a store; `presentOnly`: check only the rank files this directory holds (one of several). */
async function rowsOf(store: CheckpointStore, verify: boolean, presentOnly: boolean): Promise<Row[]> {
  const rows: Row[] = []
  for (const c of await store.list()) {
    const size = c.marker?.size ?? c.files.length
    const ranks = presentOnly ? c.files.map((x) => x.rank) : undefined
    const report = c.complete ? await store.validate(c.seq, size, { checksums: verify, ranks }) : undefined
    const first = c.files[0]
    // An unreadable header only leaves its columns at "?": validate (complete checkpoints) or the missing marker says what is wrong.
    const header = first ? await readHeaderOnly(`${c.path}/${first.file}`).catch(() => undefined) : undefined
    rows.push({
      seq: c.seq,
      complete: c.complete,
      valid: report?.ok ?? false,
      skeleton: c.marker?.skeleton ?? header?.header.skeleton,
      step: c.marker?.step ?? header?.header.step,
      ranks: c.marker?.size ?? header?.header.size,
      bytes: c.files.reduce((s, f) => s + f.bytes, 0),
      entries: header ? header.header.entries.map((e) => `${e.name}(${e.kind === 'heavy' ? `${e.dtype} ${formatBytes(e.length)}` : 'light'})`) : [],
      problems: [...(c.problem ? [c.problem] : []), ...(report?.problems ?? []).map((p) => `${p.file}: ${p.reason}`)],
      present: c.files.map((x) => x.rank),
    })
  }
  return rows
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
