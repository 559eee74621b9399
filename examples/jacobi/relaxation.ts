import { CountedKernel } from 'molotof'
import { type Plate, setBoundary } from './plate.js'

/**
 * Jacobi relaxation of the Laplace equation:
 * `u'[i][j] = 0.25 * (u[i][j-1] + u[i][j+1] + u[i-1][j] + u[i+1][j])`,
 * in exactly that operand order so every rank count gives the same bits.
 */
export class Relaxation extends CountedKernel<Plate> {
  /** Boundary values are light: set in both domains, replayed on recovery. */
  override initialize(read: Plate, write: Plate): void {
    setBoundary(read)
    setBoundary(write)
  }

  calculate(read: Plate, write: Plate): void {
    const box = write.possessedBox
    const u = read.data
    const v = write.data
    const su = read.s0
    const sv = write.s0
    const ou = read.offset
    const ov = write.offset
    const j0 = box.lower[1]
    const j1 = box.upper[1]
    for (let i = box.lower[0]; i < box.upper[0]; i++) {
      const r = ou + i * su
      const w = ov + i * sv
      for (let j = j0; j < j1; j++) {
        v[w + j] = 0.25 * (u[r + j - 1] + u[r + j + 1] + u[r - su + j] + u[r + su + j])
      }
    }
  }
}
