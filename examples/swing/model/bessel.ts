/**
 * Modified Bessel function of the second kind of order 1, scaled: e^z·K1(z) for z > 0.
 * Relative accuracy about 1e-15 (checked against mpmath), deterministic. The
 * scaling avoids underflow in the NIG density, where K1(α·r) meets e^{−α·r}.
 *
 * Three regimes:
 * - z ≤ 2: the power series (A&S 9.6.11 with n = 1), no cancellation problem there;
 * - 2 < z < 25: the integral e^z·K1(z) = ∫_0^∞ exp(−2z·sinh²(t/2))·cosh t dt by the
 *   trapezoidal rule, exponentially accurate for this analytic, fast-decaying integrand
 *   (step 0.3/√z keeps the error near 1e-17, see the test);
 * - z ≥ 25: the asymptotic expansion, whose smallest term is about e^{−2z}.
 */
export function besselK1Scaled(z: number): number {
  if (!(z > 0)) return z === 0 ? Infinity : NaN
  if (z <= 2) return seriesK1(z) * Math.exp(z)
  if (z < 25) return trapezoidK1Scaled(z)
  return asymptoticK1Scaled(z)
}

/** K1(z) for z > 0 (underflows to 0 beyond z ≈ 700; use besselK1Scaled there). */
export function besselK1(z: number): number {
  if (z <= 2) return seriesK1(z)
  return besselK1Scaled(z) * Math.exp(-z)
}

const EULER_GAMMA = 0.5772156649015329

// K1(z) = 1/z + ln(z/2)·I1(z) − (z/4)·Σ_k (ψ(k+1) + ψ(k+2))·(z²/4)^k / (k!(k+1)!),
// I1(z) = (z/2)·Σ_k (z²/4)^k / (k!(k+1)!).
function seriesK1(z: number): number {
  const q = (z * z) / 4
  let term = 1 // (z²/4)^k / (k!(k+1)!)
  let psiK1 = -EULER_GAMMA // ψ(k+1)
  let psiK2 = 1 - EULER_GAMMA // ψ(k+2)
  let sumI = 0
  let sumPsi = 0
  for (let k = 0; k < 60; k++) {
    sumI += term
    sumPsi += (psiK1 + psiK2) * term
    if (term < 1e-18 * sumI) break
    const k1 = k + 1
    term *= q / (k1 * (k1 + 1))
    psiK1 += 1 / k1
    psiK2 += 1 / (k1 + 1)
  }
  return 1 / z + Math.log(z / 2) * (z / 2) * sumI - (z / 4) * sumPsi
}

function trapezoidK1Scaled(z: number): number {
  const h = 0.3 / Math.sqrt(z)
  let sum = 0.5 // f(0) = 1, halved
  for (let i = 1; i < 100000; i++) {
    const t = i * h
    const sh = Math.sinh(t / 2)
    const f = Math.exp(-2 * z * sh * sh) * Math.cosh(t)
    sum += f
    if (f < 1e-18 * sum) break
  }
  return sum * h
}

// e^z·K1(z) ~ sqrt(π/(2z))·Σ_k a_k, a_k = a_{k−1}·(4 − (2k−1)²)/(8kz), a_0 = 1.
function asymptoticK1Scaled(z: number): number {
  let term = 1
  let sum = 1
  for (let k = 1; k < 200; k++) {
    const next = (term * (4 - (2 * k - 1) * (2 * k - 1))) / (8 * k * z)
    if (Math.abs(next) >= Math.abs(term)) break // the series is asymptotic: stop at the smallest term
    term = next
    sum += term
    if (Math.abs(term) < 1e-18 * Math.abs(sum)) break
  }
  return Math.sqrt(Math.PI / (2 * z)) * sum
}
