// Independent references for the swing valuation, written from the model's
// definition (the design note of the example: controls, gains, rates, V_N = 0)
// and NOT from examples/swing/model/bellman.ts: no backward induction on volume
// arrays, no interpolation, no halos. Each one enumerates exhaustively, so it is
// only usable on tiny cases; the tests choose volume steps and rates that are
// exact binary fractions so that every move lands exactly on a grid level.
import type { Csr, PriceLattice } from '../../../examples/swing/model/lattice.js'
import type { SwingParams } from '../../../examples/swing/model/params.js'

/** The maximal injection and withdrawal at date k: the rate profile of the model. */
export function ratesAt(p: SwingParams, k: number): { inj: number; wd: number } {
  if (p.rates === 'const') return { inj: p.injRate, wd: p.wdRate }
  const phase = k / p.N // exact at the boundaries 1/4 and 3/4 (correctly rounded division)
  const summer = phase >= 0.25 && phase < 0.75
  return summer ? { inj: p.injRate, wd: p.wdRate * 0.5 } : { inj: p.injRate * 0.5, wd: p.wdRate }
}

/**
 * The volumes allowed after the move at date k from volume v, as whole grid levels
 * (the reference works on levels so that no volume is ever rounded). Throws if a
 * move would leave the grid, which only the interpolating bang control can do: the
 * tests keep bang rates whole multiples of the step.
 */
export function movesAt(p: SwingParams, k: number, level: number): number[] {
  const h = (p.vmax - p.vmin) / p.nGrid
  const v = p.vmin + level * h
  const { inj, wd } = ratesAt(p, k)
  const targets = new Set<number>([level])
  if (p.control === 'bang') {
    const up = Math.min(p.vmax - v, inj)
    const down = Math.min(v - p.vmin, wd)
    for (const q of [up, -down]) {
      if (q === 0) continue
      const steps = q / h
      if (!Number.isInteger(steps)) throw new Error(`reference: bang move ${q} is not a whole number of steps ${h}`)
      targets.add(level + steps)
    }
  } else {
    const jUp = Math.floor(inj / h)
    const jDown = Math.floor(wd / h)
    for (let j = -jDown; j <= jUp; j++) if (level + j >= 0 && level + j <= p.nGrid) targets.add(level + j)
  }
  return [...targets].sort((a, b) => a - b)
}

/** Cash of moving from level `from` to level `to` at spot S: −q(S + cInj) buying, |q|(S − cWd) selling. */
export function gain(p: SwingParams, from: number, to: number, S: number): number {
  const h = (p.vmax - p.vmin) / p.nGrid
  const q = (to - from) * h
  if (q > 0) return -q * (S + p.cInj)
  if (q < 0) return -q * (S - p.cWd)
  return 0
}

/** The starting level of v0. */
export function startLevel(p: SwingParams): number {
  const level = (p.v0 - p.vmin) / ((p.vmax - p.vmin) / p.nGrid)
  if (!Number.isInteger(level)) throw new Error('reference: v0 must be exactly a grid level')
  return level
}

/**
 * Deterministic prices F_0..F_{N−1}: the best total cash over EVERY sequence of
 * moves (depth-first enumeration of all of them, no memo; gas left at the end is
 * worth nothing). Also returns how many sequences were tried.
 */
export function bestSequence(p: SwingParams, F: ArrayLike<number>): { value: number; sequences: number } {
  let best = -Infinity
  let sequences = 0
  const walk = (k: number, level: number, cash: number): void => {
    if (k === p.N) {
      sequences++
      if (cash > best) best = cash
      return
    }
    for (const to of movesAt(p, k, level)) walk(k + 1, to, cash + gain(p, level, to, F[k]))
  }
  walk(0, startLevel(p), 0)
  return { value: best, sequences }
}

/** A node of the scenario tree (paths of the lattice, not recombined). */
interface Scenario {
  date: number
  node: number
  prob: number
  parent: number
}

/**
 * The best expected cash over EVERY adapted policy on `lattice`: a policy picks a
 * move at each node of the scenario tree (a path from the root, so it may depend on
 * the whole price history), and its expected cash is the sum over all paths. The
 * policies are enumerated exhaustively (every combination of moves) at dates
 * 0..N−2; at the last decision date N−1 each path takes its best move directly
 * (nothing comes after it, so that is the same as enumerating it; it is cached per
 * node and volume). Also returns how many policies were tried.
 */
export function bestPolicy(p: SwingParams, lattice: PriceLattice, maxPolicies = 2e6): { value: number; policies: number } {
  const N = p.N
  // Scenario nodes in date order, parents before children.
  const scen: Scenario[] = [{ date: 0, node: 0, prob: 1, parent: -1 }]
  const children: number[][] = [[]]
  for (let i = 0; i < scen.length; i++) {
    const s = scen[i]
    if (s.date === N - 1) continue
    const t: Csr = lattice.transitions(s.date)
    for (let e = t.rowPtr[s.node]; e < t.rowPtr[s.node + 1]; e++) {
      children[i].push(scen.length)
      scen.push({ date: s.date + 1, node: t.col[e], prob: s.prob * t.p[e], parent: i })
      children.push([])
    }
  }
  const S = (i: number) => lattice.spot(scen[i].date, scen[i].node)
  // Expected cash of last-date node i entered at `level`, with its best move.
  const lastCache = new Map<number, number>()
  const last = (i: number, level: number): number => {
    const key = i * (p.nGrid + 1) + level
    let cash = lastCache.get(key)
    if (cash === undefined) {
      cash = -Infinity
      for (const to of movesAt(p, scen[i].date, level)) cash = Math.max(cash, gain(p, level, to, S(i)))
      cash *= scen[i].prob
      lastCache.set(key, cash)
    }
    return cash
  }
  if (N === 1) return { value: last(0, startLevel(p)), policies: 1 }
  const decisions = scen.filter((s) => s.date < N - 1).length // a prefix of scen
  const levelAfter = new Array<number>(decisions)
  let best = -Infinity
  let policies = 0
  // Decision node i: try each move; a node of date N−2 also collects its children's last-date cash.
  const choose = (i: number, cash: number): void => {
    if (i === decisions) {
      if (++policies > maxPolicies) throw new Error(`reference: more than ${maxPolicies} policies, pick a smaller case`)
      if (cash > best) best = cash
      return
    }
    const s = scen[i]
    const from = s.parent < 0 ? startLevel(p) : levelAfter[s.parent]
    for (const to of movesAt(p, s.date, from)) {
      levelAfter[i] = to
      let c = cash + s.prob * gain(p, from, to, S(i))
      if (s.date === N - 2) for (const child of children[i]) c += last(child, to)
      choose(i + 1, c)
    }
  }
  choose(0, 0)
  return { value: best, policies }
}

/**
 * A lattice given by hand: `spots[k]` are the spots of date k (k < N) and
 * `next[k][n]` the successors of node n of date k as [node, probability] pairs
 * (ascending nodes). `nodesAtEnd` is the node count of the terminal date N.
 */
export function handLattice(spots: number[][], next: [number, number][][][], nodesAtEnd = 1): PriceLattice {
  const N = spots.length
  const arrays = spots.map((s) => Float64Array.from(s))
  const csr: Csr[] = next.map((rows) => {
    const rowPtr = new Int32Array(rows.length + 1)
    const col: number[] = []
    const pr: number[] = []
    rows.forEach((row, n) => {
      for (const [c, q] of row) {
        col.push(c)
        pr.push(q)
      }
      rowPtr[n + 1] = col.length
    })
    return { rowPtr, col: Int32Array.from(col), p: Float64Array.from(pr) }
  })
  return {
    dates: N,
    nodes: (k) => (k < N ? spots[k].length : nodesAtEnd),
    spot: (k, n) => arrays[k][n],
    spots: (k) => arrays[k],
    transitions: (k) => csr[k],
  }
}

/** One node per date with spot F_k: the deterministic (zero-volatility) lattice. */
export function curveLattice(F: ArrayLike<number>): PriceLattice {
  const N = F.length
  return handLattice(
    Array.from({ length: N }, (_, k) => [F[k]]),
    Array.from({ length: N }, () => [[[0, 1]]]),
  )
}
