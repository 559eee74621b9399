// Settings are compared as the values the computation uses: a parameter given
// with the preset's own value is the same setting at --resume, not another one.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { main } from '../../../src/cli/main.js'

const root = mkdtempSync(join(tmpdir(), 'molotof-swing-settings-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

async function run(...args: string[]): Promise<{ code: number; text: string }> {
  const lines: string[] = []
  const code = await main(['run', 'examples/swing/swing.ts', '--ranks', '2', '--preset', 'small-g', '--checkpoint', 'every:4', ...args], (s) => lines.push(s), (s) => lines.push(s))
  return { code, text: lines.join('\n') }
}

describe('swing: --resume compares settings as values', () => {
  it("--model g and --sigma 0.6 (small-g's own) resume a run started without them; --sigma 0.7 is refused", async () => {
    const dir = join(root, 'ckpt')
    const whole = await run('--checkpoint-dir', join(root, 'whole'))
    expect(whole.code).toBe(0)
    const value = /value +(\S+)/.exec(whole.text)?.[1]
    expect(value).toBeDefined()

    const failed = await run('--checkpoint-dir', dir, '--inject', 'rank=1,step=10', '--restarts', '0')
    expect(failed.code).toBe(1)

    const other = await run('--checkpoint-dir', dir, '--resume', '--sigma', '0.7')
    expect(other.code).toBe(2)
    expect(other.text).toMatch(/other settings\n\s+sigma: 0\.6 → 0\.7/)

    const same = await run('--checkpoint-dir', dir, '--resume', '--model', 'g', '--sigma', '0.6')
    expect(same.text).not.toMatch(/other settings/)
    expect(same.code).toBe(0)
    expect(same.text).toMatch(/resum/i)
    expect(/value +(\S+)/.exec(same.text)?.[1]).toBe(value)
  }, 120_000)
})
