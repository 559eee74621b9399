/**
 * Gas storage valuation by dynamic programming (the FT-GReLoSSS "Swing"
 * application), model and scheme as in examples/swing/README.md.
 *
 *   molotof run examples/swing/swing.ts --ranks 2 --preset daily-g
 *   molotof run examples/swing/swing.ts --ranks 2 --preset stopt-tree --n-grid 100
 */
import { ConfigError, defineProgram, notSetting, option, type OptionSpec } from 'molotof'
import { SwingDomain } from './domain.js'
import { Swing } from './kernel.js'
import { createBellmanContext } from './model/bellman.js'
import { buildLattice } from './model/models.js'
import { PARAM_NAMES, PRESETS, resolveParams, v0Level, type SwingParams } from './model/params.js'
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

const PARAM_HELP: Record<keyof SwingParams, string> = {
  model: 'price model: g, nig or g2d',
  N: 'number of decision dates',
  T: 'horizon in years',
  subSteps: 'trinomial sub-steps per date (g, g2d)',
  a: 'mean reversion of the (first) factor',
  sigma: 'volatility of the (first) factor',
  a2: 'mean reversion of the second factor (g2d)',
  sigma2: 'volatility of the second factor (g2d)',
  drift: 'drift correction c_k (g, g2d): ou (closed form) or lattice (log E[e^X_k] on the tree)',
  curve: 'forward curve: stopt, seasonal or flat',
  base: 'curve base level',
  amp: 'seasonal curve amplitude',
  vmin: 'minimum volume',
  vmax: 'maximum volume',
  nGrid: 'volume grid steps',
  v0: 'initial volume (a grid point)',
  injRate: 'maximum injection per date',
  wdRate: 'maximum withdrawal per date',
  cInj: 'cost per unit injected',
  cWd: 'cost per unit withdrawn',
  rates: 'rate profile: const or seasonal',
  control: 'control set: bang or grid',
  nigAlpha: 'NIG alpha',
  nigBeta: 'NIG beta (|beta| < alpha)',
  nigDxFactor: 'NIG grid step in units of the innovation std. dev.',
  nigWidth: 'NIG grid half-width in stationary std. devs',
  nigQuad: 'Simpson sub-intervals per NIG cell (even)',
}

// Every model parameter can be overridden; an empty value keeps the preset's
// (the presets leave drift to the model: ou for g and g2d, lattice for nig).
const defaultOf = (name: keyof SwingParams) => (name === 'drift' ? 'ou; nig is always lattice' : "the preset's")
const paramOptions = Object.fromEntries(
  PARAM_NAMES.map((name) => [name, option.string('', `${PARAM_HELP[name]} (default: ${defaultOf(name)})`)]),
) as Record<keyof SwingParams, OptionSpec & { type: 'string' }>

const presetNames = Object.keys(PRESETS) as [string, ...string[]]

export default defineProgram({
  name: 'swing',
  description: 'Gas storage valuation by dynamic programming on a price lattice (g, nig, g2d models).',
  options: {
    preset: option.choice(presetNames, 'stopt-tree', 'parameter preset'),
    ...paramOptions,
    window: option.boolean(true, 'compute only the volumes reachable from v0 (--no-window: the full grid)'),
    minimal: notSetting(option.boolean(true, 'minimal checkpoints: only the value function just computed')),
    policy: notSetting(option.string('', "this skeleton's checkpoint policy (default: the run's --checkpoint)")),
  },
  async main(ctx): Promise<SwingResult> {
    const o = ctx.options
    const params = resolveParams(o.preset, overridesFrom(o as unknown as Record<string, string>))
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

const ENUMS = new Set<keyof SwingParams>(['model', 'drift', 'curve', 'rates', 'control'])

/** Command-line overrides (strings) as typed parameters; bad numbers name the parameter. */
function overridesFrom(o: Record<string, string>): Partial<SwingParams> {
  const out: Record<string, string | number> = {}
  for (const name of PARAM_NAMES) {
    const raw = o[name]
    if (raw === undefined || raw === '') continue
    if (ENUMS.has(name)) out[name] = raw
    else {
      const v = Number(raw)
      if (!Number.isFinite(v)) throw new ConfigError(`invalid swing parameter "${name}": "${raw}" is not a number`)
      out[name] = v
    }
  }
  return out as Partial<SwingParams>
}
