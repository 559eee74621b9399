// The public API of molotof. Everything not exported here is internal.
export * from './errors.js'
export { DomainDesc, type StorageOrder } from './domains/desc.js'
export { Domain, type DomainOptions, type NumericDType } from './domains/domain.js'
export { Domain2D } from './domains/domain2d.js'
export { Domain3D } from './domains/domain3d.js'
export { splitPoint } from './domains/split.js'
export { type DType, type NumericArray, type AnyTypedArray } from './domains/dtype.js'
