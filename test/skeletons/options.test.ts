import { describe, expect, it } from 'vitest'
import { ConfigError, formatOptions, option, parseOptions } from '../../src/index.js'

const specs = {
  n: option.int(16, 'size', { min: 1 }),
  tol: option.number(1e-6, 'tolerance'),
  model: option.choice(['g', 'nig'] as const, 'g', 'price model'),
  verbose: option.boolean(false, 'talk more'),
  maxIter: option.int(10, 'iteration cap'),
}

describe('program options', () => {
  it('parses every form and keeps defaults', () => {
    const v = parseOptions(specs, ['--n', '32', '--tol=1e-3', '--model', 'nig', '--verbose', '--max-iter', '5'])
    expect(v).toEqual({ n: 32, tol: 1e-3, model: 'nig', verbose: true, maxIter: 5 })
    expect(parseOptions(specs, ['--no-verbose'])).toMatchObject({ verbose: false, n: 16 })
  })
  it('rejects bad values with a message naming the option', () => {
    expect(() => parseOptions(specs, ['--n', '0'])).toThrow(/--n must be ≥ 1/)
    expect(() => parseOptions(specs, ['--n', '2.5'])).toThrow(/--n needs an integer/)
    expect(() => parseOptions(specs, ['--model', 'x'])).toThrow(/one of g, nig/)
    expect(() => parseOptions(specs, ['--n'])).toThrow(/--n needs a value/)
    expect(() => parseOptions(specs, ['--nn', '3'])).toThrowError(ConfigError)
    expect(() => parseOptions(specs, ['--modle', 'g'])).toThrow(/Did you mean --model\?/)
  })
  it('formats help with defaults', () => {
    expect(formatOptions(specs)).toMatch(/--max-iter <int>\s+iteration cap \[default: 10\]/)
  })
})
