// Entry of the `molotof` command.
import { main } from './main.js'

// A closed pipe (`molotof ... | head`) is not an error.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0)
  throw e
})

process.exitCode = await main(process.argv.slice(2))
