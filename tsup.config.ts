import { copyFileSync } from 'node:fs'
import { defineConfig } from 'tsup'

/** Ranks start from these plain-JS files, which must sit next to the bundles. */
function copyBootFiles(): void {
  for (const f of ['rank-boot.mjs', 'process-boot.mjs', 'load-program.mjs']) copyFileSync(`src/runtime/${f}`, `dist/${f}`)
}

export default defineConfig([
  {
    entry: { index: 'src/index.ts' },
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
    format: ['esm'],
    sourcemap: true,
    target: 'node20',
    onSuccess: async () => copyBootFiles(),
  },
])
