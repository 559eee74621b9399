import { spawn } from 'node:child_process'
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { ConfigError } from '../../../src/errors.js'
import { clusterSecret, rankEnvironment, sharedSecretFile } from '../../../src/runtime/cluster/secret.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-secret-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
let dirs = 0
const fresh = () => join(root, `d${dirs++}`)

describe('the secret of a cluster run', () => {
  it('MOLOTOF_SECRET first, then the file in --shared-dir; a short one refused', () => {
    const dir = fresh()
    expect(clusterSecret({ MOLOTOF_SECRET: 'sixteen chars ok' }, 2, dir, false)).toEqual({ key: Buffer.from('sixteen chars ok'), source: '$MOLOTOF_SECRET' })
    expect(() => clusterSecret({ MOLOTOF_SECRET: 'too short' }, 1, dir, true)).toThrow(ConfigError)
    expect(() => clusterSecret({ MOLOTOF_SECRET: 'too short' }, 1, dir, true)).toThrow(/\$MOLOTOF_SECRET is 9 bytes long: a secret needs 16 or more/)
    const fromFile = clusterSecret({ MOLOTOF_SECRET: '' }, 2, dir, false)
    expect(fromFile?.source).toBe(join(dir, 'molotof-secret'))
    expect(fromFile?.key.equals(Buffer.from(readFileSync(join(dir, 'molotof-secret'), 'utf8').trim()))).toBe(true)
  })

  it('none: refused, naming the three ways; undefined with --insecure-cluster', () => {
    expect(() => clusterSecret({}, 2, undefined, false)).toThrow(/a cluster run needs a secret shared by its nodes.*MOLOTOF_SECRET.*mpirun -x MOLOTOF_SECRET.*--shared-dir DIR.*--insecure-cluster/)
    expect(clusterSecret({}, 2, undefined, true)).toBeUndefined()
  })

  it('a run of one node draws its own: its ranks are the only ones to know it', () => {
    const a = clusterSecret({}, 1, undefined, false)
    const b = clusterSecret({}, 1, undefined, false)
    expect(a?.key.length).toBe(32)
    expect(a?.key.equals(b!.key)).toBe(false)
  })

  it('the shared file is made once, mode 0600, 64 hex digits, and read as it is afterwards', () => {
    const dir = fresh()
    const first = sharedSecretFile(dir)
    const file = join(dir, 'molotof-secret')
    expect(statSync(file).mode & 0o777).toBe(0o600)
    expect(first.toString()).toMatch(/^[0-9a-f]{64}$/)
    expect(sharedSecretFile(dir).equals(first)).toBe(true)
    expect(readdirSync(dir)).toEqual(['molotof-secret']) // no candidate left behind
  })

  it('a secret file others may read is refused, and so is a short one', () => {
    const dir = fresh()
    sharedSecretFile(dir)
    const file = join(dir, 'molotof-secret')
    chmodSync(file, 0o644)
    expect(() => sharedSecretFile(dir)).toThrow(new RegExp(`the secret file ${file} may be read or written by others \\(mode 0644\\): chmod 600`))
    writeFileSync(file, 'abc\n', { mode: 0o600 })
    chmodSync(file, 0o600)
    expect(() => sharedSecretFile(dir)).toThrow(/holds 3 bytes: a secret needs 16 or more/)
  })

  it('nodes starting at once all read the one secret that won', async () => {
    const dir = fresh()
    const script = `import('./src/runtime/cluster/secret.ts').then((m) => process.stdout.write(m.sharedSecretFile(${JSON.stringify(dir)}).toString()))`
    const outs = await Promise.all(
      Array.from({ length: 5 }, () => {
        const child = spawn(process.execPath, ['--import', 'tsx', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
        let out = ''
        child.stdout.on('data', (b: Buffer) => (out += b.toString()))
        return new Promise<string>((resolve) => child.on('close', () => resolve(out)))
      }),
    )
    expect(outs[0]).toMatch(/^[0-9a-f]{64}$/)
    for (const o of outs) expect(o).toBe(outs[0])
    expect(readdirSync(dir)).toEqual(['molotof-secret'])
  })

  it("a rank's environment carries the key in hex, never the launcher's secret", () => {
    const env = rankEnvironment(Buffer.from([1, 2, 255]), { PATH: '/bin', MOLOTOF_SECRET: 'launcher secret', MOLOTOF_RANK_KEY: 'stale' })
    expect(env).toEqual({ PATH: '/bin', MOLOTOF_RANK_KEY: '0102ff' })
    expect(rankEnvironment(undefined, { PATH: '/bin', MOLOTOF_SECRET: 's' })).toEqual({ PATH: '/bin' })
  })
})
