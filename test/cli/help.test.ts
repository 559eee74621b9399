import { describe, expect, it } from 'vitest'
import { main } from '../../src/cli/main.js'

async function help(...argv: string[]): Promise<string> {
  const out: string[] = []
  const code = await main(argv, (s) => out.push(s), (s) => out.push(s))
  expect(code).toBe(0)
  return out.join('\n')
}

/** Section titles: a capitalised line of words that ends with a colon, or the Usage line. */
function sections(text: string): string[] {
  return text
    .split('\n')
    .filter((l) => /^[A-Z][A-Za-z ]*:$/.test(l) || l.startsWith('Usage: '))
    .map((l) => (l.startsWith('Usage: ') ? 'Usage' : l.slice(0, -1)))
}

/** The option line whose first word is `flag` (or `-h, --help`-style with `flag` second). */
function optionLine(text: string, flag: string): string {
  const lines = text.split('\n').filter((l) => l.startsWith('  ') && l.trim().replace(/^-\w, /, '').split(/\s/)[0] === flag)
  expect(lines, `${flag} appears once`).toHaveLength(1)
  return lines[0]
}

function exitCodes(text: string): number[] {
  const block = text.split('Exit codes:\n')[1]?.split('\n\n')[0] ?? ''
  return block.split('\n').map((l) => Number(l.trim().split(/\s/)[0]))
}

describe('help pages', () => {
  it('molotof --help: commands, options and the exit codes, each section once', async () => {
    const text = await help('--help')
    expect(sections(text)).toEqual(['Usage', 'Commands', 'Options', 'Exit codes'])
    for (const cmd of ['run', 'inspect', 'bench', 'demo']) expect(text).toMatch(new RegExp(`^ {2}${cmd} `, 'm'))
    expect(exitCodes(text)).toEqual([0, 1, 2, 75, 76])
    expect(await help('help')).toBe(text)
  })

  it('molotof run --help: every section once, true types, defaults only where there is one', async () => {
    const text = await help('run', '--help')
    expect(sections(text)).toEqual(['Usage', 'Options', 'Exit codes', 'Examples'])
    expect(optionLine(text, '--ranks')).toMatch(/<int>.*\[≥ 1; default: 2\]$/)
    expect(optionLine(text, '--transport')).toMatch(/<threads\|processes\|tcp>.*\[default: threads\]$/)
    expect(optionLine(text, '--keep')).toMatch(/<int>.*\[≥ 1; default: 2\]$/)
    expect(optionLine(text, '--checkpoint-dir')).toMatch(/<string>/)
    expect(optionLine(text, '--checkpoint-dir')).not.toMatch(/\[default/)
    expect(optionLine(text, '--hang-timeout')).toMatch(/<int>.*\[≥ 1\]$/)
    expect(optionLine(text, '--json')).not.toMatch(/<|\[default/)
    expect(optionLine(text, '--help')).toMatch(/^ {2}-h, --help /)
    expect(text).not.toMatch(/---|\[default: \]/)
    expect(exitCodes(text)).toEqual([0, 1, 2, 75, 76])
    expect(text).toMatch(/^ {2}75 +preempted.*--resume$/m)
    expect(text).toMatch(/^ {2}76 +node lost.*--resume$/m)
    expect(await help('help', 'run')).toBe(text)
  })

  it('molotof run --help <program>: the run options and the program options, each once', async () => {
    const text = await help('run', '--help', 'examples/swing/swing.ts')
    expect(sections(text)).toEqual(['Usage', 'Options', 'Program options', 'Exit codes', 'Examples'])
    const program = text.split('Program options:\n')[1].split('\n\nExit codes:')[0]
    expect(program).toMatch(/^ {2}swing: Gas storage valuation/)
    // swing's N and T: one dash pair, their true types, no made-up default.
    expect(optionLine(program, '--n')).toMatch(/<int>\s+number of decision dates \[≥ 1\]$/)
    expect(optionLine(program, '--t')).toMatch(/<number>\s+horizon in years/)
    expect(optionLine(program, '--t')).not.toMatch(/default/)
    expect(optionLine(program, '--n-grid')).toMatch(/<int>.*\[≥ 1\]$/)
    expect(optionLine(program, '--inj-rate')).toMatch(/<number>.*\[≥ 0\]$/)
    expect(optionLine(program, '--model')).toMatch(/<g\|nig\|g2d>/)
    expect(optionLine(program, '--preset')).toMatch(/<choice>.*\[one of stopt-tree, .*; default: stopt-tree\]$/)
    expect(optionLine(program, '--[no-]window')).toMatch(/\[default: true\]$/)
    expect(program).not.toMatch(/<string>.*\[default|---|\[default: \]/)
    // The run options are listed once, before.
    expect(optionLine(text.split('Program options:')[0], '--ranks')).toMatch(/<int>/)
  })

  it('molotof run --help jacobi: the --n line says <int>, its range and default 2048', async () => {
    const text = await help('run', 'examples/jacobi/jacobi.ts', '-h')
    const program = text.split('Program options:\n')[1]
    expect(optionLine(program, '--n')).toMatch(/^ {2}--n <int>\s+interior size \(n×n cells\) \[≥ 1; default: 2048\]$/)
    expect(optionLine(program, '--iterations')).toMatch(/<int>.*\[≥ 0; default: 200\]$/)
    expect(optionLine(program, '--policy')).not.toMatch(/\[default/)
  })

  it('molotof inspect --help and bench --help: their options and exit codes, each section once', async () => {
    const inspect = await help('inspect', '--help')
    expect(sections(inspect)).toEqual(['Usage', 'Options', 'Exit codes', 'Examples'])
    expect(optionLine(inspect, '--verify')).not.toMatch(/</)
    expect(exitCodes(inspect)).toEqual([0, 1, 2])
    const bench = await help('bench', '--help')
    expect(sections(bench)).toEqual(['Usage', 'Options', 'Exit codes', 'Examples'])
    expect(optionLine(bench, '--repeats')).toMatch(/<int>.*\[≥ 1; default: 3\]$/)
    expect(optionLine(bench, '--transport')).toMatch(/\[default: processes\]$/)
    expect(optionLine(bench, '--no-failure')).not.toMatch(/default/)
    expect(exitCodes(bench)).toEqual([0, 1, 2])
    expect(sections(await help('demo', '--help'))).toEqual(['Usage', 'Options', 'Exit codes'])
  })
})
