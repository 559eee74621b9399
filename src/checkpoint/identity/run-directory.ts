import { existsSync } from 'node:fs'
import { readFile, rm } from 'node:fs/promises'
import { basename, join, resolve } from 'node:path'
import { CheckpointDirectoryError, ConfigError, EarlierRunError, MolotofError } from '../../errors.js'
import { CheckpointStore, isStoreEntry, type CheckpointSummary } from '../store/checkpoint-store.js'
import { acquireDirectoryLock, alive, lockHolder, type DirectoryLock } from '../store/dir-lock.js'
import { makeDirectory, writeDurably } from '../store/durable.js'
import { errorCode, explainFsError } from '../store/fs-errors.js'
import { memoryLevelDirectoryIn } from '../store/memory-level.js'
import { cleanOwnedDirectory, ownerOf, removeEmptyDirectory } from '../store/owned-dir.js'
import { partnerDirOf } from '../store/partner.js'
import { readHeaderOnly } from '../format/rank-file.js'
import { codeChangesOnDisk, describeCodeChanges, includesProgramFile } from './code.js'
import { codeChangeVerdict, newestComplete, newRunId } from './run.js'
import { formatSize } from '../../util/bytes.js'

/** What a run may do with the checkpoints it finds in its directory. */
export interface RunDirectoryOptions {
  dir: string
  /** Continue the lineage of the newest complete checkpoint. */
  resume: boolean
  /** Discard every checkpoint in the directory first (a fresh start into a used directory). */
  fresh?: boolean
  /** Resume even if the program's code differs from the checkpoint's (a warning instead of a refusal). */
  allowCodeChange?: boolean
  /**
   * Directories holding copies of this directory's checkpoints (its partner
   * store, the shared level): a resume also considers their newest complete
   * checkpoint, so a lost directory's lineage is found in its copies.
   */
  copies?: readonly string[]
  /** The memory level's directory this run keeps (as configured, `{node}`/`{rank}` kept): recorded for a later resume. */
  memoryDir?: string
  /**
   * Memory level directories an earlier run of this directory may have left
   * checkpoints in (the default one, the one given this time; `{node}`/`{rank}`
   * kept). With the one the directory's RUN record names, they count as the
   * directory's own: a start without `resume` is refused by an unfinished
   * run's checkpoints there too, `fresh` discards them, and a finished resume
   * frees them.
   */
  earlierMemoryDirs?: readonly string[]
  /** The directories a `{node}`/`{rank}` template matches on this host (the runtime knows the naming). */
  matchingDirectories?: (template: string) => readonly string[]
}

/** A checkpoint directory opened for one run: its lock is held until `release`. */
export interface RunDirectory {
  /** The run lineage this run writes (and, after a failure, resumes from). */
  readonly runId: string
  /** A resume found no complete checkpoint here (nor in `copies`): `runId` is new, the ranks may know the lineage. */
  readonly lineageUnknown: boolean
  /** What to tell the user before the ranks start (a stale lock taken over, checkpoints discarded). */
  readonly notes: readonly string[]
  /**
   * The memory level's directory recorded by the earlier run (resuming only): a
   * resume without a memory level of its own reads it too.
   */
  readonly memoryDir: string | undefined
  /** Record that the run finished: a later fresh run may discard its checkpoints without asking. */
  finish(): Promise<void>
  release(): Promise<void>
  /**
   * The run never started (a resume refused before any rank computed): put
   * back what opening wrote — the earlier `RUN` record, or none — release the
   * lock, and remove the directory when opening created it and it is empty.
   */
  forget(): Promise<void>
}

/** The file that says which run last used the directory and whether it finished. */
export const RUN_FILE = 'RUN'

interface RunRecord {
  runId: string
  finished: boolean
  startedAt: string
  /** The memory level's directory of the run (or of the run it resumed), when it had one. */
  memoryDir?: string
}

/**
 * Opens the checkpoint directory for a supervised run, before any rank
 * starts, so that environment problems and refusals come first and fast:
 *
 * 1. creates the directory and takes its lock (the run's first write: an
 *    unwritable or read-only directory is reported here, with the real reason);
 * 2. without `resume`: the checkpoints of a run that finished are discarded
 *    (its result was delivered); those of a run that did not finish (it
 *    failed, was stopped or preempted) refuse the start with EarlierRunError,
 *    saying how to proceed; `fresh` discards them;
 * 3. with `resume`: adopts the lineage of the newest complete checkpoint and
 *    refuses (CodeChangedError) if files of the code that wrote it changed on
 *    disk, unless `allowCodeChange`. The ranks check again what they loaded.
 *
 * ```ts
 * const run = await openRunDirectory({ dir, resume: false }, 'examples/jacobi/jacobi.ts')
 * try { ...attempts with { ...cfg, runId: run.runId }...; await run.finish() } finally { await run.release() }
 * ```
 */
export async function openRunDirectory(o: RunDirectoryOptions, programFile: string): Promise<RunDirectory> {
  const { dir } = o
  if (o.fresh && o.resume) throw new ConfigError('--fresh discards the checkpoints that --resume would continue from: give one or the other')
  const existed = existsSync(dir)
  await createDirectory(dir)
  const store = new CheckpointStore(dir)
  const notes: string[] = []
  const lock = await lockDirectory(dir, store, notes)
  try {
    const listed = await tidyUnderLock(dir, store, notes)
    const record = await readRunRecord(dir)
    // The memory levels an earlier run may have kept: its checkpoints there are as much the directory's as those on disk.
    const memoryLevels = await earlierMemoryLevels(o, record)
    const earlier = { dir, store, listed, record, memoryLevels }
    const { runId, lineageUnknown } = o.fresh
      ? await startFresh(earlier, notes)
      : !o.resume
        ? await startAfterFinishedRun(earlier, programFile)
        : await adoptLineage(o, earlier, programFile)
    return await recordRun(o, lock, { runId, lineageUnknown, notes, record, memoryLevels, existed })
  } catch (e) {
    await lock.release()
    if (e instanceof MolotofError) throw e
    throw new CheckpointDirectoryError(dir, `cannot use the checkpoint directory ${dir}: ${explainFsError(e)}`, { cause: e })
  }
}

/** What the directory holds from earlier runs when this one opens it (under its lock). */
interface EarlierRuns {
  /** The directory as named (messages name it so). */
  dir: string
  store: CheckpointStore
  /** molotof's checkpoints in it (not the user's folders named like them). */
  listed: CheckpointSummary[]
  record: RunRecord | undefined
  memoryLevels: EarlierMemoryLevel[]
}

/** 1a. The directory, created when missing: an unwritable place is reported here, with the real reason. */
async function createDirectory(dir: string): Promise<void> {
  try {
    await makeDirectory(dir)
  } catch (e) {
    throw new CheckpointDirectoryError(dir, `cannot create the checkpoint directory ${dir}: ${explainFsError(e)}`, { cause: e })
  }
}

/**
 * 1b. Its lock: the run's first write. A disk too full for the lock file
 * may be full of an earlier run's interrupted writes: those are freed when
 * no live run holds the directory (none is writing there), then the lock is
 * tried again. A stale lock taken over is noted.
 */
async function lockDirectory(dir: string, store: CheckpointStore, notes: string[]): Promise<DirectoryLock> {
  let lock: DirectoryLock
  try {
    lock = await acquireDirectoryLock(dir).catch(async (e: unknown) => {
      const full = errorCode(e) === 'ENOSPC' || errorCode(e) === 'EDQUOT'
      const holder = full ? await lockHolder(dir) : undefined
      if (!full || (holder !== undefined && alive(holder))) throw e
      const freed = await freeLeftovers(store)
      if (freed === undefined) throw e
      notes.push(freed)
      return acquireDirectoryLock(dir)
    })
  } catch (e) {
    if (e instanceof MolotofError) throw e
    throw new CheckpointDirectoryError(dir, `cannot write to the checkpoint directory ${dir}: ${explainFsError(e)}`, { cause: e })
  }
  if (lock.tookOver) {
    const h = lock.tookOver
    notes.push(`the lock of ${dir} was left by a run that no longer runs (pid ${h.pid} on ${h.host}, started ${h.startedAt}): taken over`)
  }
  return lock
}

/**
 * 1c. With the lock held nothing else writes here: an earlier run's
 * leftovers go before this run needs the room. molotof's checkpoints in the
 * directory; folders of the user's named like checkpoints are noted and
 * never discarded (see isMolotofFolder).
 */
async function tidyUnderLock(dir: string, store: CheckpointStore, notes: string[]): Promise<CheckpointSummary[]> {
  const freed = await freeLeftovers(store)
  if (freed !== undefined) notes.push(freed)
  const all = await store.list()
  const foreign = all.filter((c) => c.foreign).map((c) => c.path)
  if (foreign.length > 0) notes.push(foreignNote(dir, foreign))
  return all.filter((c) => !c.foreign)
}

/** 2a. `fresh`: every checkpoint of an earlier run goes, on disk and in its memory levels; a new lineage. */
async function startFresh({ dir, store, listed, memoryLevels }: EarlierRuns, notes: string[]): Promise<{ runId: string; lineageUnknown: boolean }> {
  await discard(store, listed)
  if (listed.length > 0) notes.push(`--fresh: discarded ${listed.length} checkpoint(s) of an earlier run in ${dir}`)
  for (const l of memoryLevels) {
    discardMemoryLevel(l.dir)
    if (l.listed.length > 0) notes.push(`--fresh: discarded ${l.listed.length} checkpoint(s) of an earlier run in the memory level ${l.dir}`)
  }
  return { runId: newRunId(), lineageUnknown: false }
}

/**
 * 2b. Neither `fresh` nor `resume`: the checkpoints of a run that finished
 * are discarded (its result was delivered); those of a run that did not
 * refuse the start (EarlierRunError, saying how to proceed). A new lineage.
 */
async function startAfterFinishedRun({ dir, store, listed, record, memoryLevels }: EarlierRuns, programFile: string): Promise<{ runId: string; lineageUnknown: boolean }> {
  const committed = listed.filter((c) => c.marker !== undefined)
  const inMemory = memoryLevels.flatMap((l) => l.listed.filter((c) => c.marker !== undefined))
  if (committed.length > 0 || inMemory.length > 0) {
    const finished = record !== undefined && record.finished && [...committed, ...inMemory].every((c) => c.marker!.runId === record.runId)
    if (!finished) {
      const level = memoryLevels.find((l) => l.listed.some((c) => c.marker !== undefined))
      const where = committed.length > 0 ? undefined : level?.dir
      throw new EarlierRunError(dir, earlierRunMessage(dir, committed.length > 0 ? committed : inMemory.sort((a, b) => a.seq - b.seq), programFile, where))
    }
    // That run delivered its result: its checkpoints can restore nothing this run needs.
    await discard(store, listed)
    for (const l of memoryLevels) discardMemoryLevel(l.dir)
  }
  return { runId: newRunId(), lineageUnknown: false }
}

/**
 * 3. `resume`: the lineage of the newest complete checkpoint (here or among
 * the copies), refused (CodeChangedError) when files of the code that wrote
 * it changed on disk, unless `allowCodeChange`. No checkpoint: a new
 * lineage, marked unknown (the ranks may find one elsewhere).
 */
async function adoptLineage(o: RunDirectoryOptions, { listed }: EarlierRuns, programFile: string): Promise<{ runId: string; lineageUnknown: boolean }> {
  const copies: CheckpointSummary[] = []
  for (const d of o.copies ?? []) copies.push(...(await new CheckpointStore(d).list()))
  const newest = newestComplete([...listed, ...copies].sort((a, b) => a.seq - b.seq))
  const m = newest?.marker
  if (newest !== undefined && m !== undefined) {
    // Another program file's checkpoint is left to the ranks: they refuse another program by its name.
    const changes = m.code && includesProgramFile(m.code, programFile) ? codeChangesOnDisk(m.code, programFile) : []
    // Refused here, before any rank starts; when allowed, the ranks warn (they compare everything they loaded).
    if (changes.length > 0 && !o.allowCodeChange) codeChangeVerdict(changes, { seq: newest.seq, allow: false, programFile })
  }
  return { runId: m === undefined ? newRunId() : (m.runId ?? ''), lineageUnknown: m === undefined }
}

/**
 * 4. The `RUN` record of this run (unfinished until `finish`), and the
 * handle. A resume keeps the earlier run's memory directory on record while
 * it may still hold checkpoints of the lineage.
 */
async function recordRun(
  o: RunDirectoryOptions,
  lock: DirectoryLock,
  run: { runId: string; lineageUnknown: boolean; notes: string[]; record: RunRecord | undefined; memoryLevels: readonly EarlierMemoryLevel[]; existed: boolean },
): Promise<RunDirectory> {
  const { dir } = o
  const { runId, memoryLevels } = run
  const recordedMemory = o.resume ? run.record?.memoryDir : undefined
  const memoryDir = o.memoryDir ?? recordedMemory
  const keep = memoryDir === undefined ? {} : { memoryDir }
  await writeRunRecord(dir, { runId, finished: false, startedAt: lock.holder.startedAt, ...keep })
  return {
    runId,
    lineageUnknown: run.lineageUnknown,
    notes: run.notes,
    memoryDir: recordedMemory,
    finish: async () => {
      await writeRunRecord(dir, { runId, finished: true, startedAt: lock.holder.startedAt, ...keep })
      // A finished run frees the memory levels it resumed from, as it frees its own (only the files molotof wrote).
      if (o.resume) for (const l of memoryLevels) discardMemoryLevel(l.dir)
      // And those its lost nodes left on this host (same /dev/shm): only what holds nothing but this run's checkpoints.
      for (const l of await earlierMemoryLevels(o, undefined)) if (await onlyThisRunIn(l, runId)) discardMemoryLevel(l.dir)
    },
    release: () => lock.release(),
    forget: async () => {
      if (run.record) await writeRunRecord(dir, run.record)
      else await rm(join(dir, RUN_FILE), { force: true })
      await lock.release()
      if (!run.existed) removeEmptyDirectory(dir)
    },
  }
}

/**
 * Frees what an earlier run's interrupted writes left in the directory: the
 * temporary files of its writes, and the checkpoints it never committed
 * (no commit marker, newer than every committed one: never a recovery line).
 * Only while no run writes there (the lock held, or nobody holding it).
 * Returns the note saying what went, or undefined when nothing did.
 */
async function freeLeftovers(store: CheckpointStore): Promise<string | undefined> {
  const listed = await store.list()
  const uncommitted = listed.filter((c) => c.uncommitted && !c.foreign)
  let bytes = 0
  const temporary = await store.removeTemporaryFiles({ onRemoved: (n) => (bytes += n) })
  for (const c of uncommitted) {
    bytes += c.files.reduce((n, f) => n + f.bytes, 0)
    await store.remove(c.seq).catch(() => undefined) // an unreadable one stays: it is never a recovery line either
  }
  if (uncommitted.length === 0 && temporary === 0) return undefined
  const what = [
    ...(uncommitted.length > 0 ? [`checkpoint${uncommitted.length > 1 ? 's' : ''} ${uncommitted.map((c) => c.seq).join(', ')} (never committed)`] : []),
    ...(temporary > 0 ? [`${temporary} temporary file${temporary > 1 ? 's' : ''}`] : []),
  ]
  return `freed what interrupted writes of an earlier run left in ${store.dir}: ${what.join(' and ')}, ${formatSize(bytes, { unit: bytes < 2 ** 20 ? 'KiB' : 'MiB', digits: 1 })}`
}

/** A memory level an earlier run left, as found at the start: its directory and the checkpoints it holds (its partner copies too). */
interface EarlierMemoryLevel {
  dir: string
  listed: CheckpointSummary[]
}

/**
 * The memory levels of `o.earlierMemoryDirs` and of the RUN record that
 * exist on this host, each where the level really is (a sub-directory of a
 * directory holding the user's files, see memoryLevelDirectoryIn). Nothing is
 * created. One that cannot be listed counts as holding nothing.
 */
async function earlierMemoryLevels(o: RunDirectoryOptions, record: RunRecord | undefined): Promise<EarlierMemoryLevel[]> {
  const templates = [...(o.earlierMemoryDirs ?? []), ...(o.memoryDir !== undefined ? [o.memoryDir] : []), ...(record?.memoryDir !== undefined ? [record.memoryDir] : [])]
  const expand = (t: string) => (t.includes('{') ? (o.matchingDirectories?.(t) ?? []) : [t])
  const dirs = [...new Set(templates.flatMap(expand).map((d) => memoryLevelDirectoryIn(resolve(d))))]
  const levels: EarlierMemoryLevel[] = []
  for (const d of dirs) {
    if (!existsSync(d)) continue
    const listed: CheckpointSummary[] = []
    // A level that cannot be listed holds nothing to refuse a start for.
    for (const at of [d, partnerDirOf(d)]) listed.push(...(await new CheckpointStore(at, { volatile: true }).list().catch(() => [])))
    levels.push({ dir: d, listed })
  }
  return levels
}

/**
 * Whether a memory level is one this run left behind and no process uses: a
 * directory molotof created whose creator (a lost node's rank process) is
 * gone, holding checkpoints of lineage `runId` only (every commit marker, and
 * every rank file header of a checkpoint never committed, says so). Anything
 * else (another run's, a header that cannot be read) is left as it is.
 */
async function onlyThisRunIn(level: EarlierMemoryLevel, runId: string): Promise<boolean> {
  const owner = ownerOf(level.dir)
  if (owner === undefined || !owner.created || owner.pid === process.pid) return false
  if (alive({ pid: owner.pid, host: owner.host, startedAt: owner.createdAt, ...(owner.pidStart === undefined ? {} : { pidStart: owner.pidStart }) })) return false
  const own = level.listed.filter((c) => !c.foreign)
  if (own.length === 0) return false
  for (const c of own) {
    if (c.marker !== undefined) {
      if (c.marker.runId !== runId) return false
      continue
    }
    for (const f of c.files) {
      // A header that cannot be read proves nothing: the level stays.
      const info = await readHeaderOnly(join(c.path, f.file)).catch(() => undefined)
      if (info?.header.runId !== runId) return false
    }
  }
  return true
}

/** Frees a memory level of an earlier run: only the files molotof wrote there, and only in a directory of molotof's own. */
function discardMemoryLevel(dir: string): void {
  if (ownerOf(dir) !== undefined) cleanOwnedDirectory(dir, isStoreEntry)
}

/** What a run says of the folders named like checkpoints that are not molotof's (see isMolotofFolder). */
function foreignNote(dir: string, foreign: readonly string[]): string {
  const names = foreign.map((f) => basename(f)).join(', ')
  const one = foreign.length === 1
  return (
    `${names} in ${dir} ${one ? 'is' : 'are'} not molotof's (no rank file or commit marker of its format): ` +
    `left as ${one ? 'it is' : 'they are'}, and not read as checkpoints`
  )
}

/** Every checkpoint of the directory and its spare files. */
async function discard(store: CheckpointStore, listed: readonly CheckpointSummary[]): Promise<void> {
  for (const c of listed) await store.remove(c.seq)
  store.discardSpares()
}

async function readRunRecord(dir: string): Promise<RunRecord | undefined> {
  try {
    const v = JSON.parse(await readFile(join(dir, RUN_FILE), 'utf8')) as Partial<RunRecord>
    if (typeof v.runId === 'string' && typeof v.finished === 'boolean') {
      return { runId: v.runId, finished: v.finished, startedAt: String(v.startedAt), ...(typeof v.memoryDir === 'string' ? { memoryDir: v.memoryDir } : {}) }
    }
  } catch {
    // absent or damaged: nothing is known about the earlier run, so it counts as unfinished
  }
  return undefined
}

async function writeRunRecord(dir: string, r: RunRecord): Promise<void> {
  await writeDurably(join(dir, RUN_FILE), [new TextEncoder().encode(JSON.stringify(r) + '\n')])
}

/** `memoryDir`: the checkpoints are on that memory level (none on disk). */
function earlierRunMessage(dir: string, committed: readonly CheckpointSummary[], programFile: string, memoryDir?: string): string {
  const m = committed[committed.length - 1].marker!
  const program = m.fingerprint.replace(/^molotof-program:/, '')
  const ownFile = m.code !== undefined && includesProgramFile(m.code, programFile)
  const changes = m.code && ownFile ? codeChangesOnDisk(m.code, programFile) : []
  const code = !m.code
    ? ''
    : !ownFile
      ? `; written by another program file (its code: ${Object.keys(m.code.files).join(', ')})`
      : changes.length > 0
        ? `; its code differs from the current files: ${describeCodeChanges(changes, programFile)}`
        : '; written by the current code'
  const about = `program ${program}, run ${m.runId ?? 'unknown'}, last checkpoint ${m.seq} at skeleton ${m.skeleton} step ${m.step}, written ${m.createdAt}${code}`
  const holder = memoryDir === undefined ? `the checkpoint directory ${dir}` : `the memory level ${memoryDir} (of the checkpoint directory ${dir})`
  return (
    `${holder} holds checkpoints of an earlier run that did not finish (${about}). ` +
    "A run without --resume never restarts from another run's checkpoints, and does not discard them unasked. " +
    `To continue that run, add --resume${changes.length > 0 ? ' (refused while its code differs, unless you also add --allow-code-change)' : ''}; ` +
    'to discard its checkpoints and start afresh, add --fresh; or use another --checkpoint-dir.'
  )
}
