#!/usr/bin/env node
// The molotof command. Runs the built CLI when there is one (installed
// package), otherwise the TypeScript sources through tsx (a fresh clone).

// Stop signals are held from the first line: loading the CLI takes up to a
// second, and a batch system's or a terminal's SIGTERM/SIGINT in that time
// would end the process as killed (143/130) instead of letting `molotof run`
// checkpoint and stop (75). The CLI takes them over (src/cli/stop-signals.ts).
const held = []
const hold = (signal) => held.push(signal)
process.on('SIGINT', hold)
process.on('SIGTERM', hold)
globalThis[Symbol.for('molotof.early-stop-signals')] = {
  // The parent at the start: a wrapper that dies while the CLI loads is noticed too (src/cli/wrapper-watch.ts).
  parent: process.ppid,
  release: () => {
    process.off('SIGINT', hold)
    process.off('SIGTERM', hold)
    return held
  },
}

const { existsSync } = await import('node:fs')
const built = new URL('../dist/cli.js', import.meta.url)
if (existsSync(built)) {
  await import(built.href)
} else {
  const { tsImport } = await import('tsx/esm/api')
  await tsImport(new URL('../src/cli/bin.ts', import.meta.url).href, import.meta.url)
}
