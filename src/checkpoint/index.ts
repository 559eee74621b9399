// The checkpoint layer: on-disk format, light values, store, recovery line, policies.
export {
  FORMAT_VERSION,
  MAGIC,
  PREAMBLE_BYTES,
  align,
  decodeRankFile,
  encodeRankFile,
  headerChecksumOf,
  readHeaderOnly,
  type BoxRecord,
  type DecodedEntry,
  type DecodedRankFile,
  type EntryInput,
  type EntryRecord,
  type RankFileHeader,
  type RankFileInfo,
  type RankFileMeta,
} from './format.js'
export { entryArray } from './payload.js'
export { checkSerializable, decodeLight, diffLight, digestOf, encodeLight, type Serializer } from './light.js'
export { encodeMarker, parseMarker, type CommitMarker, type RankFileRecord } from './marker.js'
export {
  CheckpointStore,
  type CheckpointSummary,
  type PruneResult,
  type RankFileWritten,
  type ValidateOptions,
  type ValidationProblem,
  type ValidationReport,
} from './store.js'
export {
  assertSameSettings,
  chooseRecoveryLine,
  compareSettings,
  localView,
  type LocalViewOptions,
  type RankView,
  type RecoveryLine,
  type SettingsSnapshot,
  type SkipReason,
} from './recovery-line.js'
export { describePolicy, parsePolicy, toRule, type CheckpointPolicy, type PolicyRule } from './policy.js'
export { PolicyClock, dalyInterval, youngInterval, type ClockInput, type ClockOptions } from './policy-clock.js'
export { formatDuration, parseDuration } from './duration.js'
export { checkJsonObject, type JsonObject, type JsonValue } from './json.js'
