import type { MessagePort } from 'node:worker_threads'
import { MolotofError } from '../errors.js'
import { formatOptions, parseOptions, type OptionSpecs, type OptionValues } from '../skeletons/options.js'
import type { Program } from '../skeletons/program.js'
import type { FaultToleranceConfig } from '../checkpoint/service.js'
import { runSession } from './rank-session.js'
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
  ft: FaultToleranceConfig | undefined
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
  try {
    const value = await runSession({
      program,
      comm,
      status,
      options,
      ft: init.ft,
      log: (text) => control.postMessage({ type: 'log', rank, text }),
      onCheckpoint: (e) => control.postMessage({ type: 'checkpoint', rank, ...e }),
    })
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
