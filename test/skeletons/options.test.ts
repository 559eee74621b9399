import fc from 'fast-check'
import { describe, expect, expectTypeOf, it } from 'vitest'
import { ConfigError } from '../../src/errors.js'
import { flagOf, formatOptions, notSetting, option, parseArgv, parseOptions, settingsOf } from '../../src/skeletons/options.js'

const specs = {
  n: option.int(16, 'size', { min: 1 }),
  tol: option.number(1e-6, 'tolerance'),
  share: option.number(0.5, 'fraction', { min: 0, max: 1 }),
  shift: option.int(0, 'offset'),
  model: option.choice(['g', 'nig'] as const, 'g', 'price model'),
  verbose: option.boolean(false, 'talk more'),
  window: option.boolean(true, 'windowed grid'),
  maxIter: option.int(10, 'iteration cap'),
  sigma: option.number(undefined, 'volatility'),
  label: notSetting(option.string(undefined, 'a name for the output')),
}

const line = (text: string, flag: string) => text.split('\n').find((l) => l.trimStart().split(/\s/)[0] === flag) ?? ''

describe('program options: values', () => {
  it('parses every form, keeps defaults, and leaves an option without default undefined', () => {
    const v = parseOptions(specs, ['--n', '32', '--tol=1e-3', '--model', 'nig', '--verbose', '--max-iter', '5', '--shift', '-3'])
    expect(v).toEqual({ n: 32, tol: 1e-3, share: 0.5, shift: -3, model: 'nig', verbose: true, window: true, maxIter: 5, sigma: undefined, label: undefined })
    expect(parseOptions(specs, ['--sigma', '0.25', '--label', 'run a'])).toMatchObject({ sigma: 0.25, label: 'run a', n: 16 })
  })

  it('types the values from the declarations', () => {
    const v = parseOptions(specs, [])
    expectTypeOf(v.n).toEqualTypeOf<number>()
    expectTypeOf(v.sigma).toEqualTypeOf<number | undefined>()
    expectTypeOf(v.model).toEqualTypeOf<'g' | 'nig'>()
    expectTypeOf(v.window).toEqualTypeOf<boolean>()
    expectTypeOf(v.label).toEqualTypeOf<string | undefined>()
  })

  it.each([
    [['--verbose'], true],
    [['--verbose=true'], true],
    [['--verbose=1'], true],
    [['--no-verbose'], false],
    [['--verbose=false'], false],
    [['--verbose=0'], false],
    [['--verbose', '--no-verbose'], false],
    [['--no-verbose', '--verbose=1'], true],
  ])('boolean %j gives %s', (argv, value) => {
    expect(parseOptions(specs, argv).verbose).toBe(value)
    // The same words on an option whose default is the other way.
    expect(parseOptions(specs, argv.map((w) => w.replace('verbose', 'window'))).window).toBe(value)
  })

  it('a boolean never takes the next word: it stays a positional (or is refused, with the = form suggested)', () => {
    expect(parseArgv(specs, ['--verbose', 'prog.ts'], { unknown: 'pass' })).toMatchObject({ values: { verbose: true }, rest: ['prog.ts'] })
    expect(parseArgv(specs, ['--no-window', 'prog.ts'], { unknown: 'pass' })).toMatchObject({ values: { window: false }, rest: ['prog.ts'] })
    expect(parseArgv(specs, ['--verbose', 'dir'], { positionals: 1 })).toMatchObject({ values: { verbose: true }, positionals: ['dir'] })
    expect(() => parseOptions(specs, ['--verbose', 'false'])).toThrow(/--verbose is a switch and takes no separate value; write --verbose=false/)
    expect(() => parseOptions(specs, ['--verbose=yes'])).toThrow(/--verbose is a switch: .*got "yes"/)
    expect(() => parseOptions(specs, ['--no-verbose=1'])).toThrow(/--no-verbose takes no value/)
  })

  it('refuses a number out of range naming the flag, the value and the range', () => {
    const cases: [string[], RegExp][] = [
      [['--n', '0'], /--n must be an integer ≥ 1, got 0/],
      [['--n=-4'], /--n must be an integer ≥ 1, got -4/],
      [['--share', '1.5'], /--share must be a number from 0 to 1, got 1.5/],
      [['--share=-0.1'], /--share must be a number from 0 to 1, got -0.1/],
      [['--n', '2.5'], /--n: "2.5" is not an integer \(--n takes an integer ≥ 1\)/],
      [['--n', 'many'], /--n: "many" is not a number/],
      [['--n='], /--n: "" is not a number/],
      [['--tol', 'Infinity'], /--tol: "Infinity" is not a number/],
      [['--max-iter', '1e400'], /--max-iter: "1e400" is not a number/],
      [['--model', 'x'], /--model must be one of g, nig; got "x"/],
      [['--n'], /--n needs a value \(size\)/],
      [['--n', '--tol', '3'], /--n needs a value/],
    ]
    for (const [argv, message] of cases) {
      const e = (() => {
        try {
          parseOptions(specs, argv)
        } catch (err) {
          return err
        }
      })()
      expect(e, argv.join(' ')).toBeInstanceOf(ConfigError)
      expect((e as Error).message, argv.join(' ')).toMatch(message)
    }
  })

  it('accepts exactly the integers of the range, in both the spaced and the = form', () => {
    const ranged = { k: option.int(3, 'k', { min: -5, max: 40 }) }
    fc.assert(
      fc.property(fc.integer({ min: -100, max: 100 }), (k) => {
        const inRange = k >= -5 && k <= 40
        for (const argv of [['--k', String(k)], [`--k=${k}`]]) {
          if (inRange) expect(parseOptions(ranged, argv).k).toBe(k)
          else expect(() => parseOptions(ranged, argv)).toThrow(`--k must be an integer from -5 to 40, got ${k}`)
        }
      }),
    )
  })

  it('suggests the closest option for a misspelt one', () => {
    expect(() => parseOptions(specs, ['--modle', 'g'])).toThrow(/unknown option --modle\. Did you mean --model\?/)
    expect(() => parseOptions(specs, ['--max-itre', '3'])).toThrow(/Did you mean --max-iter\?/)
    expect(() => parseOptions(specs, ['--nn', '3'])).toThrowError(ConfigError)
    const far = (() => {
      try {
        parseOptions(specs, ['--completely-different'])
      } catch (e) {
        return (e as Error).message
      }
    })()
    expect(far).toMatch(/^unknown option --completely-different\. Known options: --n --tol/)
    expect(far).not.toMatch(/Did you mean/)
  })

  it('refuses words that are not options, and words after -- are positionals', () => {
    expect(() => parseOptions(specs, ['stray'])).toThrow(/unexpected argument "stray"/)
    expect(parseArgv(specs, ['--n', '2', '--', '--n'], { positionals: 1 })).toMatchObject({ values: { n: 2 }, positionals: ['--n'] })
    expect(() => parseArgv(specs, ['a', 'b'], { positionals: 1 })).toThrow(/unexpected argument "b"/)
  })

  it('in pass mode returns every other word in order, and the words after -- apart', () => {
    const p = parseArgv(specs, ['--x', '1', '--n', '4', 'prog.ts', '-y', '--z=2', '--', '--n', '9'], { unknown: 'pass' })
    expect(p.values.n).toBe(4)
    expect(p.rest).toEqual(['--x', '1', 'prog.ts', '-y', '--z=2'])
    expect(p.afterDashes).toEqual(['--n', '9'])
  })

  it('refuses declarations it cannot honour: two keys with one flag, a default outside its range', () => {
    expect(() => parseOptions({ n: option.int(1, 'a'), N: option.int(1, 'b') }, [])).toThrow(/options "n" and "N" both read --n/)
    expect(() => parseOptions({ n: option.int(0, 'size', { min: 1 }) }, [])).toThrow(/the default of --n does not fit .*≥ 1, got 0/)
    expect(() => parseOptions({ m: option.choice(['a', 'b'] as const, 'c' as 'a', 'm') }, [])).toThrow(/the default of --m/)
  })

  it('stores settings as plain JSON: an option left out is null, a non-setting is absent', () => {
    const values = parseOptions(specs, ['--label', 'x'])
    const s = settingsOf(specs, values)
    expect(s.sigma).toBeNull()
    expect(s.n).toBe(16)
    expect('label' in s).toBe(false)
  })
})

describe('flag names', () => {
  it.each([
    ['n', '--n'],
    ['N', '--n'],
    ['T', '--t'],
    ['maxIter', '--max-iter'],
    ['nigDxFactor', '--nig-dx-factor'],
    ['a2', '--a2'],
    ['sigma2', '--sigma2'],
    ['v0', '--v0'],
    ['cInj', '--c-inj'],
    ['URLPath', '--url-path'],
  ])('%s reads %s', (key, flag) => {
    expect(flagOf(key)).toBe(flag)
  })
})

describe('formatOptions (the one option table)', () => {
  const text = formatOptions(specs)

  it('has one line per option, each flag once, none with three dashes', () => {
    const lines = text.split('\n')
    expect(lines).toHaveLength(Object.keys(specs).length)
    for (const key of Object.keys(specs)) {
      const flag = flagOf(key)
      expect(lines.filter((l) => l.includes(` ${flag} `) || l.includes(`--[no-]${flag.slice(2)} `)).length, flag).toBe(1)
    }
    expect(text).not.toMatch(/---/)
  })

  it('shows the true type, the range and the default when there is one', () => {
    expect(line(text, '--n')).toMatch(/^ {2}--n <int>\s+size \[≥ 1; default: 16\]$/)
    expect(line(text, '--share')).toMatch(/<number>\s+fraction \[from 0 to 1; default: 0\.5\]$/)
    expect(line(text, '--max-iter')).toMatch(/<int>\s+iteration cap \[default: 10\]$/)
    expect(line(text, '--model')).toMatch(/--model <g\|nig>\s+price model \[default: g\]$/)
    expect(line(text, '--sigma')).toMatch(/--sigma <number>\s+volatility$/)
    expect(line(text, '--label')).toMatch(/--label <string>\s+a name for the output$/)
    // A switch off by default has no default to state; one on by default shows how to turn it off.
    expect(line(text, '--verbose')).toMatch(/--verbose\s+talk more$/)
    expect(line(text, '--[no-]window')).toMatch(/windowed grid \[default: true\]$/)
    expect(text).not.toMatch(/\[default: \]/)
  })

  it('spells a long list of choices out in the help column', () => {
    const many = { preset: option.choice(['stopt-tree', 'daily-g', 'daily-nig', 'weekly-g2d'] as const, 'daily-g', 'preset') }
    expect(formatOptions(many)).toMatch(/--preset <choice>\s+preset \[one of stopt-tree, daily-g, daily-nig, weekly-g2d; default: daily-g\]/)
    expect(formatOptions({})).toBe('  (none)')
  })
})
