import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, rmSync } from 'node:fs'
import { afterAll, describe, expect, it } from 'vitest'

// Built inside node_modules (so the bundles resolve their dependencies) but not
// in dist/: a dist/ left by the tests would be run by bin/molotof.mjs instead of
// the sources a developer edits next.
const out = 'node_modules/.cache/molotof-build-test'
afterAll(() => rmSync(out, { recursive: true, force: true }))

describe('package build (tsup)', () => {
  it('builds ESM, CJS and type declarations that load, with the rank boot files next to them', () => {
    execFileSync(process.execPath, ['node_modules/tsup/dist/cli-default.js'], { stdio: 'pipe', env: { ...process.env, MOLOTOF_BUILD_DIR: out } })
    for (const f of ['index.js', 'index.cjs', 'index.d.ts', 'index.d.cts', 'cli.js', 'rank-boot.mjs', 'process-boot.mjs', 'load-program.mjs', 'resolve-molotof.mjs', 'spare-boot.mjs', 'spare-thread-boot.mjs', 'spare-host.mjs']) {
      expect(existsSync(`${out}/${f}`), f).toBe(true)
    }
    const cjs = execFileSync(process.execPath, ['-e', `const m = require('./${out}/index.cjs'); console.log(typeof m.defineProgram, typeof m.Supervisor)`]).toString()
    expect(cjs.trim()).toBe('function function')
    const esm = execFileSync(process.execPath, ['--input-type=module', '-e', `const m = await import('./${out}/index.js'); console.log(typeof m.launch, typeof m.Domain2D)`]).toString()
    expect(esm.trim()).toBe('function function')
    const version = execFileSync(process.execPath, [`${out}/cli.js`, '--version']).toString().trim()
    expect(version).toMatch(/^\d+\.\d+\.\d+$/)
    // The HTML report's Chart.js travels inside the CLI bundle: chart.js is a devDependency.
    expect(readFileSync(`${out}/cli.js`, 'utf8')).toContain('Chart.js v4.')
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> }
    expect(Object.keys(pkg.dependencies)).not.toContain('chart.js')
  }, 120_000)
})
