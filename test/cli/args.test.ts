import { describe, expect, it } from 'vitest'
import { parseProgramCommand } from '../../src/cli/args.js'
import { main } from '../../src/cli/main.js'
import { RUN_OPTIONS } from '../../src/cli/run.js'
import { ConfigError } from '../../src/errors.js'
import { option, parseOptions } from '../../src/skeletons/options.js'

const SWING = 'examples/swing/swing.ts'
const JACOBI = 'examples/jacobi/jacobi.ts'

async function cli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = []
  const err: string[] = []
  const code = await main(argv, (s) => out.push(s), (s) => err.push(s))
  return { code, out: out.join('\n'), err: err.join('\n') }
}

describe('molotof run: where the program and its words are', () => {
  it('a program switch before the program does not swallow it (--no-window examples/swing/swing.ts)', () => {
    const p = parseProgramCommand(RUN_OPTIONS, ['--no-window', SWING, '--ranks', '3'])
    expect(p.program).toBe(SWING)
    expect(p.programArgv).toEqual(['--no-window'])
    expect(p.values.ranks).toBe(3)
  })

  it('a program option with its value before the program keeps the value, in order', () => {
    const p = parseProgramCommand(RUN_OPTIONS, ['--n', '64', JACOBI, '--quiet', '--iterations', '5', '--policy=every:2'])
    expect(p.program).toBe(JACOBI)
    expect(p.programArgv).toEqual(['--n', '64', '--iterations', '5', '--policy=every:2'])
    expect(p.values.quiet).toBe(true)
  })

  it('a framework switch never takes the next word (--resume prog.ts)', () => {
    const p = parseProgramCommand(RUN_OPTIONS, ['--resume', JACOBI, '--json', '--n', '8'])
    expect(p).toMatchObject({ program: JACOBI, programArgv: ['--n', '8'], values: { resume: true, json: true } })
  })

  it('words after -- all go to the program, framework-looking ones included', () => {
    const p = parseProgramCommand(RUN_OPTIONS, [JACOBI, '--ranks', '4', '--', '--ranks', '9'])
    expect(p).toMatchObject({ program: JACOBI, programArgv: ['--ranks', '9'], values: { ranks: 4 } })
  })

  it('a program that does not exist is still named (the launcher reports it), and none at all is undefined', () => {
    expect(parseProgramCommand(RUN_OPTIONS, ['missing.ts', '--n', '3'])).toMatchObject({ program: 'missing.ts', programArgv: ['--n', '3'] })
    expect(parseProgramCommand(RUN_OPTIONS, ['--ranks', '2']).program).toBeUndefined()
  })

  it('framework values are typed and checked: range, choices, a missing value', () => {
    expect(() => parseProgramCommand(RUN_OPTIONS, [JACOBI, '--ranks', '0'])).toThrow(/--ranks must be an integer ≥ 1, got 0/)
    expect(() => parseProgramCommand(RUN_OPTIONS, [JACOBI, '--keep=0'])).toThrow(/--keep must be an integer ≥ 1, got 0/)
    expect(() => parseProgramCommand(RUN_OPTIONS, [JACOBI, '--heartbeat', '5'])).toThrow(/--heartbeat must be an integer ≥ 10, got 5/)
    expect(() => parseProgramCommand(RUN_OPTIONS, [JACOBI, '--transport', 'carrier-pigeon'])).toThrow(/--transport must be one of threads, processes/)
    expect(() => parseProgramCommand(RUN_OPTIONS, [JACOBI, '--ranks'])).toThrowError(ConfigError)
  })
})

describe('one meaning for a boolean, framework or program', () => {
  const program = { json: option.boolean(false, 'a program switch of the same name') }
  it.each([
    [['--json'], true],
    [['--json=true'], true],
    [['--json=1'], true],
    [['--json=false'], false],
    [['--json=0'], false],
    [['--no-json'], false],
  ])('%j gives %s on both sides', (words, value) => {
    expect(parseProgramCommand(RUN_OPTIONS, [JACOBI, ...words]).values.json).toBe(value)
    expect(parseOptions(program, words).json).toBe(value)
  })
})

describe('molotof run, end to end', () => {
  it('runs swing with --no-window before the program; --json=1 prints the JSON value', async () => {
    const r = await cli('run', '--no-window', SWING, '--preset', 'small-g', '--ranks', '1', '--json=1')
    expect(r.code, r.err).toBe(0)
    expect(JSON.parse(r.out)).toMatchObject({ preset: 'small-g' })
  })

  it('--json=0 prints the program text', async () => {
    const r = await cli('run', JACOBI, '--ranks', '1', '--n', '8', '--iterations', '2', '--quiet', '--json=0')
    expect(r.code, r.err).toBe(0)
    expect(r.out).toMatch(/^jacobi n=8 iterations=2/)
  })

  it('a bad program value is refused by the same parser, exit 2, naming flag, value and range', async () => {
    const r = await cli('run', JACOBI, '--ranks', '1', '--n', '0')
    expect(r.code).toBe(2)
    expect(r.err).toMatch(/--n must be an integer ≥ 1, got 0/)
  })

  it('a misspelt option of a command without a program is refused with a suggestion', async () => {
    const r = await cli('inspect', '.', '--verfy')
    expect(r.code).toBe(2)
    expect(r.err).toMatch(/unknown option --verfy\. Did you mean --verify\?/)
    const d = await cli('demo', '--rnaks', '2')
    expect(d.code).toBe(2)
    expect(d.err).toMatch(/Did you mean --ranks\?/)
  })
})
