import { existsSync, statSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads'
import { ConfigError, MolotofError, ProgramLoadError, RankFailedError } from '../errors.js'
import type { RankToLauncher } from './protocol.js'
import type { CheckpointEvent, FaultToleranceConfig } from '../checkpoint/service.js'
import { createStatusBuffer, readStatus } from './status.js'

export interface LaunchOptions {
  /** Number of ranks (SPMD copies of the program). */
  ranks: number
  /** The program's own options, as on the command line (`['--n', '512']`). */
  argv?: readonly string[]
  /** Receives every line a rank logs (default: print to stdout). */
  onLog?: (rank: number, text: string) => void
  /** Checkpointing and recovery (off when absent). */
  checkpoint?: FaultToleranceConfig
  /** Called on rank 0's report of each committed checkpoint. */
  onCheckpoint?: (e: CheckpointEvent) => void
}

export interface RunResult<R = unknown> {
  /** Rank 0's return value of `main`. */
  value: R
  /** Every rank's return value, in rank order. */
  values: R[]
  /** Rank 0's formatted result, when the program defines `format`. */
  text: string | undefined
  ranks: number
  wallMs: number
}

export interface ProgramDescription {
  name: string
  description: string
  optionsHelp: string
}

const BOOT = new URL('./rank-boot.mjs', import.meta.url)

/**
 * Run a program file on N ranks, each a worker thread of this process, and
 * wait for all of them. Any rank that throws, exits or crashes stops every
 * rank and rejects with an error naming the rank, skeleton, step and phase.
 *
 * ```ts
 * const { value } = await launch('examples/jacobi/jacobi.ts', { ranks: 4, argv: ['--n', '512'] })
 * ```
 */
export async function launch<R = unknown>(programFile: string, opts: LaunchOptions): Promise<RunResult<R>> {
  const { ranks } = opts
  if (!Number.isInteger(ranks) || ranks < 1) throw new ConfigError(`the rank count must be a positive integer (got ${ranks})`)
  const file = checkProgramFile(programFile)
  const started = performance.now()
  const status = createStatusBuffer(ranks)
  const ports = wire(ranks)
  const onLog = opts.onLog ?? ((_r: number, text: string) => console.log(text))
  const workers: Worker[] = []
  const values: unknown[] = new Array(ranks)
  let text: string | undefined
  let received = 0

  return new Promise<RunResult<R>>((resolveRun, rejectRun) => {
    let settled = false
    const stopAll = () => Promise.all(workers.map((w) => w.terminate())).catch(() => undefined)
    const fail = (err: Error) => {
      if (settled) return
      settled = true
      void stopAll().then(() => rejectRun(err))
    }
    const where = (rank: number) => {
      const s = readStatus(status, rank)
      return { rank, skeleton: s.skeleton, step: s.step, phase: s.phase }
    }
    for (let rank = 0; rank < ranks; rank++) {
      const init = { mode: 'run', rank, size: ranks, argv: [...(opts.argv ?? [])], ports: ports[rank], status, ft: opts.checkpoint }
      const w = new Worker(BOOT, {
        workerData: { programFile: file, tsconfig: findTsconfig(file), init },
        transferList: ports[rank].filter((p): p is MessagePort => p !== undefined),
      })
      workers.push(w)
      w.on('message', (m: RankToLauncher) => {
        switch (m.type) {
          case 'log':
            onLog(m.rank, m.text)
            return
          case 'checkpoint':
            if (m.rank === 0) opts.onCheckpoint?.(m)
            return
          case 'result':
            values[m.rank] = m.value
            if (m.rank === 0) text = m.text
            if (++received === ranks && !settled) {
              settled = true
              void stopAll().then(() =>
                resolveRun({ value: values[0] as R, values: values as R[], text, ranks, wallMs: performance.now() - started }),
              )
            }
            return
          case 'config-error':
            return fail(new ConfigError(m.message))
          case 'load-error':
            return fail(new ProgramLoadError(m.message))
          case 'error': {
            const loc = { rank: m.rank, skeleton: m.skeleton, step: m.step, phase: m.phase }
            const err = new RankFailedError(loc, `${m.name}: ${m.message}`, m.stack)
            return fail(m.code && m.code !== 'E_RANK' ? rethrowTyped(m.code, m.message, err) : err)
          }
          case 'describe':
            return
        }
      })
      w.on('error', (e) => fail(new RankFailedError(where(rank), `uncaught ${e.name}: ${e.message}`, e.stack)))
      w.on('exit', (code) => {
        if (!settled && values[rank] === undefined) fail(new RankFailedError(where(rank), `the rank thread exited (code ${code}) before finishing`))
      })
    }
  })
}

/** Load a program file in one thread just to read its name and options (for `--help`). */
export async function describe(programFile: string): Promise<ProgramDescription> {
  const file = checkProgramFile(programFile)
  const status = createStatusBuffer(1)
  const init = { mode: 'describe', rank: 0, size: 1, argv: [], ports: [undefined], status }
  const w = new Worker(BOOT, { workerData: { programFile: file, tsconfig: findTsconfig(file), init } })
  try {
    return await new Promise<ProgramDescription>((res, rej) => {
      w.on('message', (m: RankToLauncher) => {
        if (m.type === 'describe') res(m)
        else if (m.type === 'load-error') rej(new ProgramLoadError(m.message))
      })
      w.on('error', rej)
      w.on('exit', () => rej(new ProgramLoadError(`${file}: the program thread exited before describing itself`)))
    })
  } finally {
    await w.terminate()
  }
}

/**
 * Errors that are the user's to fix (bad settings, impossible partitions,
 * mismatched checkpoints) keep their type when they cross from a rank; the
 * rank and step stay in the message.
 */
function rethrowTyped(code: string, message: string, asRankError: RankFailedError): Error {
  if (code === 'E_CONFIG') return new ConfigError(message)
  const e = new MolotofError(code, `${message} (${asRankError.message.split(':')[0]})`)
  return e
}

function checkProgramFile(programFile: string): string {
  const file = resolve(programFile)
  if (!existsSync(file) || !statSync(file).isFile()) throw new ProgramLoadError(`program file not found: ${programFile}`)
  return file
}

/** Full mesh of channels: ports[a][b] is rank a's end of the a–b channel. */
function wire(size: number): Array<Array<MessagePort | undefined>> {
  const ports: Array<Array<MessagePort | undefined>> = Array.from({ length: size }, () => new Array(size).fill(undefined))
  for (let a = 0; a < size; a++) {
    for (let b = a + 1; b < size; b++) {
      const ch = new MessageChannel()
      ports[a][b] = ch.port1
      ports[b][a] = ch.port2
    }
  }
  return ports
}

/** The tsconfig.json nearest to a TypeScript program (its `paths` decide what `molotof` resolves to). */
function findTsconfig(file: string): string | undefined {
  if (!/\.[mc]?tsx?$/.test(file)) return undefined
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const candidate = join(dir, 'tsconfig.json')
    if (existsSync(candidate)) return candidate
    if (dirname(dir) === dir) return undefined
  }
}
