// Entry of the `molotof` command.
import { main } from './main.js'
import { holdStopSignal, STOP_SIGNALS, takeEarlySignals, type StopSignal } from './stop-signals.js'

// A closed pipe (`molotof ... | head`) is not an error.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0)
  throw e
})
// Progress and log lines to a reader that is gone (a launcher killed outright: see watchLauncher) are lost, and the
// run goes on to stop with a checkpoint.
process.stderr.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code !== 'EPIPE') throw e
})

// Once the outcome is decided (the result printed, or the run stopped), a
// signal arriving while the process winds down ends it with that outcome, not
// as killed by the signal. Listening from the start leaves no moment without a
// listener between a command's own handlers (run: checkpoint and stop) and
// this one. `molotof run` takes a signal that came before its handlers were
// in place (while it loaded, or set the run up) as soon as they are; a signal
// no other command handles ends the process as it would without it.
const argv = process.argv.slice(2)
const isRun = argv[0] === 'run' && !argv.includes('--help') && !argv.includes('-h')
let outcome: number | undefined
const onStopSignal = (signal: StopSignal) => {
  if (outcome !== undefined) process.exit(outcome)
  if (process.listenerCount(signal) > 1) return
  if (isRun) return holdStopSignal(signal)
  for (const s of STOP_SIGNALS) process.off(s, onStopSignal)
  process.kill(process.pid, signal)
}
for (const s of STOP_SIGNALS) process.on(s, onStopSignal)
for (const s of takeEarlySignals()) onStopSignal(s)

outcome = await main(argv)
process.exitCode = outcome
// Then leave at once, once what was written is flushed: while Node winds down
// by itself (closing handles, stopping loader threads) its signal handlers are
// gone, and a signal would still end the process as killed.
const flushed = (stream: NodeJS.WriteStream) => new Promise<void>((resolve) => stream.write('', () => resolve()))
await Promise.all([flushed(process.stdout), flushed(process.stderr)])
process.exit(outcome)
