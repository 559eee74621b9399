import { statSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { createSocketDirectory, removeSocketDirectory } from '../../../src/runtime/groups/socket-dir.js'

describe('socket directory', () => {
  it('is private to the user (mode 0700): on one host, no other user can reach the ranks\' Unix sockets', () => {
    const dir = createSocketDirectory(4)
    try {
      expect(statSync(dir).mode & 0o777).toBe(0o700)
    } finally {
      removeSocketDirectory(dir)
    }
  })
})
