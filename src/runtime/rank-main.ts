import type { MessagePort } from 'node:worker_threads'
import { MolotofError } from '../errors.js'
import { RankContext } from '../skeletons/context.js'
import { formatOptions, parseOptions, type OptionSpecs, type OptionValues } from '../skeletons/options.js'
import type { Program } from '../skeletons/program.js'
import { noHooks, type RankRuntime } from '../skeletons/runtime.js'
import type { ControlPort } from './protocol.js'
import { PHASES, RankStatus, readStatus } from './status.js'
import { ThreadCommunicator } from './threads.js'

/** What the launcher hands to each rank thread. */
export interface RankInit {
  mode: 'run' | 'describe'
  rank: number
  size: number
  argv: string[]
  ports: Array<MessagePort | undefined>
  status: Int32Array
  control: ControlPort
}

/** Run `program` as one rank; every outcome is reported on the control port. */
export async function runRank(program: Program, init: RankInit): Promise<void> {
  const { control, rank } = init
  if (init.mode === 'describe') {
    control.postMessage({
      type: 'describe',
      name: program.name,
      description: program.description ?? '',
      optionsHelp: formatOptions(program.options),
    })
    return
  }
  let options: OptionValues<OptionSpecs>
  try {
    options = parseOptions(program.options, init.argv)
  } catch (e) {
    control.postMessage({ type: 'config-error', rank, message: (e as Error).message })
    return
  }
  const comm = new ThreadCommunicator(rank, init.size, init.ports)
  const status = new RankStatus(init.status, rank)
  const rt: RankRuntime = { comm, status, hooks: noHooks }
  const ctx = new RankContext(rt, options, false, (text) => control.postMessage({ type: 'log', rank, text }))
  try {
    status.set(-1, -1, 'light')
    const value = await program.main(ctx)
    status.phase('done')
    const text = rank === 0 && program.format ? program.format(value, options) : undefined
    control.postMessage({ type: 'result', rank, value, text })
  } catch (e) {
    const err = e instanceof Error ? e : new Error(String(e))
    const where = readStatus(init.status, rank)
    control.postMessage({
      type: 'error',
      rank,
      skeleton: where.skeleton,
      step: where.step,
      phase: PHASES.includes(where.phase) ? where.phase : 'light',
      name: err.name,
      code: err instanceof MolotofError ? err.code : undefined,
      message: err.message,
      stack: err.stack,
    })
  } finally {
    comm.close()
  }
}
