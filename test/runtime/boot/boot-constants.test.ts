import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { HEARTBEAT_MAGIC, HEARTBEAT_RECORD_BYTES } from '../../../src/runtime/groups/heartbeat.js'
import { createStatusBuffer, RankStatus, readStatus } from '../../../src/runtime/status.js'
import { PHASES } from '../../../src/skeletons/phase.js'
// Plain JavaScript shared by the boot files of rank and spare processes (it runs before tsx is loaded).
import { beat } from '../../../src/runtime/boot/boot-heartbeat.mjs'
import { PHASES as BOOT_PHASES, slotWhere } from '../../../src/runtime/boot/status-layout.mjs'

describe('boot files and the TypeScript side share one status layout', () => {
  it('has one phase list: the skeletons name the phases of the boot files', () => {
    expect(PHASES).toBe(BOOT_PHASES)
    expect(PHASES.slice(0, 4)).toEqual(['start', 'light', 'init', 'calculate'])
  })

  it('reads in the boot files what a rank writes through RankStatus', () => {
    const status = createStatusBuffer(3)
    expect(slotWhere(status, 1)).toEqual({ skeleton: -1, step: -1, phase: 'start' })
    new RankStatus(status, 1).set(2, 17, 'route')
    expect(slotWhere(status, 1)).toEqual({ skeleton: 2, step: 17, phase: 'route' })
    expect(readStatus(status, 1)).toEqual({ skeleton: 2, step: 17, phase: 'route', beats: 1 })
    expect(slotWhere(status, 0)).toEqual({ skeleton: -1, step: -1, phase: 'start' })
  })

  it("writes heartbeat records of the size and magic heartbeat.ts reads, with the rank's status slot", () => {
    const dir = mkdtempSync(join(tmpdir(), 'molotof-beat-'))
    try {
      const file = join(dir, 'beats')
      const fd = openSync(file, 'w')
      const status = new Int32Array(new SharedArrayBuffer(3 * 16))
      status.set([0, 41, 3, 7], 2 * 4) // rank 2: skeleton 0, step 41, phase 3 (calculate), 7 changes
      const seq = new Int32Array(new SharedArrayBuffer(4))
      expect(beat(fd, status, seq, 2)).toBe(true)
      expect(beat(fd, status, seq, -1)).toBe(true) // an idle spare: nowhere yet
      closeSync(fd)
      const bytes = readFileSync(file)
      expect(bytes.byteLength).toBe(2 * HEARTBEAT_RECORD_BYTES)
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
      const record = (k: number) => Array.from({ length: 6 }, (_, i) => view.getInt32(k * HEARTBEAT_RECORD_BYTES + i * 4, true))
      expect(record(0)).toEqual([HEARTBEAT_MAGIC, 0, 0, 41, 3, 7])
      expect(record(1)).toEqual([HEARTBEAT_MAGIC, 1, -1, -1, 0, 0])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

// The setup shared by rank and spare processes uses the shared heartbeat and status layout, not copies of them.
describe('process-host.mjs', () => {
  const text = readFileSync(new URL('../../../src/runtime/boot/process-host.mjs', import.meta.url), 'utf8')

  it('starts the shared heartbeat thread', () => {
    expect(text).toContain("from './boot-heartbeat.mjs'")
    expect(text).toContain('startHeartbeat(')
    expect(text).not.toContain('new ArrayBuffer(')
  })

  it('takes the status slots and the phase list from status-layout.mjs', () => {
    expect(text).toContain("from './status-layout.mjs'")
    expect(text).not.toContain('new SharedArrayBuffer(size')
    expect(text).not.toMatch(/\* 4\b|\* 16\b/) // slot arithmetic of its own
    expect(text).not.toContain("'calculate'") // a phase list of its own
  })
})

// Rank and spare processes start from that one setup: no heartbeat, signal or status setup of their own.
describe.each(['process-boot.mjs', 'spare-boot.mjs'])('%s', (file) => {
  const text = readFileSync(new URL(`../../../src/runtime/boot/${file}`, import.meta.url), 'utf8')

  it('sets itself up through process-host.mjs', () => {
    expect(text).toContain("from './process-host.mjs'")
    expect(text).toContain('startProcessHost(')
    expect(text).not.toContain('startHeartbeat(')
    expect(text).not.toContain("process.on(signal")
    expect(text).not.toContain("'uncaughtException'")
    expect(text).not.toContain('createStatusSlots(')
    expect(text).not.toMatch(/\* 4\b|\* 16\b/)
    expect(text).not.toContain("'calculate'")
  })
})

describe('boot-heartbeat.mjs', () => {
  it('has no slot layout or phase list of its own', () => {
    const text = readFileSync(new URL('../../../src/runtime/boot/boot-heartbeat.mjs', import.meta.url), 'utf8')
    expect(text).toContain("from './status-layout.mjs'")
    expect(text).not.toMatch(/\* 4\b|\+ 3\b|0x6d6f6c68/)
    expect(text).not.toContain("'calculate'")
  })
})
