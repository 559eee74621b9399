import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { interiorSum, jacobiSerial } from '../examples/jacobi/serial.js'

// Built inside node_modules (so the bundles resolve their dependencies) but not
// in dist/: a dist/ left by the tests would be run by bin/molotof.mjs instead of
// the sources a developer edits next.
const out = 'node_modules/.cache/molotof-build-test'
const work = mkdtempSync(join(tmpdir(), 'molotof-build-run-'))
afterAll(() => {
  rmSync(out, { recursive: true, force: true })
  rmSync(work, { recursive: true, force: true })
})

describe('package build (tsup)', () => {
  it('builds ESM, CJS and type declarations that load, with the rank boot files in boot/ beside them', () => {
    execFileSync(process.execPath, ['node_modules/tsup/dist/cli-default.js'], { stdio: 'pipe', env: { ...process.env, MOLOTOF_BUILD_DIR: out } })
    for (const f of ['index.js', 'index.cjs', 'index.d.ts', 'index.d.cts', 'cli.js']) expect(existsSync(`${out}/${f}`), f).toBe(true)
    for (const f of ['rank-boot.mjs', 'process-boot.mjs', 'load-program.mjs', 'resolve-molotof.mjs', 'spare-boot.mjs', 'spare-thread-boot.mjs', 'spare-host.mjs', 'boot-heartbeat.mjs', 'heartbeat-thread.mjs', 'status-layout.mjs', 'source-locations.mjs']) {
      expect(existsSync(`${out}/boot/${f}`), f).toBe(true)
    }
    // The checkpoint I/O thread's module files, beside the bundles that start it.
    for (const f of ['thread.mjs', 'runs.mjs']) expect(existsSync(`${out}/io-worker/${f}`), f).toBe(true)
    const cjs = execFileSync(process.execPath, ['-e', `const m = require('./${out}/index.cjs'); console.log(typeof m.defineProgram, typeof m.Supervisor)`]).toString()
    expect(cjs.trim()).toBe('function function')
    // Errors say their class's real name, not the bundler's (`_CommunicationError`), in both formats.
    const names = `for (const [k, v] of Object.entries(m)) if (typeof v === 'function' && v.prototype instanceof Error && v.name !== k) console.log(k, v.name); console.log(new m.CommunicationError('x').name)`
    expect(execFileSync(process.execPath, ['-e', `const m = require('./${out}/index.cjs'); ${names}`]).toString().trim()).toBe('CommunicationError')
    expect(execFileSync(process.execPath, ['--input-type=module', '-e', `const m = await import('./${out}/index.js'); ${names}`]).toString().trim()).toBe('CommunicationError')
    const esm = execFileSync(process.execPath, ['--input-type=module', '-e', `const m = await import('./${out}/index.js'); console.log(typeof m.launch, typeof m.Domain2D)`]).toString()
    expect(esm.trim()).toBe('function function')
    const version = execFileSync(process.execPath, [`${out}/cli.js`, '--version']).toString().trim()
    expect(version).toMatch(/^\d+\.\d+\.\d+$/)
    // The HTML report's Chart.js travels inside the CLI bundle: chart.js is a devDependency.
    expect(readFileSync(`${out}/cli.js`, 'utf8')).toContain('Chart.js v4.')
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> }
    expect(Object.keys(pkg.dependencies)).not.toContain('chart.js')
  }, 120_000)

  it('resolves molotof/testing through the package exports in ESM and CJS, sharing the error classes of molotof', () => {
    // An installed copy: the package.json as shipped, its dist/ the bundles built above.
    const installed = join(work, 'node_modules/molotof')
    mkdirSync(installed, { recursive: true })
    copyFileSync('package.json', join(installed, 'package.json'))
    symlinkSync(resolve(out), join(installed, 'dist'))
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { exports: Record<string, { import: Record<string, string>; require: Record<string, string> }> }
    for (const f of [...Object.values(pkg.exports['./testing'].import), ...Object.values(pkg.exports['./testing'].require)]) expect(existsSync(join(installed, f)), f).toBe(true)
    // A bad injection is refused with molotof's own ConfigError (one class, not a copy per entry).
    const check = `let e; try { t.parseInjection('rank=x') } catch (err) { e = err } console.log(typeof t.parseInjection, t.parseInjection('rank=1,step=4').at.step, e instanceof m.ConfigError, 'parseInjection' in m)`
    const cjs = execFileSync(process.execPath, ['-e', `const t = require('molotof/testing'); const m = require('molotof'); ${check}`], { cwd: work }).toString()
    expect(cjs.trim()).toBe('function 4 true false')
    const esm = execFileSync(process.execPath, ['--input-type=module', '-e', `const t = await import('molotof/testing'); const m = await import('molotof'); ${check}`], { cwd: work }).toString()
    expect(esm.trim()).toBe('function 4 true false')
  }, 60_000)

  it('writes memory checkpoints through the I/O thread started from io-worker/ beside the bundles', () => {
    const events = join(work, 'memory-events.jsonl')
    const args = [`${out}/cli.js`, 'run', 'examples/jacobi/jacobi.ts', '--ranks', '2', '--transport', 'processes', '--n', '64', '--iterations', '20']
    const text = execFileSync(process.execPath, [...args, '--memory-checkpoint', 'every:5', '--events', events, '--quiet'], { encoding: 'utf8' })
    expect(text).toContain(`checksum ${interiorSum(jacobiSerial(64, 20), 64)}`)
    const checkpoints = readFileSync(events, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { event: string; level?: string; step?: number }).filter((e) => e.event === 'checkpoint')
    expect(checkpoints.map((e) => [e.level, e.step])).toEqual([['memory', 4], ['memory', 9], ['memory', 14], ['memory', 19]])
  }, 60_000)

  it('runs a program compiled once at run start, through a failure and its recovery, with the serial result', () => {
    const events = join(work, 'events.jsonl')
    const args = [`${out}/cli.js`, 'run', 'examples/jacobi/jacobi.ts', '--ranks', '2', '--transport', 'processes', '--n', '64', '--iterations', '120']
    const ft = ['--checkpoint', 'every:40', '--checkpoint-dir', join(work, 'ckpt'), '--inject', 'rank=1,step=70', '--events', events, '--quiet']
    const text = execFileSync(process.execPath, [...args, ...ft], { encoding: 'utf8' })
    expect(text).toContain(`checksum ${interiorSum(jacobiSerial(64, 120), 64)}`)
    const starts = readFileSync(events, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { event: string; compiled?: string }).filter((e) => e.event === 'start')
    // Both attempts, the restarted one included, load the one module compiled at run start.
    expect(starts).toHaveLength(2)
    expect(starts[0].compiled).toMatch(new RegExp(`^${resolve('node_modules/.cache/molotof/programs')}/[0-9a-f]{16}\\.mjs$`))
    expect(existsSync(starts[0].compiled!)).toBe(true)
    expect(starts[1].compiled).toBe(starts[0].compiled)
    // Told not to compile: the ranks load the sources through tsx, with the same result.
    rmSync(events)
    const plain = execFileSync(process.execPath, [...args, ...ft.slice(0, 3), join(work, 'ckpt2'), '--events', events, '--quiet'], { encoding: 'utf8', env: { ...process.env, MOLOTOF_PRECOMPILE: '0' } })
    expect(plain).toContain(`checksum ${interiorSum(jacobiSerial(64, 120), 64)}`)
    expect(readFileSync(events, 'utf8')).not.toContain('"compiled"')
    expect(readFileSync(events, 'utf8')).toContain('"loadedFromSources":"MOLOTOF_PRECOMPILE=0"')
  }, 120_000)
})
