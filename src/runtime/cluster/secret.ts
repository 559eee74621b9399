import { randomBytes } from 'node:crypto'
import { linkSync, mkdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { ConfigError } from '../../errors.js'
import { MIN_SECRET_BYTES } from '../transport/auth.js'

/** The run's secret, as the batch script exports it on every node. */
export const SECRET_ENV = 'MOLOTOF_SECRET'
/** The secret file molotof keeps in `--shared-dir` when MOLOTOF_SECRET is not set (mode 0600). */
export const SECRET_FILE = 'molotof-secret'
/** A TCP rank's key, from its supervisor (hex; the environment, never the command line; process-boot.mjs takes it out). */
export const RANK_KEY_ENV = 'MOLOTOF_RANK_KEY'

/** The secret a cluster run's connections prove knowledge of, and where it came from (for messages). */
export interface ClusterSecret {
  key: Buffer
  source: string
}

/**
 * The secret of a cluster run of `nodes` nodes: MOLOTOF_SECRET when set,
 * else a random one on a single node (no other node needs to know it), else
 * the file `molotof-secret` in `sharedDir` (created when absent; see
 * `sharedSecretFile`), else none: undefined when `insecure`
 * (--insecure-cluster), else refused, saying how to give one. Refused rather
 * than warned: a warning in a batch log is read after a co-tenant's forged
 * message has ended or corrupted the run.
 *
 * ```ts
 * const secret = clusterSecret(process.env, 4, '/shared/run', false)   // { key, source: '/shared/run/molotof-secret' }
 * ```
 */
export function clusterSecret(env: Readonly<Record<string, string | undefined>>, nodes: number, sharedDir: string | undefined, insecure: boolean): ClusterSecret | undefined {
  const fromEnv = env[SECRET_ENV]
  if (fromEnv !== undefined && fromEnv !== '') {
    const key = Buffer.from(fromEnv, 'utf8')
    if (key.length < MIN_SECRET_BYTES) {
      throw new ConfigError(`$${SECRET_ENV} is ${key.length} bytes long: a secret needs ${MIN_SECRET_BYTES} or more (e.g. export ${SECRET_ENV}=$(openssl rand -hex 32))`)
    }
    return { key, source: `$${SECRET_ENV}` }
  }
  if (nodes === 1) return { key: randomBytes(32), source: 'drawn at random (one node)' }
  if (sharedDir !== undefined) return { key: sharedSecretFile(sharedDir), source: join(sharedDir, SECRET_FILE) }
  if (insecure) return undefined
  throw new ConfigError(
    `a cluster run needs a secret shared by its nodes, so that only its own processes can connect to it: ` +
      `export ${SECRET_ENV}=$(openssl rand -hex 32) in the batch script (passed to every node: mpirun -x ${SECRET_ENV}), ` +
      `or give --shared-dir DIR (molotof keeps a mode-0600 secret file there), ` +
      `or --insecure-cluster to run without one (any process that reaches the nodes' ports could then join the run)`,
  )
}

/**
 * The secret kept in `<dir>/molotof-secret`: read it, or create it when
 * absent. Every node may be first: each writes a candidate of its own (mode
 * 0600) and hard-links it to the final name, which succeeds for one node only
 * and never shows a half-written file; the others read the winner's. The file
 * then stays for later runs (each handshake uses fresh nonces, so reusing the
 * secret gives nothing away). A file that others may read or write is refused.
 *
 * ```ts
 * const key = sharedSecretFile('/shared/run')
 * ```
 */
export function sharedSecretFile(dir: string): Buffer {
  const file = join(dir, SECRET_FILE)
  const candidate = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`
  try {
    statSync(file)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new ConfigError(`cannot read the secret file ${file}: ${(e as Error).message}`)
    try {
      mkdirSync(dir, { recursive: true })
      writeFileSync(candidate, randomBytes(32).toString('hex') + '\n', { mode: 0o600, flag: 'wx' })
      linkSync(candidate, file)
    } catch (e2) {
      // EEXIST: another node linked its candidate first; that one is the secret.
      if ((e2 as NodeJS.ErrnoException).code !== 'EEXIST') throw new ConfigError(`cannot create the secret file ${file}: ${(e2 as Error).message}`)
    } finally {
      try {
        unlinkSync(candidate)
      } catch {
        // Never written (the directory refused it): nothing to remove.
      }
    }
  }
  let mode: number
  let text: string
  try {
    mode = statSync(file).mode & 0o777
    text = readFileSync(file, 'utf8').trim()
  } catch (e) {
    throw new ConfigError(`cannot read the secret file ${file}: ${(e as Error).message}`)
  }
  if ((mode & 0o077) !== 0) {
    throw new ConfigError(`the secret file ${file} may be read or written by others (mode 0${mode.toString(8)}): chmod 600 ${file}, or remove it to have a new one made`)
  }
  const key = Buffer.from(text, 'utf8')
  if (key.length < MIN_SECRET_BYTES) throw new ConfigError(`the secret file ${file} holds ${key.length} bytes: a secret needs ${MIN_SECRET_BYTES} or more (remove it to have a new one made)`)
  return key
}

/** The environment of a TCP rank process: its supervisor's, with the rank key in place of the launcher's secret. */
export function rankEnvironment(key: Uint8Array | undefined, env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...env }
  delete out[SECRET_ENV]
  delete out[RANK_KEY_ENV]
  if (key) out[RANK_KEY_ENV] = Buffer.from(key).toString('hex')
  return out
}
