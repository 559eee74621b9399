import { describe, expect, it } from 'vitest'
import { describe as describeProgram } from '../../../src/runtime/launch/launcher.js'
import { ConfigError, launch, MolotofError, ProgramLoadError, RankFailedError } from '../../../src/index.js'

const quiet = { onLog: () => {} }

describe('launch (threads transport): bad input and failures', () => {
  it('refuses a non-positive rank count before starting anything', async () => {
    await expect(launch('test/fixtures/faulty.ts', { ranks: 0, ...quiet })).rejects.toThrowError(ConfigError)
    await expect(launch('test/fixtures/faulty.ts', { ranks: -2, ...quiet })).rejects.toThrow(/positive integer/)
  })

  it('reports a missing file and a file that does not export a program', async () => {
    await expect(launch('test/fixtures/nope.ts', { ranks: 1, ...quiet })).rejects.toThrow(/program file not found/)
    await expect(launch('test/fixtures/no-program.ts', { ranks: 2, ...quiet })).rejects.toThrowError(ProgramLoadError)
    await expect(launch('test/fixtures/no-program.ts', { ranks: 2, ...quiet })).rejects.toThrow(/does not export a molotof program/)
  })

  it('reports an unknown program option as a configuration error', async () => {
    await expect(launch('test/fixtures/faulty.ts', { ranks: 2, argv: ['--fail-rnak', '1'], ...quiet })).rejects.toThrow(
      /unknown option --fail-rnak.*Did you mean --fail-rank/,
    )
  })

  it('refuses overlapping possessed boxes before any rank computes', async () => {
    const err = await launch('test/fixtures/faulty.ts', { ranks: 3, argv: ['--overlap'], ...quiet }).catch((e) => e)
    expect(err).toBeInstanceOf(MolotofError)
    expect(err.code).toBe('E_PARTITION')
    expect(err.message).toMatch(/possessed boxes of ranks 0 .* and 1 .* overlap/)
    expect(err.message).toMatch(/step 0, phase (start|init|light)/)
  })

  it('a rank that throws ends the run with an error naming rank, skeleton, step and phase', async () => {
    const err = await launch('test/fixtures/faulty.ts', { ranks: 3, argv: ['--fail-rank', '2', '--fail-step', '4'], ...quiet }).catch(
      (e) => e,
    )
    expect(err).toBeInstanceOf(RankFailedError)
    expect(err).toMatchObject({ rank: 2, skeleton: 0, step: 4, phase: 'calculate' })
    expect(err.message).toMatch(/deliberate failure/)
  })

  it('a rank thread that exits abruptly ends the run instead of hanging', async () => {
    const err = await launch('test/fixtures/faulty.ts', { ranks: 2, argv: ['--exit-rank', '1'], ...quiet }).catch((e) => e)
    expect(err).toBeInstanceOf(RankFailedError)
    expect(err.rank).toBe(1)
  })

  it('describes a program for --help', async () => {
    const d = await describeProgram('examples/jacobi/jacobi.ts')
    expect(d.name).toBe('jacobi')
    expect(d.optionsHelp).toMatch(/--iterations <int>/)
  })
})
