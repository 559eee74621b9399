import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, parse } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { findUp } from '../../src/util/find-up.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-find-up-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

describe('findUp', () => {
  it('gives the nearest folder that answers, from the start folder upwards', () => {
    const deep = join(root, 'a', 'b', 'c')
    mkdirSync(deep, { recursive: true })
    writeFileSync(join(root, 'marker'), '')
    writeFileSync(join(root, 'a', 'b', 'marker'), '')
    const seen: string[] = []
    const at = findUp(deep, (dir) => {
      seen.push(dir)
      return dir.endsWith(join('a', 'b')) || dir === root ? dir : undefined
    })
    expect(at).toBe(join(root, 'a', 'b'))
    expect(seen).toEqual([deep, join(root, 'a', 'b')])
  })

  it('asks every folder up to the root, the root included, and gives undefined when none answers', () => {
    const seen: string[] = []
    expect(findUp(join(root, 'a'), (dir) => void seen.push(dir))).toBeUndefined()
    expect(seen[0]).toBe(join(root, 'a'))
    expect(seen.at(-1)).toBe(parse(root).root)
    expect(new Set(seen).size).toBe(seen.length)
  })

  it('passes on an answer that is falsy but defined (false, 0, empty text)', () => {
    expect(findUp(root, () => false)).toBe(false)
    expect(findUp(root, () => 0)).toBe(0)
  })
})
