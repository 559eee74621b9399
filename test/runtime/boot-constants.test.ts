import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { HEARTBEAT_MAGIC, HEARTBEAT_RECORD_BYTES } from '../../src/runtime/heartbeat.js'
import { PHASES } from '../../src/skeletons/phase.js'

// process-boot.mjs is plain JavaScript (it runs before tsx is loaded) and keeps
// its own copies of the phase list and the heartbeat record layout.
const boot = readFileSync(new URL('../../src/runtime/process-boot.mjs', import.meta.url), 'utf8')

describe('process-boot.mjs agrees with the TypeScript side', () => {
  it('lists the phases in the order of status.ts', () => {
    const literal = /const PHASES = (\[[^\]]*\])/.exec(boot)?.[1]
    expect(literal, 'PHASES not found in process-boot.mjs').toBeDefined()
    expect(JSON.parse(literal!.replace(/'/g, '"'))).toEqual([...PHASES])
  })

  it('writes heartbeat records of the size and magic heartbeat.ts reads', () => {
    expect(boot).toContain(`new ArrayBuffer(${HEARTBEAT_RECORD_BYTES})`)
    expect(boot).toContain(`rec.setInt32(0, 0x${HEARTBEAT_MAGIC.toString(16)}, true)`)
  })
})

// spare-boot.mjs (warm spares) keeps the same copies.
const spareBoot = readFileSync(new URL('../../src/runtime/spare-boot.mjs', import.meta.url), 'utf8')

describe('spare-boot.mjs agrees with the TypeScript side', () => {
  it('lists the phases in the order of status.ts', () => {
    const literal = /const PHASES = (\[[^\]]*\])/.exec(spareBoot)?.[1]
    expect(literal, 'PHASES not found in spare-boot.mjs').toBeDefined()
    expect(JSON.parse(literal!.replace(/'/g, '"'))).toEqual([...PHASES])
  })

  it('writes heartbeat records of the size and magic heartbeat.ts reads', () => {
    expect(spareBoot).toContain(`new ArrayBuffer(${HEARTBEAT_RECORD_BYTES})`)
    expect(spareBoot).toContain(`rec.setInt32(0, 0x${HEARTBEAT_MAGIC.toString(16)}, true)`)
  })
})
