import { deserialize, serialize } from 'node:v8'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import * as errors from '../src/errors.js'
import {
  CATALOGUE,
  CheckpointCorruptError,
  CheckpointError,
  CheckpointMismatchError,
  CommunicationError,
  ConfigError,
  errorRecord,
  InternalError,
  MolotofError,
  PartitionError,
  PreemptedError,
  ProgramLoadError,
  RankFailedError,
  ReplayDivergenceError,
  NodeLostError,
  NodeMismatchError,
  RestartBudgetExhaustedError,
  reviveError,
  RunInterruptedError,
  RunStoppedError,
  SettingsMismatchError,
  CodeChangedError,
  DirectoryLockedError,
  EarlierRunError,
  CheckpointDirectoryError,
  NothingToResumeError,
  type ErrorRecord,
  type FailureRecord,
} from '../src/errors.js'

const failure: FailureRecord = { attempt: 0, rank: 1, skeleton: 0, step: 4, phase: 'calculate', reason: 'error', message: 'boom', detectionMs: 3 }

/** One instance of every catalogue class, with fields where the class has some. */
const samples: MolotofError[] = [
  new ConfigError('bad --n'),
  new PartitionError('ranks 0 and 1 overlap'),
  new ProgramLoadError('no program'),
  new RankFailedError({ rank: 2, skeleton: 1, step: 7, phase: 'route' }, 'killed by SIGKILL', 'remote stack'),
  new CheckpointError('disk full'),
  new CheckpointCorruptError('/x/rank-0.mlf', 'truncated'),
  new CheckpointMismatchError('another program'),
  new SettingsMismatchError([{ name: 'n', old: 500, new: 400 }, { name: 'ranks', old: 2, new: 3 }]),
  new ReplayDivergenceError('the iterator', 'k: 3 → 4'),
  new RestartBudgetExhaustedError([failure, { ...failure, attempt: 1 }], 1),
  new RunStoppedError('SIGTERM'),
  new PreemptedError(5),
  new RunInterruptedError(0, 12),
  new CommunicationError('rank 1 closed its communicator'),
  new InternalError('restore without a line'),
  new CodeChangedError('the code changed: relaxation.ts changed', ['examples/jacobi/relaxation.ts']),
  new DirectoryLockedError('/ckpt', { pid: 42, host: 'h', startedAt: '2026-01-01T00:00:00.000Z' }, 'Wait for it.'),
  new EarlierRunError('/ckpt', 'holds checkpoints of an earlier run'),
  new CheckpointDirectoryError('/ckpt', 'the file system is read-only (EROFS)'),
  new NothingToResumeError('--resume found no checkpoint to resume in /ckpt'),
  new NodeLostError(1, 'node 1 was lost'),
  new NodeMismatchError(2, [{ name: 'program options', old: '--n 16', new: '--n 32' }]),
]

/** What crosses the rank boundary: structured clone (threads) and v8 serialization (processes' IPC). */
const crossings: Array<[string, (r: ErrorRecord) => ErrorRecord]> = [
  ['structured clone (threads)', (r) => structuredClone(r)],
  ['v8 serialization (processes)', (r) => deserialize(serialize(r)) as ErrorRecord],
]

describe('the error catalogue', () => {
  it('lists every MolotofError class that errors.ts exports, each under its own code', () => {
    const exported = Object.values(errors).filter(
      (v): v is typeof MolotofError => typeof v === 'function' && v.prototype instanceof MolotofError,
    )
    expect(new Set(CATALOGUE)).toEqual(new Set(exported))
    const codes = CATALOGUE.map((c) => c.code)
    expect(new Set(codes).size).toBe(codes.length)
    for (const c of codes) expect(c).toMatch(/^E_[A-Z_]+$/)
    // Every class has a sample below, and each sample carries its class's code.
    expect(new Set(samples.map((s) => s.constructor))).toEqual(new Set(CATALOGUE))
    for (const s of samples) expect(s.code).toBe((s.constructor as (typeof CATALOGUE)[number]).code)
  })

  it('says what each error means for a script, and whether a restart can help', () => {
    const meaning = Object.fromEntries(samples.map((s) => [s.name, `${s.exit}${s.restartable ? ', restart' : ''}`]))
    expect(meaning).toEqual({
      ConfigError: 'bad-input',
      PartitionError: 'bad-input',
      ProgramLoadError: 'bad-input',
      RankFailedError: 'failed, restart',
      CheckpointError: 'failed',
      CheckpointCorruptError: 'failed, restart',
      CheckpointMismatchError: 'bad-input',
      SettingsMismatchError: 'bad-input',
      ReplayDivergenceError: 'failed',
      RestartBudgetExhaustedError: 'failed',
      RunStoppedError: 'failed',
      PreemptedError: 'preempted',
      RunInterruptedError: 'preempted',
      CommunicationError: 'failed, restart',
      InternalError: 'failed, restart',
      CodeChangedError: 'bad-input',
      DirectoryLockedError: 'bad-input',
      EarlierRunError: 'bad-input',
      CheckpointDirectoryError: 'bad-input',
      NothingToResumeError: 'bad-input',
      NodeLostError: 'node-lost',
      NodeMismatchError: 'bad-input',
    })
    // A class outside the catalogue (e.g. from a newer framework copy) is a failure a restart may fix.
    expect(new MolotofError('E_NEW', 'x').exit).toBe('failed')
  })

  for (const [how, cross] of crossings) {
    it(`an error rebuilt after ${how} is the same class with the same code, message and fields`, () => {
      for (const e of samples) {
        const back = reviveError(cross(errorRecord(e)))
        expect(back).toBeInstanceOf(e.constructor)
        expect(back).toBeInstanceOf(MolotofError)
        expect(back.name).toBe(e.name)
        expect(back.message).toBe(e.message)
        expect(back.stack).toBe(e.stack)
        expect({ ...back }).toEqual({ ...e })
      }
    })
  }

  it('describes a settings difference whose value is an object with a key named toString', () => {
    // Found by the property below: String(v) throws for such plain data.
    const e = new SettingsMismatchError([{ name: 'shape', old: null, new: { toString: {} } }])
    expect(e.message).toContain('{"toString":{}}')
  })

  it('keeps any settings difference that is plain data (property)', () => {
    const json = fc.jsonValue()
    fc.assert(
      fc.property(fc.array(fc.record({ name: fc.string(), old: json, new: json }), { maxLength: 4 }), (differences) => {
        const back = reviveError(deserialize(serialize(errorRecord(new SettingsMismatchError(differences)))) as ErrorRecord)
        expect(back).toBeInstanceOf(SettingsMismatchError)
        expect((back as SettingsMismatchError).differences).toEqual(differences)
      }),
      { numRuns: 50 },
    )
  })

  it('leaves out fields that cannot cross, and rebuilds errors outside the catalogue as what they are', () => {
    const withHandle = Object.assign(new ConfigError('x'), { callback: () => 1 })
    const rec = errorRecord(withHandle)
    expect(rec.fields).not.toHaveProperty('callback')
    expect(() => structuredClone(rec)).not.toThrow()

    const plain = reviveError(structuredClone(errorRecord(new TypeError('not a function'))))
    expect(plain).not.toBeInstanceOf(MolotofError)
    expect(plain).toBeInstanceOf(Error)
    expect(`${plain.name}: ${plain.message}`).toBe('TypeError: not a function')

    const unknown = reviveError({ name: 'LockedError', code: 'E_LOCKED', message: 'held by pid 7', stack: undefined, fields: { pid: 7 } })
    expect(unknown).toBeInstanceOf(MolotofError)
    expect(unknown).toMatchObject({ code: 'E_LOCKED', name: 'LockedError', pid: 7 })

    expect(reviveError(errorRecord('a string was thrown')).message).toBe('a string was thrown')
  })

  it('leaves the stack out when asked, without reading it (formatting it can cost milliseconds)', () => {
    const e = new ConfigError('stopped')
    let read = false
    Object.defineProperty(e, 'stack', {
      get: () => {
        read = true
        return 'formatted'
      },
    })
    const rec = errorRecord(e, false)
    expect(read).toBe(false)
    expect(rec.stack).toBeUndefined()
    expect(reviveError(rec)).toBeInstanceOf(ConfigError)
    expect(errorRecord(e).stack).toBe('formatted')
    expect(read).toBe(true)
  })
})
