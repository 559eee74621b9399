/**
 * The message tags the framework itself uses, in one place so that no two
 * uses share one: messages between one pair of ranks with one tag arrive in
 * order, so two protocols on one tag between the same pair would take each
 * other's messages (an ordered fold and a partner copy between neighbours in
 * the background, say). Programs and routing plans use tags ≥ 0; the
 * collectives use -1, -2, … (one per call, wrapping before -0x40000000), far
 * above these.
 *
 * ```ts
 * await comm.send(holder, FRAMEWORK_TAGS.partnerCopy, bytes)
 * ```
 */
export const FRAMEWORK_TAGS = {
  /** Context.foldInRankOrder: the running value passed from rank to rank. */
  foldInRankOrder: -0x7fff0000,
  /** Ordered folds (skeletons/ordered-fold.ts): data, acknowledgements, the result. */
  orderedFoldData: -0x7ffe0000,
  orderedFoldAck: -0x7ffe0001,
  orderedFoldResult: -0x7ffe0002,
  /** Partner copies of committed checkpoints, sent in the background after a checkpoint (disk, memory: both may be in flight at once). */
  partnerCopy: -0x7ffd0000,
  partnerCopyMemory: -0x7ffd0003,
  /** Rank files sent back to their owner from its partner at recovery. */
  partnerRestore: -0x7ffd0001,
  /** Byte ranges of old rank files served to other ranks at an elastic restore. */
  elasticRead: -0x7ffd0002,
  /** XOR redundancy: chunks of committed checkpoints sent to the members whose parity slices hold them (disk, memory), and slices and files sent to a lost member rebuilt. */
  xorParity: -0x7ffd0004,
  xorParityMemory: -0x7ffd0005,
  xorRebuild: -0x7ffd0006,
} as const
