// Entry of the `molotof` command.
import { main } from './main.js'

// A closed pipe (`molotof ... | head`) is not an error.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0)
  throw e
})

const code = await main(process.argv.slice(2))
process.exitCode = code
// The outcome is decided (the result printed, or the run stopped): a signal
// arriving while the process winds down ends it with that outcome, not as
// killed by the signal.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(code))
