// Types of source-locations.mjs (plain JavaScript: the boot files use it too).
export declare function sourceLocations(text: string): string
export declare function withSourceLocations<T>(e: T): T
