import { installRankEntry } from '../../skeletons/program.js'
import type { RankInit } from './rank-main.js'

// Loaded for its effect by src/index.ts: gives programs declared with this copy
// of molotof the way to run as a rank. The transports (rank-main and the
// communicators it builds) load only when a rank actually starts, not when a
// program is declared or run in one thread with runLocal.
installRankEntry(async (program, init) => {
  const { runRank } = await import('./rank-main.js')
  return runRank(program, init as RankInit)
})
