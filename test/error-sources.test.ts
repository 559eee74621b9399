import { readdirSync, readFileSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'

// What the sources of src/ do with errors: every error thrown on purpose is a
// class of the catalogue (src/errors.ts), and an error dropped on purpose says
// why that is safe, in a comment on the line or just above it.

const SRC = resolve(__dirname, '../src')

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name)
    if (e.isDirectory()) return sources(p)
    return /\.(ts|mjs)$/.test(e.name) ? [p] : []
  })
}

/** Every line of src/ matching `re`, as `file:line: text`, with the two lines above it and the line below. */
function linesMatching(re: RegExp): Array<{ at: string; line: string; above: string; below: string }> {
  const found: Array<{ at: string; line: string; above: string; below: string }> = []
  for (const file of sources(SRC)) {
    const lines = readFileSync(file, 'utf8').split('\n')
    lines.forEach((line, i) => {
      if (re.test(line) && !/^\s*(\*|\/\/)/.test(line)) {
        found.push({ at: `${relative(SRC, file)}:${i + 1}`, line: line.trim(), above: lines.slice(Math.max(0, i - 2), i).join('\n'), below: lines[i + 1] ?? '' })
      }
    })
  }
  return found
}

/** Where src/ makes a plain Error on purpose, and why it is not a catalogue class. */
const PLAIN_ERRORS: Record<string, string> = {
  // An fs-shaped error (errno code EIO) that its caller wraps in a CheckpointError like any other write failure.
  'checkpoint/store/durable.ts': "new Error('write made no progress')",
  // A thrown non-Error value made an Error, to report its message from a rank or warm spare process (reportUncaught).
  'runtime/boot/boot-heartbeat.mjs': 'new Error(String(e))',
  // parsePolicy's validators' reason, caught and rethrown as a ConfigError with the input and the accepted forms.
  'checkpoint/policy/policy.ts': 'class Invalid extends Error',
  // The memory level's I/O thread reports a file-system error as data; it is rebuilt fs-shaped (its code kept) and wrapped in a CheckpointError by the store.
  'checkpoint/store/io-thread.ts': 'new Error(m.error.message)',
}

describe('errors in the sources', () => {
  it('throws only catalogue classes: no bare Error, RangeError or TypeError, no error class outside src/errors.ts', () => {
    const plain = linesMatching(/new (Error|RangeError|TypeError|SyntaxError)\(|extends Error\b/)
      .filter((f) => !f.at.startsWith('errors.ts:'))
      .filter((f) => !Object.entries(PLAIN_ERRORS).some(([file, text]) => f.at.startsWith(`${file}:`) && f.line.includes(text)))
    expect(plain.map((f) => `${f.at}: ${f.line}`)).toEqual([])
  })

  it('says why where it drops an error (catch without a binding, .catch(() => …))', () => {
    const silent = linesMatching(/catch \{|\.catch\(\(\) =>/).filter((f) => {
      // The comment may stand on the line, on the line above, or open the catch block.
      if (f.line.includes('//') || /^\s*\/\//.test(f.above.split('\n').pop() ?? '')) return false
      return !(f.line.endsWith('{') && /^\s*\/\//.test(f.below))
    })
    expect(silent.map((f) => `${f.at}: ${f.line}`)).toEqual([])
  })
})
