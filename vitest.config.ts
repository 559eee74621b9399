import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

export default defineConfig({
  resolve: {
    // Examples import 'molotof' as a user would; in the repo that is the source.
    // molotof/testing first: an alias also matches what starts with its name and a slash.
    alias: [
      { find: 'molotof/testing', replacement: fileURLToPath(new URL('./src/testing.ts', import.meta.url)) },
      { find: /^molotof$/, replacement: fileURLToPath(new URL('./src/index.ts', import.meta.url)) },
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
})
