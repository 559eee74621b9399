import { copyFileSync, mkdirSync, readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { defineConfig } from 'tsup'

// dist/ unless told otherwise: the build test builds elsewhere, so that running
// the tests never leaves a dist/ that bin/molotof.mjs would prefer to newer sources.
const outDir = process.env.MOLOTOF_BUILD_DIR ?? 'dist'

/**
 * Ranks start from the plain-JS files of src/runtime/boot/, which must sit in
 * boot/ beside the bundles: src/runtime/boot-files.ts, bundled into them, finds
 * them there, and they find the bundles one folder up. The checkpoint I/O
 * thread starts from src/checkpoint/store/io-worker/, found the same way by
 * io-thread.ts: io-worker/ beside the bundles.
 */
function copyBootFiles(): void {
  for (const [from, to] of [
    ['src/runtime/boot', 'boot'],
    ['src/checkpoint/store/io-worker', 'io-worker'],
  ]) {
    mkdirSync(`${outDir}/${to}`, { recursive: true })
    for (const f of readdirSync(from)) if (f.endsWith('.mjs')) copyFileSync(`${from}/${f}`, `${outDir}/${to}/${f}`)
  }
}

/**
 * Chart.js's browser bundle as a string constant of the CLI bundle (the HTML
 * report of `molotof bench` inlines it): chart.js is needed to build the
 * package, not to run it, so it is a devDependency.
 */
const chartJs = readFileSync(join(dirname(createRequire(import.meta.url).resolve('chart.js')), 'chart.umd.min.js'), 'utf8')

export default defineConfig([
  {
    // molotof/testing is a second entry; shared code sits in chunks both load (in
    // CJS too), so an error thrown by one is an instance of the other's class.
    entry: { index: 'src/index.ts', testing: 'src/testing.ts' },
    outDir,
    format: ['esm', 'cjs'],
    splitting: true,
    dts: true,
    sourcemap: true,
    clean: true,
    target: 'node20',
    // Error classes name themselves after their class (`new.target.name`): esbuild would rename some (`_CommunicationError`).
    keepNames: true,
    shims: true,
    onSuccess: async () => copyBootFiles(),
  },
  {
    entry: { cli: 'src/cli/bin.ts' },
    outDir,
    format: ['esm'],
    sourcemap: true,
    target: 'node20',
    // Error classes name themselves after their class (`new.target.name`): esbuild would rename some (`_CommunicationError`).
    keepNames: true,
    define: { __MOLOTOF_CHART_JS__: JSON.stringify(chartJs) },
    onSuccess: async () => copyBootFiles(),
  },
])
