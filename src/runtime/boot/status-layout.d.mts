// Types of status-layout.mjs (plain JavaScript: it runs before tsx is loaded).
export declare const PHASES: readonly ['start', 'light', 'init', 'calculate', 'route', 'checkpoint', 'swap', 'replay', 'restore', 'done']
export declare const STATUS_FIELDS: 4
export declare const SLOT_SKELETON: 0
export declare const SLOT_STEP: 1
export declare const SLOT_PHASE: 2
export declare const SLOT_CHANGES: 3
export declare function createStatusSlots(size: number): Int32Array
export declare function clearStatusSlot(status: Int32Array, rank: number): void
export declare function slotWhere(status: Int32Array, rank: number): { skeleton: number; step: number; phase: (typeof PHASES)[number] }
export declare const HEARTBEAT_RECORD_BYTES: 24
export declare const HEARTBEAT_MAGIC: number
