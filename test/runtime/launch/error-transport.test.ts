// A catalogue error thrown in a rank reaches the launcher as the same class
// with its fields, over both transports (threads: structured clone; processes:
// IPC with v8 serialization).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { launch, MolotofError, PartitionError, RunInterruptedError, SettingsMismatchError } from '../../../src/index.js'
import type { Transport } from '../../../src/runtime/group.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-error-transport-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

describe.each<Transport>(['threads', 'processes'])('errors thrown in a rank keep their class (%s)', (transport) => {
  const quiet = { onLog: () => {}, transport }

  it('SettingsMismatchError, with every difference, when resuming with other settings', async () => {
    const dir = join(root, transport)
    const checkpoint = { dir, policy: { every: 2 }, keep: 2, resume: false }
    await launch('examples/jacobi/jacobi.ts', { ranks: 2, argv: ['--n', '8', '--iterations', '6'], checkpoint, ...quiet })
    const err = await launch('examples/jacobi/jacobi.ts', {
      ranks: 2,
      argv: ['--n', '10', '--iterations', '6'],
      checkpoint: { ...checkpoint, resume: true },
      ...quiet,
    }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(SettingsMismatchError)
    expect((err as SettingsMismatchError).code).toBe('E_SETTINGS')
    expect((err as SettingsMismatchError).differences).toEqual([{ name: 'n', old: 8, new: 10 }])
    expect((err as SettingsMismatchError).exit).toBe('bad-input')
  })

  it('PartitionError, with where the rank found it', async () => {
    const err = await launch('test/fixtures/faulty.ts', { ranks: 3, argv: ['--overlap'], ...quiet }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(PartitionError)
    expect((err as Error).message).toMatch(/possessed boxes of ranks 0 .* and 1 .* overlap[\s\S]*skeleton 0, step 0/)
  })

  it('RunInterruptedError, with its skeleton and step', async () => {
    const checkpoint = { dir: join(root, `${transport}-interrupt`), policy: { every: 1 }, keep: 2, resume: false, interrupt: { skeleton: 0, step: 3 } }
    const err = await launch('test/fixtures/faulty.ts', { ranks: 2, checkpoint, ...quiet }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(RunInterruptedError)
    expect(err).toBeInstanceOf(MolotofError)
    expect(err).toMatchObject({ code: 'E_INTERRUPTED', skeleton: 0, step: 3 })
  })
})
