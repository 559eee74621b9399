import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

// The files that start real cluster jobs (mpirun with 3–5 node supervisors, each with its rank processes) and time
// a node's loss against --node-timeout: they load every core and run one at a time, after the others, so that no
// other test's processes slow their detection bounds, nor theirs another test's.
const CLUSTER_JOBS = [
  'test/runtime/cluster/mpirun.test.ts',
  'test/runtime/cluster/mpirun-incremental.test.ts',
  'test/runtime/cluster/netns.test.ts',
  'test/runtime/cluster/spare-nodes.test.ts',
  'test/runtime/cluster/spare-nodes-swing.test.ts',
  'test/runtime/cluster/spare-nodes-swing-silent.test.ts',
  'test/runtime/cluster/takeover.test.ts',
  'test/runtime/cluster/xor-mpirun.test.ts',
  'test/runtime/cluster/xor-spare.test.ts',
  'test/cli/inspect-membership.test.ts',
  'test/bench/node-loss.test.ts',
]

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
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two files at a time (vitest's default is one fewer than the cores: one on this 2-core machine), though many
    // of them mostly wait on child processes, timers and the disk.
    maxWorkers: 2,
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/**/*.test.ts'], exclude: CLUSTER_JOBS } },
      // maxWorkers 1: vitest runs this project's files one by one once the parallel ones are done.
      { extends: true, test: { name: 'cluster', include: CLUSTER_JOBS, maxWorkers: 1 } },
    ],
  },
})
