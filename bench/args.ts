/**
 * A benchmark's command line: `--help` (or `-h`) prints `usage` and exits 0;
 * an unknown or malformed option prints parseArgs' message and `usage` and
 * exits 2, instead of a stack trace.
 *
 * ```ts
 * const { values } = benchArgs('npm run bench:x -- [--n 2048]', () => parseArgs({ options: { n: { type: 'string', default: '2048' } } }))
 * ```
 */
export function benchArgs<T>(usage: string, parse: () => T): T {
  if (process.argv.slice(2).some((a) => a === '--help' || a === '-h')) {
    console.log(usage)
    process.exit(0)
  }
  try {
    return parse()
  } catch (e) {
    console.error(`${(e as Error).message}\n\nusage: ${usage}`)
    process.exit(2)
  }
}
