// CommonJS entry of molotof running from its TypeScript sources, for a program
// outside an ESM package (no "type": "module" above it: tsx loads it, and the
// framework it requires, as CommonJS). rank-entry.ts loads the rank runtime
// with a dynamic import(), which from CommonJS goes to Node's ESM loader and
// would load a second, ESM copy of the framework; here it is required instead,
// so the program, its kernels and domains, and the runtime are one copy.
// (The built package needs no shim: dist/index.cjs bundles the runtime.)
const molotof = require('../../index.ts')
const { installRankEntry } = require('../../skeletons/program.ts')

installRankEntry(async (program, init) => require('../rank/rank-main.ts').runRank(program, init))
module.exports = molotof
