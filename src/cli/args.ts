import { ConfigError } from '../errors.js'

/** A framework flag of a command: its value kind and help line. */
export interface FlagSpec {
  kind: 'int' | 'string' | 'boolean'
  help: string
  default?: string | number | boolean
}

export interface SplitArgs {
  positional: string[]
  flags: Record<string, string | number | boolean>
  /** Words not recognised as framework flags, passed on to the program. */
  rest: string[]
  help: boolean
}

/**
 * Split a command line into the command's own flags and the rest (which the
 * program parses). Framework flags may stand anywhere; `--` ends them.
 */
export function splitArgs(argv: readonly string[], specs: Record<string, FlagSpec>, maxPositional: number): SplitArgs {
  const out: SplitArgs = { positional: [], flags: {}, rest: [], help: false }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--') {
      out.rest.push(...argv.slice(i + 1))
      break
    }
    if (a === '--help' || a === '-h') {
      out.help = true
      continue
    }
    if (!a.startsWith('-')) {
      if (out.positional.length < maxPositional) out.positional.push(a)
      else out.rest.push(a)
      continue
    }
    const eq = a.indexOf('=')
    const name = (eq >= 0 ? a.slice(0, eq) : a).replace(/^--?/, '')
    const spec = specs[name]
    if (!spec) {
      out.rest.push(a)
      // Keep a program option's value with it.
      if (eq < 0 && i + 1 < argv.length && !argv[i + 1].startsWith('--')) out.rest.push(argv[++i])
      continue
    }
    if (spec.kind === 'boolean') {
      out.flags[name] = eq >= 0 ? a.slice(eq + 1) !== 'false' : true
      continue
    }
    const raw = eq >= 0 ? a.slice(eq + 1) : argv[++i]
    if (raw === undefined) throw new ConfigError(`--${name} needs a value (${spec.help})`)
    if (spec.kind === 'int') {
      const v = Number(raw)
      if (!Number.isInteger(v)) throw new ConfigError(`--${name} needs an integer, got "${raw}"`)
      out.flags[name] = v
    } else out.flags[name] = raw
  }
  for (const [k, s] of Object.entries(specs)) if (!(k in out.flags) && s.default !== undefined) out.flags[k] = s.default
  return out
}

export function formatFlags(specs: Record<string, FlagSpec>): string {
  const rows = Object.entries(specs).map(([k, s]) => [
    `  --${k}${s.kind === 'boolean' ? '' : ` <${s.kind === 'int' ? 'n' : 'value'}>`}`,
    `${s.help}${s.default !== undefined ? ` [default: ${String(s.default)}]` : ''}`,
  ])
  const w = Math.max(...rows.map((r) => r[0].length)) + 2
  return rows.map(([a, b]) => a.padEnd(w) + b).join('\n')
}
