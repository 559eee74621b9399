import { match } from 'ts-pattern'
import { forwardCurve } from './curves.js'
import type { PriceLattice } from './lattice.js'
import { NigLattice } from './nig.js'
import { type SwingParams, driftOf } from './params.js'
import { TreeLattice, buildOuTree } from './tree.js'
import { ProductTreeLattice } from './tree2d.js'

/**
 * The price lattice of `params.model` (deterministic; call it in every rank's light
 * initialisation): `const lattice = buildLattice(resolveParams('daily-g'))`.
 */
export function buildLattice(p: SwingParams): PriceLattice {
  const forward = forwardCurve(p)
  const drift = driftOf(p) // nig: always 'lattice' (validateParams refuses 'ou'); NigLattice computes it itself
  return match(p.model)
    .with('g', () => new TreeLattice(buildOuTree(p.a, p.sigma, p.T, p.N, p.subSteps), forward, drift))
    .with(
      'g2d',
      () =>
        new ProductTreeLattice(
          buildOuTree(p.a, p.sigma, p.T, p.N, p.subSteps),
          buildOuTree(p.a2, p.sigma2, p.T, p.N, p.subSteps),
          forward,
          drift,
        ),
    )
    .with(
      'nig',
      () =>
        new NigLattice(
          p.a, p.sigma, p.T, p.N,
          { alpha: p.nigAlpha, beta: p.nigBeta, dxFactor: p.nigDxFactor, width: p.nigWidth, quad: p.nigQuad },
          forward,
        ),
    )
    .exhaustive()
}
