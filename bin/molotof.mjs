#!/usr/bin/env node
// The molotof command. Runs the built CLI when there is one (installed
// package), otherwise the TypeScript sources through tsx (a fresh clone).
import { existsSync } from 'node:fs'

const built = new URL('../dist/cli.js', import.meta.url)
if (existsSync(built)) {
  await import(built.href)
} else {
  const { tsImport } = await import('tsx/esm/api')
  await tsImport(new URL('../src/cli/bin.ts', import.meta.url).href, import.meta.url)
}
