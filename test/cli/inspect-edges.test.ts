// `molotof inspect` at the edges a new user met: a `{node}` template that
// matches one directory, folders that are not molotof's (named with their
// directory), and the membership a cluster checkpoint was written under.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { CheckpointStore } from '../../src/checkpoint/store/checkpoint-store.js'
import { encodeMarker, parseMarker } from '../../src/checkpoint/store/marker.js'
import { main } from '../../src/cli/main.js'
import { FINGERPRINT, SETTINGS, tempDir, writeCheckpoint } from '../checkpoint/helpers.js'

let root: string
beforeEach(async () => {
  root = await tempDir('inspect-edges')
})
afterEach(async () => {
  await rm(root, { recursive: true, force: true })
})

async function inspect(...args: string[]): Promise<{ code: number; text: string; err: string }> {
  const lines: string[] = []
  const errs: string[] = []
  const code = await main(['inspect', ...args], (s) => lines.push(s), (s) => errs.push(s))
  return { code, text: lines.join('\n'), err: errs.join('\n') }
}

describe('molotof inspect: a {node} template', () => {
  it('matching one directory (the others lost with their nodes): that one is inspected, not "does not exist"', async () => {
    const only = join(root, 'ckpt-1')
    const store = new CheckpointStore(only)
    await writeCheckpoint(store, 0, { size: 1 })
    const { code, text, err } = await inspect(join(root, 'ckpt-{node}'))
    expect(err).toBe('')
    expect(code).toBe(0)
    expect(text).toContain(`checkpoints in ${only} (disk level)`)
    expect(text).toMatch(/#0 {2}valid/)
  })

  it('matching several: each rank file where it is, a rank no directory holds named; each memory level the --memory-dir template matches listed', async () => {
    // Rank 0's file in ckpt-0, rank 1's nowhere (its node's directory is gone): the checkpoint is not whole.
    await writeCheckpoint(new CheckpointStore(join(root, 'ckpt-0')), 0, { size: 2 })
    await rm(join(root, 'ckpt-0', 'ckpt-00000000', 'rank-1.mlf'))
    mkdirSync(join(root, 'ckpt-2'))
    // A memory level node 1 left behind (the default one is /dev/shm/molotof-<hash>-{node}: the same listing).
    await writeCheckpoint(new CheckpointStore(join(root, 'mem-1'), { volatile: true }), 0, { size: 2 })
    const { code, text } = await inspect(join(root, 'ckpt-{node}'), '--memory-dir', join(root, 'mem-{node}'))
    expect(code).toBe(1)
    expect(text).toContain(`checkpoints in ${join(root, 'ckpt-0')}, ${join(root, 'ckpt-2')} (disk level)`)
    expect(text).toMatch(/no directory holds the file of rank 1/)
    expect(text).toContain(`checkpoints in ${join(root, 'mem-1')} (memory level)`)
  })
})

describe("molotof inspect: folders that are not molotof's", () => {
  it('are named with their directory, one directory and several', async () => {
    const dir = join(root, 'ckpt-0')
    await writeCheckpoint(new CheckpointStore(dir), 0, { size: 1 })
    const planted = join(dir, 'ckpt-00000099')
    mkdirSync(planted)
    writeFileSync(join(planted, 'notes.txt'), 'mine')
    const one = await inspect(dir)
    expect(one.text).toContain(`#99  not molotof's: ${planted} (`)
    const many = await inspect(join(root, 'ckpt-{node}'))
    expect(many.text).toContain(`#99  not molotof's: ${planted} (`)
    expect(readFileSync(join(planted, 'notes.txt'), 'utf8')).toBe('mine')
  })
})

describe('molotof inspect: the membership of a cluster checkpoint', () => {
  const membership = { epoch: 1, nodes: [0, 3, 2], ranksPerNode: 2, spares: [4] }

  it('the commit marker keeps it (a damaged one is refused), inspect names it; none for a one-host checkpoint', async () => {
    const dir = join(root, 'ckpt')
    const store = new CheckpointStore(dir)
    await writeCheckpoint(store, 0, { size: 1 })
    // Checkpoint 1 as a cluster run commits it: its marker records the membership.
    await writeCheckpoint(store, 1, { size: 6, commit: false })
    const ranks = Array.from({ length: 6 }, (_, rank) => ({ rank, file: `rank-${rank}.mlf`, bytes: 0, headerChecksum: 0 }))
    const marker = { seq: 1, skeleton: 0, step: 10, size: 6, fingerprint: FINGERPRINT, settings: SETTINGS, ranks, createdAt: new Date().toISOString(), membership }
    expect(parseMarker(encodeMarker(marker), 'COMMIT').membership).toEqual(membership)
    // A record that is not one, under a checksum that matches it: refused for what it is.
    const { checksum: _old, ...body } = JSON.parse(new TextDecoder().decode(encodeMarker(marker))) as Record<string, unknown>
    const bad = { ...body, membership: { epoch: 1, nodes: 'all' } }
    const reencoded = new TextEncoder().encode(JSON.stringify({ ...bad, checksum: crc32(JSON.stringify(bad)) >>> 0 }))
    expect(() => parseMarker(reencoded, 'COMMIT')).toThrow(/membership is not a membership record/)
    writeFileSync(join(store.pathOf(1), 'COMMIT'), encodeMarker(marker))
    const { text } = await inspect(dir)
    const lines = text.split('\n')
    const at = lines.findIndex((l) => /^ {2}#1 /.test(l))
    expect(lines.slice(at + 1).join('\n')).toContain('written under membership epoch 1: node 0 ranks 0–1, node 3 ranks 2–3, node 2 ranks 4–5; spare nodes: 4')
    expect(text.split(/\n {2}#1 /)[0]).not.toMatch(/membership/)
    const json = JSON.parse((await inspect(dir, '--json')).text) as { checkpoints: { seq: number; membership?: unknown }[] }
    expect(json.checkpoints.map((c) => c.membership)).toEqual([undefined, membership])
  })
})
