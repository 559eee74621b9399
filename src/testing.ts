/**
 * Testing helpers of molotof (`molotof/testing`): failure injection, for tests
 * and demonstrations of recovery. A run takes the points through the `inject`
 * and `injectRandom` options of `launch` and `Supervisor`; programs never need
 * these names, so they stay out of the main entry.
 *
 * ```ts
 * import { parseInjection, type Injection } from 'molotof/testing'
 * const parsed = parseInjection('rank=1,step=40')
 * const at: Injection[] = parsed.kind === 'fixed' ? [parsed.at] : []
 * ```
 *
 * @module
 */
export { parseInjection, type Injection, type RandomInjection } from './runtime/inject.js'
