import { copyFileSync } from 'node:fs'
import { defineConfig } from 'tsup'

// dist/ unless told otherwise: the build test builds elsewhere, so that running
// the tests never leaves a dist/ that bin/molotof.mjs would prefer to newer sources.
const outDir = process.env.MOLOTOF_BUILD_DIR ?? 'dist'

/** Ranks start from these plain-JS files, which must sit next to the bundles. */
function copyBootFiles(): void {
  for (const f of ['rank-boot.mjs', 'process-boot.mjs', 'load-program.mjs', 'resolve-molotof.mjs']) copyFileSync(`src/runtime/${f}`, `${outDir}/${f}`)
}

export default defineConfig([
  {
    entry: { index: 'src/index.ts' },
    outDir,
    format: ['esm', 'cjs'],
    dts: true,
    sourcemap: true,
    clean: true,
    target: 'node20',
    shims: true,
    onSuccess: async () => copyBootFiles(),
  },
  {
    entry: { cli: 'src/cli/bin.ts' },
    outDir,
    format: ['esm'],
    sourcemap: true,
    target: 'node20',
    onSuccess: async () => copyBootFiles(),
  },
])
