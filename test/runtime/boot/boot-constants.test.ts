import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { HEARTBEAT_MAGIC, HEARTBEAT_RECORD_BYTES } from '../../../src/runtime/groups/heartbeat.js'
import { PHASES } from '../../../src/skeletons/phase.js'
// Plain JavaScript shared by the boot files of rank and spare processes (it runs before tsx is loaded):
// it keeps its own copies of the phase list and the heartbeat record layout.
import { beat, PHASES as BOOT_PHASES } from '../../../src/runtime/boot/boot-heartbeat.mjs'

describe('boot-heartbeat.mjs agrees with the TypeScript side', () => {
  it('lists the phases in the order of status.ts', () => {
    expect(BOOT_PHASES).toEqual([...PHASES])
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

// The boot files themselves use the shared heartbeat, not a copy of it.
describe.each(['process-boot.mjs', 'spare-boot.mjs'])('%s', (file) => {
  it('starts the shared heartbeat thread', () => {
    const text = readFileSync(new URL(`../../../src/runtime/boot/${file}`, import.meta.url), 'utf8')
    expect(text).toContain("from './boot-heartbeat.mjs'")
    expect(text).toContain('startHeartbeat(')
    expect(text).not.toContain('new ArrayBuffer(')
  })
})
