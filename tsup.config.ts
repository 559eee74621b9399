import { copyFileSync } from 'node:fs'
import { defineConfig } from 'tsup'

export default defineConfig([
  {
    entry: { index: 'src/index.ts' },
    format: ['esm', 'cjs'],
    dts: true,
    sourcemap: true,
    clean: true,
    target: 'node20',
    shims: true,
    // The rank threads start from this plain-JS file, next to the bundles.
    onSuccess: async () => copyFileSync('src/runtime/rank-boot.mjs', 'dist/rank-boot.mjs'),
  },
  {
    entry: { cli: 'src/cli/bin.ts' },
    format: ['esm'],
    sourcemap: true,
    target: 'node20',
    onSuccess: async () => copyFileSync('src/runtime/rank-boot.mjs', 'dist/rank-boot.mjs'),
  },
])
