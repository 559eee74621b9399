import { describe, expect, it } from 'vitest'
import { MessagePool } from '../../../src/runtime/transport/message-pool.js'

describe('MessagePool', () => {
  it('hands a released message back for the next take of the same size, whichever size came first', () => {
    const pool = new MessagePool()
    const a8 = pool.take(8)
    const a100 = pool.take(100)
    const a3 = pool.take(3)
    expect([a8.bytes.byteLength, a100.bytes.byteLength, a3.bytes.byteLength]).toEqual([8, 100, 3])
    a8.release()
    a100.release()
    a3.release()
    expect(pool.take(100)).toBe(a100)
    expect(pool.take(8)).toBe(a8)
    expect(pool.take(3)).toBe(a3)
    // Empty again: fresh messages.
    const b8 = pool.take(8)
    expect(b8).not.toBe(a8)
    expect(b8.bytes.byteLength).toBe(8)
  })

  it('keeps the free messages of one size in last-released-first order, and a double release counts once', () => {
    const pool = new MessagePool()
    const [x, y] = [pool.take(16), pool.take(16)]
    x.release()
    y.release()
    y.release()
    expect(pool.take(16)).toBe(y)
    expect(pool.take(16)).toBe(x)
    expect(pool.take(16)).not.toBe(y)
  })
})
