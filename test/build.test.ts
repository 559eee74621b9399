import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

describe('package build (tsup)', () => {
  it('builds ESM, CJS and type declarations that load, with the rank boot files next to them', () => {
    execFileSync(process.execPath, ['node_modules/tsup/dist/cli-default.js'], { stdio: 'pipe' })
    for (const f of ['index.js', 'index.cjs', 'index.d.ts', 'index.d.cts', 'cli.js', 'rank-boot.mjs', 'process-boot.mjs', 'load-program.mjs']) {
      expect(existsSync(`dist/${f}`), f).toBe(true)
    }
    const cjs = execFileSync(process.execPath, ['-e', "const m = require('./dist/index.cjs'); console.log(typeof m.defineProgram, typeof m.Supervisor)"]).toString()
    expect(cjs.trim()).toBe('function function')
    const esm = execFileSync(process.execPath, ['--input-type=module', '-e', "const m = await import('./dist/index.js'); console.log(typeof m.launch, typeof m.Domain2D)"]).toString()
    expect(esm.trim()).toBe('function function')
    const version = execFileSync(process.execPath, ['dist/cli.js', '--version']).toString().trim()
    expect(version).toMatch(/^\d+\.\d+\.\d+$/)
  }, 120_000)
})
