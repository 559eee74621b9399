// Types of boot-heartbeat.mjs (plain JavaScript: it runs before tsx is loaded).
export declare function beat(fd: number, status: Int32Array, seq: Int32Array, rank: number): boolean
export declare function startHeartbeat(o: {
  fd: number
  status: Int32Array
  seq: Int32Array
  periodMs: number
  rank?: number
  current?: Int32Array
  label: string
}): void
export declare function reportUncaught(e: unknown, o: { fd: number; status: Int32Array; seq: Int32Array; rank: number }): void
