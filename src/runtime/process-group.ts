import type { StartRankGroup } from './group.js'

/** Placeholder: the processes transport is being written. */
export const startProcessGroup: StartRankGroup = () => {
  throw new Error('the processes transport is not available yet')
}
