/**
 * Gas storage valuation by dynamic programming (the FT-GReLoSSS "Swing"
 * application), model and scheme as in examples/swing/README.md.
 *
 *   molotof run examples/swing/swing.ts --ranks 2 --preset daily-g
 *   molotof run examples/swing/swing.ts --ranks 2 --preset stopt-tree --n-grid 100
 */
import { defineProgram, notSetting, option, type OptionSpec } from 'molotof'
import { SwingDomain } from './domain.js'
import { Swing } from './kernel.js'
import { createBellmanContext } from './model/bellman.js'
import { buildLattice } from './model/models.js'
import { driftOf, PARAM_NAMES, PRESETS, resolveParams, v0Level, type SwingParams } from './model/params.js'
import { intrinsicValue } from './model/serial.js'

export interface SwingResult {
  preset: string
  params: SwingParams
  /** V_0(root, v0). */
  value: number
  intrinsic: number
  /** Light set-up (lattice), backward induction, and the whole rank run, in seconds. */
  latticeSeconds: number
  dpSeconds: number
}

// Every model parameter can be overridden; one left out keeps the preset's value
// (the presets leave drift to the model: ou for g and g2d, lattice for nig).
// Ranges here are the plain bounds; validateParams checks the rest (positive
// reals, v0 on the grid, |beta| < alpha…) and names the parameter.
const paramOptions = {
  model: option.choice(['g', 'nig', 'g2d'] as const, undefined, 'price model'),
  N: option.int(undefined, 'number of decision dates', { min: 1 }),
  T: option.number(undefined, 'horizon in years (> 0)'),
  subSteps: option.int(undefined, 'trinomial sub-steps per date (g, g2d)', { min: 1 }),
  a: option.number(undefined, 'mean reversion of the (first) factor (> 0)'),
  sigma: option.number(undefined, 'volatility of the (first) factor (> 0)'),
  a2: option.number(undefined, 'mean reversion of the second factor (g2d; > 0)'),
  sigma2: option.number(undefined, 'volatility of the second factor (g2d; > 0)'),
  drift: option.choice(['ou', 'lattice'] as const, undefined, 'drift correction c_k: ou (closed form; g, g2d) or lattice (log E[e^X_k] on the lattice; nig always)'),
  curve: option.choice(['stopt', 'seasonal', 'flat'] as const, undefined, 'forward curve'),
  base: option.number(undefined, 'curve base level'),
  amp: option.number(undefined, 'seasonal curve amplitude'),
  vmin: option.number(undefined, 'minimum volume'),
  vmax: option.number(undefined, 'maximum volume (> vmin)'),
  nGrid: option.int(undefined, 'volume grid steps', { min: 1 }),
  v0: option.number(undefined, 'initial volume (a grid point)'),
  injRate: option.number(undefined, 'maximum injection per date', { min: 0 }),
  wdRate: option.number(undefined, 'maximum withdrawal per date', { min: 0 }),
  cInj: option.number(undefined, 'cost per unit injected', { min: 0 }),
  cWd: option.number(undefined, 'cost per unit withdrawn', { min: 0 }),
  rates: option.choice(['const', 'seasonal'] as const, undefined, 'rate profile'),
  control: option.choice(['bang', 'grid'] as const, undefined, 'control set'),
  nigAlpha: option.number(undefined, 'NIG alpha (> 0)'),
  nigBeta: option.number(undefined, 'NIG beta (|beta| < alpha)'),
  nigDxFactor: option.number(undefined, 'NIG grid step in units of the innovation std. dev. (> 0)'),
  nigWidth: option.number(undefined, 'NIG grid half-width in stationary std. devs (> 0)'),
  nigQuad: option.int(undefined, 'Simpson sub-intervals per NIG cell (even)', { min: 2 }),
} satisfies Record<keyof SwingParams, OptionSpec>

const presetNames = Object.keys(PRESETS) as [string, ...string[]]

export default defineProgram({
  name: 'swing',
  description: 'Gas storage valuation by dynamic programming on a price lattice (g, nig, g2d models).',
  options: {
    preset: option.choice(presetNames, 'stopt-tree', 'parameter preset; the options below override its values'),
    ...paramOptions,
    window: option.boolean(true, 'compute only the volumes reachable from v0 (--no-window: the full grid)'),
    minimal: notSetting(option.boolean(true, 'minimal checkpoints: only the value function just computed')),
    policy: notSetting(option.string(undefined, "this skeleton's checkpoint policy (default: the run's --checkpoint)")),
  },
  async main(ctx): Promise<SwingResult> {
    const o = ctx.options
    const params = resolveParams(o.preset, overridesFrom(o))
    // Light initialisation: the price lattice, rebuilt by replay, never checkpointed.
    const t0 = performance.now()
    const lattice = buildLattice(params)
    const bellman = createBellmanContext(params, lattice)
    const t1 = performance.now()

    const domains = [new SwingDomain(params, lattice, o.window), new SwingDomain(params, lattice, o.window)] as const
    const sk = ctx.skeleton(new Swing(bellman), domains, o.policy ? { checkpoint: o.policy } : {})
    if (o.minimal) sk.checkpoint.unregister('write')
    sk.checkpoint.watch('params', params)
    const v = await sk.run()
    const t2 = performance.now()

    // V_0 lives on the rank owning v0's level at date 0, root node 0.
    const g = v0Level(params)
    const mine = v.possessedBox.containsPoint([g, 0]) ? v.at(g, 0) : null
    const value = (await ctx.allgather(mine)).find((x) => x !== null)
    if (value === undefined || value === null) throw new Error('no rank holds V_0 at v0')
    return {
      preset: o.preset,
      params,
      value,
      intrinsic: ctx.rank === 0 ? intrinsicValue(params) : NaN,
      latticeSeconds: (t1 - t0) / 1000,
      dpSeconds: (t2 - t1) / 1000,
    }
  },
  // A parameter left out takes the preset's value: checkpoints store the values used, so that giving
  // the preset's own value (--model g with a g preset) is not another setting at --resume.
  settings: (o) => {
    const params = resolveParams(o.preset, overridesFrom(o))
    return { ...params, drift: driftOf(params) }
  },
  format: (r) =>
    [
      `swing ${r.preset}: model ${r.params.model}, N=${r.params.N}, nGrid=${r.params.nGrid}, control ${r.params.control}` +
        (r.params.drift === undefined ? '' : `, drift ${r.params.drift}`),
      `value      ${r.value.toPrecision(15)}`,
      `intrinsic  ${r.intrinsic.toPrecision(15)}`,
      `lattice    ${r.latticeSeconds.toFixed(3)} s`,
      `dp         ${r.dpSeconds.toFixed(3)} s`,
    ].join('\n'),
})

/** The parameters given on the command line (the others keep the preset's values). */
function overridesFrom(o: { readonly [K in keyof SwingParams]?: SwingParams[K] }): Partial<SwingParams> {
  const out: Partial<Record<keyof SwingParams, unknown>> = {}
  for (const name of PARAM_NAMES) if (o[name] !== undefined) out[name] = o[name]
  return out as Partial<SwingParams>
}
