import { describe, expect, it } from 'vitest'
import { Mailbox } from '../../../src/runtime/transport/mailbox.js'
import type { Message } from '../../../src/routing/communicator.js'

const msg = (v: number): Message => ({ bytes: new Uint8Array([v]), release: () => {} })
const value = (m: Message | undefined) => m?.bytes[0]

describe('Mailbox', () => {
  it('matches by source and tag, in arrival order per (source, tag), whichever comes first', async () => {
    const box = new Mailbox()
    box.deliver(1000, 7, msg(1))
    box.deliver(1000, 8, msg(2))
    box.deliver(1000, 7, msg(3))
    box.deliver(3, 7, msg(4))
    expect(value(box.takeNow(1000, 8))).toBe(2)
    expect(value(box.takeNow(1000, 7))).toBe(1)
    expect(value(await box.take(1000, 7))).toBe(3)
    expect(box.takeNow(1000, 7)).toBeUndefined()
    expect(box.takeNow(5, 7)).toBeUndefined()
    const later = box.take(1000, 9)
    expect(box.hasWaiters(1000)).toBe(true)
    box.deliver(1000, 9, msg(5))
    expect(value(await later)).toBe(5)
    expect(box.hasWaiters(1000)).toBe(false)
    expect(value(box.takeNow(3, 7))).toBe(4)
  })

  it('a failed source fails what waits for it and later receives, but hands out what had arrived; other sources go on', async () => {
    const box = new Mailbox()
    box.deliver(2, 1, msg(9))
    const waiting = box.take(2, 5)
    box.failPeer(2, (tag) => new Error(`lost, tag ${tag}`))
    await expect(waiting).rejects.toThrow('lost, tag 5')
    await expect(box.take(2, 6)).rejects.toThrow('lost, tag 6')
    expect(value(await box.take(2, 1))).toBe(9)
    box.deliver(1, 1, msg(8))
    expect(value(await box.take(1, 1))).toBe(8)
  })

  it('fail() rejects every pending and future receive', async () => {
    const box = new Mailbox()
    const a = box.take(0, 1)
    const b = box.take(3, 2)
    box.fail(new Error('closed'))
    await expect(a).rejects.toThrow('closed')
    await expect(b).rejects.toThrow('closed')
    await expect(box.take(1, 1)).rejects.toThrow('closed')
    expect(box.takeNow(1, 1)).toBeUndefined()
  })
})
