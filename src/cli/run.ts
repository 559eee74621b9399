import { appendFileSync, writeFileSync } from 'node:fs'
import { basename, join, resolve } from 'node:path'
import { parseDuration } from '../checkpoint/duration.js'
import { parsePolicy } from '../checkpoint/policy.js'
import type { FaultToleranceConfig } from '../checkpoint/service.js'
import { ConfigError } from '../errors.js'
import type { Transport } from '../runtime/group.js'
import { parseInjection, type Injection, type RandomInjection } from '../runtime/inject.js'
import { describe } from '../runtime/launcher.js'
import { Supervisor } from '../runtime/supervisor.js'
import { formatFlags, splitArgs, type FlagSpec } from './args.js'
import { EXIT } from './exit-codes.js'
import { ProgressView } from './progress.js'

export const RUN_FLAGS: Record<string, FlagSpec> = {
  ranks: { kind: 'int', help: 'number of ranks (SPMD copies of the program)', default: 2 },
  transport: { kind: 'string', help: 'threads (worker threads of one process) or processes (one child process per rank)', default: 'threads' },
  checkpoint: { kind: 'string', help: 'checkpoint policy: off, every:<steps>, <seconds>s, mtbf:<duration>, request', default: 'off' },
  'checkpoint-dir': { kind: 'string', help: 'checkpoint directory [default: .molotof/<program file name>]' },
  keep: { kind: 'int', help: 'complete checkpoints kept', default: 2 },
  'async-checkpoints': { kind: 'boolean', help: 'write checkpoints in the background (staging copy), commit once every rank is durable' },
  resume: { kind: 'boolean', help: 'resume from the newest checkpoint valid on every rank (a clean start if there is none)' },
  restarts: { kind: 'int', help: 'automatic restarts after failures', default: 3 },
  heartbeat: { kind: 'int', help: 'heartbeat period of rank processes, ms', default: 200 },
  'hang-timeout': { kind: 'int', help: 'a rank process silent this long (ms) is hung [default: max(2000, 10 × heartbeat)]' },
  inject: { kind: 'string', help: 'inject failures: rank=R,step=S[,phase=calculate|route|checkpoint] or random[:seed][,count=K]; several separated by ;' },
  'time-limit': { kind: 'string', help: 'checkpoint and stop before this wall time (e.g. 2h, 30m), leaving room for one checkpoint' },
  events: { kind: 'string', help: 'write every event (start, checkpoint, failure, recovery, finish) as JSON lines to this file' },
  json: { kind: 'boolean', help: "print rank 0's result as JSON instead of the program's text" },
  quiet: { kind: 'boolean', help: 'print only the result' },
}

const USAGE = `Usage: molotof run <program.ts|.js> [--ranks N] [framework options] [program options]

Runs a molotof program (a module whose default export is defineProgram({...}))
on N ranks under a supervisor: a rank that dies, throws or hangs is detected,
the survivors are stopped, and all ranks restart from the newest checkpoint.
SIGTERM or SIGINT make the ranks checkpoint and stop (exit code 75); a second
signal stops at once. SIGUSR1 asks for a checkpoint and goes on. TypeScript programs run as they are, without a build.

Framework options:
${formatFlags(RUN_FLAGS)}
  --help                 this help, and the program's own options when a program is named

Exit codes: 0 done, 1 the run failed, 2 bad input, 75 preempted (resume with --resume).

Examples:
  molotof run examples/jacobi/jacobi.ts --ranks 4 --n 1024 --iterations 500
  molotof run examples/jacobi/jacobi.ts --ranks 2 --checkpoint every:50 --inject rank=1,step=120
  molotof run examples/jacobi/jacobi.ts --ranks 2 --transport processes --checkpoint 10s --time-limit 2h
  molotof run examples/jacobi/jacobi.ts --ranks 2 --checkpoint every:50 --resume      # after a crash`

export async function runCommand(argv: readonly string[], out: (s: string) => void, err: (s: string) => void = out): Promise<number> {
  const args = splitArgs(argv, RUN_FLAGS, 1)
  const [program] = args.positional
  if (args.help) {
    out(USAGE)
    if (program) {
      const d = await describe(program)
      out(`\nProgram ${d.name}${d.description ? `: ${d.description}` : ''}\nProgram options:\n${d.optionsHelp || '  (none)'}`)
    }
    return 0
  }
  if (!program) throw new ConfigError('molotof run: name the program file to run (see molotof run --help)')
  const f = args.flags
  const transport = String(f.transport) as Transport
  const ranks = f.ranks as number
  const quiet = f.quiet === true
  const checkpoint = faultTolerance(program, f)
  const { fixed, random } = injections(typeof f.inject === 'string' ? f.inject : undefined)
  const timeLimit = typeof f['time-limit'] === 'string' ? parseDuration(f['time-limit']) : undefined
  if (typeof f['time-limit'] === 'string' && timeLimit === undefined) {
    throw new ConfigError(`--time-limit needs a positive duration such as 2h, 30m or 90s (got "${f['time-limit']}")`)
  }
  const eventsFile = typeof f.events === 'string' ? resolve(f.events) : undefined
  if (eventsFile) writeFileSync(eventsFile, '')

  const view = new ProgressView((s) => process.stderr.write(s), process.stderr.isTTY === true)
  const supervisor = new Supervisor(program, {
    ranks,
    transport,
    argv: args.rest,
    checkpoint,
    inject: fixed,
    injectRandom: random,
    restarts: f.restarts as number,
    heartbeatMs: f.heartbeat as number,
    hangTimeoutMs: typeof f['hang-timeout'] === 'number' ? f['hang-timeout'] : undefined,
    timeLimitMs: timeLimit === undefined ? undefined : timeLimit * 1000,
    onLog: (_rank, text) => {
      if (!quiet) {
        view.clear()
        out(text)
      }
    },
    onCheckpoint: (e) => {
      if (!quiet) view.line(`checkpoint ${e.seq} committed: skeleton ${e.skeleton}, step ${e.step}, ${formatBytes(e.totalBytes)} on ${ranks} rank(s) in ${e.ms.toFixed(0)} ms`)
    },
    onEvent: (e) => {
      if (eventsFile) appendFileSync(eventsFile, JSON.stringify({ time: new Date().toISOString(), ...e }) + '\n')
      if (!quiet) view.event(e)
    },
  })
  const onSignal = (sig: NodeJS.Signals) => {
    if (supervisor.preempt(sig) === 'immediate') view.line(`${sig} again: stopping at once`)
  }
  const onUsr1 = () => {
    view.line('SIGUSR1: checkpoint requested')
    supervisor.requestCheckpoint()
  }
  process.on('SIGTERM', onSignal)
  process.on('SIGINT', onSignal)
  process.on('SIGUSR1', onUsr1)
  try {
    const r = await supervisor.run()
    view.clear()
    if (r.kind === 'preempted') {
      const where = r.seq === undefined ? 'no checkpoint could be taken' : `checkpoint ${r.seq} (skeleton ${r.skeleton}, step ${r.step}) in ${r.checkpointDir}`
      err(`preempted: ${where}.\nResume with: molotof run ${[program, ...argv.filter((a) => a !== program && a !== '--resume')].join(' ')} --resume`)
      return EXIT.preempted
    }
    if (f.json) out(JSON.stringify(r.value, jsonReplacer, 2))
    else out(r.text ?? JSON.stringify(r.value, jsonReplacer, 2))
    if (!quiet && !f.json) {
      const restarts = r.restarts > 0 ? `, ${r.restarts} restart${r.restarts > 1 ? 's' : ''}` : ''
      out(`(${ranks} rank${ranks > 1 ? 's' : ''}, ${transport}, wall ${(r.wallMs / 1000).toFixed(3)} s${restarts})`)
    }
    return EXIT.done
  } finally {
    process.off('SIGTERM', onSignal)
    process.off('SIGINT', onSignal)
    process.off('SIGUSR1', onUsr1)
  }
}

/** Always on under the supervisor: restarts and preemption need somewhere to checkpoint to. */
function faultTolerance(program: string, flags: Record<string, string | number | boolean>): FaultToleranceConfig {
  const policy = parsePolicy(String(flags.checkpoint))
  const keep = flags.keep as number
  if (!Number.isInteger(keep) || keep < 1) throw new ConfigError(`--keep must be a positive integer (got ${keep})`)
  const dir = typeof flags['checkpoint-dir'] === 'string' ? flags['checkpoint-dir'] : join('.molotof', basename(program).replace(/\.[^.]+$/, ''))
  return { dir: resolve(dir), policy, keep, resume: flags.resume === true, async: flags['async-checkpoints'] === true }
}

function injections(text: string | undefined): { fixed: Injection[]; random: RandomInjection | undefined } {
  const fixed: Injection[] = []
  let random: RandomInjection | undefined
  for (const part of (text ?? '').split(';').filter((s) => s.trim() !== '')) {
    const p = parseInjection(part)
    if (p.kind === 'fixed') fixed.push(p.at)
    else if (random) throw new ConfigError('--inject: give random at most once')
    else random = { seed: p.seed, count: p.count }
  }
  return { fixed, random }
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`
  return `${(n / 1024 ** 3).toFixed(2)} GiB`
}

function jsonReplacer(_k: string, v: unknown): unknown {
  if (ArrayBuffer.isView(v)) return `<${v.constructor.name} of ${(v as Float64Array).length}>`
  return v
}
