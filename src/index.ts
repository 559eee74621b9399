// The public API of molotof: what a program author and a batch user need.
// Everything not exported here is internal (tests and benchmarks import it from
// its module); failure injection, for tests, is in src/testing.ts
// (`molotof/testing`). Runtime names stay few (test/api.test.ts counts them); every
// type a public signature uses is exported as a type. Add a name to its section.
//
// Installs how ranks run the programs this copy declares (see skeletons/program.ts).
import './runtime/rank/rank-entry.js'

// --- Writing a program: domains, kernel, options, program -------------------
export { DomainDesc, type StorageOrder } from './domains/desc.js'
export { Domain, type DomainOptions, type NumericDType } from './domains/domain.js'
export { Domain2D } from './domains/domain2d.js'
export { Domain3D } from './domains/domain3d.js'
export { splitPoint } from './domains/split.js'
export { RankGrid } from './domains/rank-grid.js'
export type { DType, NumericArray, AnyTypedArray, TypedArrayOf, TypedArrayByName } from './domains/dtype.js'
export { CalcKernel, CountedKernel, type StepContext, type RebuildContext } from './skeletons/kernel.js'
export { option, notSetting, type OptionSpec, type OptionSpecs, type OptionValues, type OptionCommon, type NumberRange } from './skeletons/options.js'
export { defineProgram, type Program, type ProgramDefinition } from './skeletons/program.js'

// --- What a program's main receives (types: molotof builds these) -----------
export type { RankContext } from './skeletons/context.js'
export type { Skeleton, SkeletonOptions } from './skeletons/skeleton.js'
export type { RoutingMode } from './routing/plan.js'
export type { Schedule } from './routing/router.js'
export type { Communicator, Message, ReduceOp } from './routing/communicator.js'
export type { CheckpointRegistry, Cell, DefaultEntry, HeavyRegistration, LightRegistration, WatchRegistration, HeavyOptions, LightOptions, MergeRule, UnregisterOptions } from './checkpoint/registry.js'
export type { Serializer } from './checkpoint/light/codec.js'

// --- Running a program: once, supervised, or in this thread (tests) ---------
export { launch, type LaunchOptions, type RunResult } from './runtime/launch/launcher.js'
export { Supervisor, type ClusterEvent, type MembershipEvent, type NodeLostEvent, type SuperviseOptions, type SuperviseResult, type SupervisorEvent } from './runtime/launch/supervisor.js'
export { runLocal, type LocalRunOptions } from './runtime/launch/local.js'
export type { Transport, RunningRanks } from './runtime/group.js'
export type { FaultToleranceConfig, MemoryLevelConfig, SharedLevelConfig } from './checkpoint/config.js'
export type { MembershipRecord } from './checkpoint/store/marker.js'
export type { CheckpointPolicy } from './checkpoint/policy/policy.js'
export type { CheckpointEvent, CheckpointLevel, CopyLevel } from './checkpoint/events.js'

// --- Errors: one catalogue; branch on `instanceof`, `code`, `exit` or `restartable`
export {
  MolotofError,
  ConfigError,
  PartitionError,
  ProgramLoadError,
  RankFailedError,
  CheckpointError,
  CheckpointCorruptError,
  CheckpointMismatchError,
  SettingsMismatchError,
  ReplayDivergenceError,
  RestartBudgetExhaustedError,
  RunStoppedError,
  PreemptedError,
  RunInterruptedError,
  CommunicationError,
  CodeChangedError,
  DirectoryLockedError,
  type LockHolder,
  type ExitClass,
  type RankLocation,
  type SettingDifference,
  type FailureRecord,
  type FailureReason,
} from './errors.js'
