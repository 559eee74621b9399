// The public API of molotof. Everything not exported here is internal.
// Installs how ranks run the programs this copy declares (see skeletons/program.ts).
import './runtime/rank-entry.js'
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
  InternalError,
  type ExitClass,
  type RankLocation,
  type SettingDifference,
  type FailureRecord,
  type FailureReason,
} from './errors.js'
export { DomainDesc, type StorageOrder } from './domains/desc.js'
export { Domain, type DomainOptions, type NumericDType } from './domains/domain.js'
export { Domain2D } from './domains/domain2d.js'
export { Domain3D } from './domains/domain3d.js'
export { splitPoint } from './domains/split.js'
export { type DType, type NumericArray, type AnyTypedArray } from './domains/dtype.js'
export { CalcKernel, type StepContext, type RebuildContext } from './skeletons/kernel.js'
export { Skeleton, type SkeletonOptions } from './skeletons/skeleton.js'
export type { SkeletonState } from './checkpoint/skeleton-hooks.js'
export { RankContext } from './skeletons/context.js'
export { defineProgram, isProgram, type Program, type ProgramDefinition } from './skeletons/program.js'
export { option, notSetting, settingsOf, parseOptions, formatOptions, type OptionSpec, type OptionSpecs, type OptionValues } from './skeletons/options.js'
export { RoutingPlan, type RoutingMode, type PeerTransfer } from './routing/plan.js'
export { Router, type Schedule } from './routing/router.js'
export { partitionAt, validatePartition, samePartition, type Partition } from './routing/partition.js'
export type { Communicator, Message, ReduceOp } from './routing/communicator.js'
export { launch, describe, type LaunchOptions, type RunResult, type ProgramDescription } from './runtime/launcher.js'
export { localGroup, runLocal } from './runtime/local.js'
export { CheckpointRegistry, Cell, type DefaultEntry } from './checkpoint/registry.js'
export { parsePolicy, describePolicy, type CheckpointPolicy } from './checkpoint/policy/policy.js'
export type { Serializer } from './checkpoint/light/codec.js'
export type { FaultToleranceConfig } from './checkpoint/config.js'
export type { CheckpointEvent, RecoveryInfo } from './checkpoint/events.js'
export { Supervisor, type SuperviseOptions, type SuperviseResult, type SupervisorEvent } from './runtime/supervisor.js'
export { parseInjection, type Injection, type RandomInjection } from './runtime/inject.js'
export type { Transport, RankGroup } from './runtime/group.js'
export { CheckpointStore } from './checkpoint/store/checkpoint-store.js'
export type { NumberRange, OptionCommon } from './skeletons/options.js'
