import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ConfigError } from '../../src/errors.js'
import { checkDirTemplate, detectLauncher, expandDir, matchingDirectories, parseHostPort } from '../../src/runtime/cluster-env.js'

describe('detectLauncher', () => {
  it('finds nothing without a launcher: one host, as always', () => {
    expect(detectLauncher({ PATH: '/usr/bin', HOME: '/root' })).toBeUndefined()
  })

  it.each([
    ['openmpi', { OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_SIZE: '3', PMIX_RANK: '1', OMPI_MCA_ess_base_jobid: '42' }, 1, 3],
    ['pmix', { PMIX_RANK: '2', SLURM_NTASKS: '4', SLURM_PROCID: '2' }, 2, 4],
    ['pmi', { PMI_RANK: '0', PMI_SIZE: '2' }, 0, 2],
    ['flux', { FLUX_TASK_RANK: '3', FLUX_JOB_SIZE: '5', PMI_RANK: '3', PMI_SIZE: '5' }, 3, 5],
    ['slurm', { SLURM_PROCID: '7', SLURM_NTASKS: '8', SLURM_JOB_ID: '99', SLURM_STEP_ID: '0' }, 7, 8],
  ] as const)('reads %s variables', (launcher, env, node, nodes) => {
    const place = detectLauncher(env)
    expect(place).toMatchObject({ launcher, node, nodes })
  })

  it('prefers mpirun over the Slurm job it runs in (the job variables leak into mpirun processes)', () => {
    const place = detectLauncher({ OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_SIZE: '2', SLURM_PROCID: '0', SLURM_NTASKS: '16', SLURM_JOB_ID: '5' })
    expect(place).toMatchObject({ launcher: 'openmpi', node: 1, nodes: 2 })
  })

  it('gives every node of one launch the same launch id, and another launch another', () => {
    const a = detectLauncher({ SLURM_PROCID: '0', SLURM_NTASKS: '2', SLURM_JOB_ID: '99', SLURM_STEP_ID: '3' })
    const b = detectLauncher({ SLURM_PROCID: '1', SLURM_NTASKS: '2', SLURM_JOB_ID: '99', SLURM_STEP_ID: '3' })
    const c = detectLauncher({ SLURM_PROCID: '1', SLURM_NTASKS: '2', SLURM_JOB_ID: '99', SLURM_STEP_ID: '4' })
    expect(a?.launchId).toBe(b?.launchId)
    expect(c?.launchId).not.toBe(a?.launchId)
  })

  it.each([
    [{ OMPI_COMM_WORLD_RANK: '2', OMPI_COMM_WORLD_SIZE: '2' }, /OMPI_COMM_WORLD_RANK=2 but OMPI_COMM_WORLD_SIZE=2/],
    [{ PMI_RANK: '1' }, /PMI_RANK=1 but none of PMI_SIZE/],
    [{ SLURM_PROCID: 'x', SLURM_NTASKS: '2' }, /SLURM_PROCID="x" is not a non-negative integer/],
    [{ OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_SIZE: '2', PMIX_RANK: '0' }, /OMPI_COMM_WORLD_RANK=1 but PMIX_RANK=0/],
    [{ SLURM_PROCID: '0', SLURM_NTASKS: '0' }, /SLURM_PROCID=0 but SLURM_NTASKS=0/],
  ])('refuses an inconsistent launcher environment %j', (env, message) => {
    expect(() => detectLauncher(env)).toThrow(ConfigError)
    expect(() => detectLauncher(env)).toThrow(message)
  })
})

describe('parseHostPort', () => {
  it('reads host:port and [v6]:port', () => {
    expect(parseHostPort('127.0.0.1:29500', 'x')).toEqual({ host: '127.0.0.1', port: 29500 })
    expect(parseHostPort('node001:1', 'x')).toEqual({ host: 'node001', port: 1 })
    expect(parseHostPort('[::1]:65535', 'x')).toEqual({ host: '::1', port: 65535 })
  })
  it.each(['127.0.0.1', ':29500', 'host:0', 'host:65536', 'host:port', 'a b:1'])('refuses %j naming the flag', (text) => {
    expect(() => parseHostPort(text, '--rendezvous')).toThrow(/--rendezvous needs host:port/)
  })
})

describe('checkpoint directory templates', () => {
  it('knows {node} and {rank} and refuses other placeholders', () => {
    expect(checkDirTemplate('/local/ckpt-{node}')).toEqual({ node: true, rank: false })
    expect(checkDirTemplate('/x/{rank}/{node}')).toEqual({ node: true, rank: true })
    expect(checkDirTemplate('/plain')).toEqual({ node: false, rank: false })
    expect(() => checkDirTemplate('/x/{host}')).toThrow(/unknown placeholder \{host\}/)
  })
  it('fills every occurrence', () => {
    expect(expandDir('/l/{node}/n{node}-r{rank}', 2, 5)).toBe('/l/2/n2-r5')
  })
  it('finds every directory on this host a template matches, placeholders in any part of the path', () => {
    const root = mkdtempSync(join(tmpdir(), 'molotof-templates-'))
    try {
      for (const d of ['ckpt-0', 'ckpt-1', 'ckpt-12', 'ckpt-x', 'ckpt-', 'other-1', 'n0/r0', 'n0/r1', 'n3/r5', 'n3/s5', 'nx/r0']) mkdirSync(join(root, d), { recursive: true })
      writeFileSync(join(root, 'ckpt-7'), 'a file, not a directory')
      expect(matchingDirectories(join(root, 'ckpt-{node}'))).toEqual(['ckpt-0', 'ckpt-1', 'ckpt-12'].map((d) => join(root, d)))
      expect(matchingDirectories(join(root, 'n{node}', 'r{rank}'))).toEqual(['n0/r0', 'n0/r1', 'n3/r5'].map((d) => join(root, d)))
      expect(matchingDirectories(join(root, 'gone-{node}'))).toEqual([])
      // Without a placeholder: the directory itself, present or not.
      expect(matchingDirectories(join(root, 'plain'))).toEqual([join(root, 'plain')])
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})
