import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { FRAMEWORK_TAGS } from '../../src/routing/tags.js'

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => (d.isDirectory() ? sources(join(dir, d.name)) : d.name.endsWith('.ts') ? [join(dir, d.name)] : []))
}

describe('framework message tags', () => {
  it('are distinct, below the collectives’ range, and written nowhere else as literals', () => {
    const values = Object.values(FRAMEWORK_TAGS)
    expect(new Set(values).size).toBe(values.length)
    // The collectives use -1 … -0x3fffffff (runtime/collectives.ts).
    for (const v of values) expect(v).toBeLessThan(-0x3fffffff)
    const literal = /-0x7ff[0-9a-f]{5}/i
    const elsewhere = sources('src').filter((f) => !f.endsWith(join('routing', 'tags.ts')) && literal.test(readFileSync(f, 'utf8')))
    expect(elsewhere).toEqual([])
  })
})
