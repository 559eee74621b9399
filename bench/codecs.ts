/**
 * The choice of `--compress`'s codec: ratio and speed per core (CPU time of
 * one thread, so a loaded machine does not skew it) of each candidate, with
 * and without the byte shuffle, on the heavy payloads of the rank files given
 * (a Jacobi grid mid-run, swing's value function) and on random doubles (the
 * worst case). node:zlib's candidates always; fflate, lz4-napi and zstd-napi
 * when they can be loaded (they are not dependencies of molotof: install
 * them in a scratch copy to compare).
 *
 *   npm run bench:codecs -- [--files ckpt/ckpt-00000001/rank-0.mlf,…] [--repeats 5]
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { parseArgs } from 'node:util'
import { brotliCompressSync, brotliDecompressSync, constants, deflateRawSync, inflateRawSync } from 'node:zlib'
import { benchArgs } from './args.js'
import { openRecord } from './record.js'
import { decodeRankFile } from '../src/checkpoint/format/rank-file.js'
import { shuffleBytes, unshuffleBytes } from '../src/checkpoint/store/io-worker/payload-codec.mjs'
import { summary, table } from '../src/bench/stats.js'

const USAGE = 'npm run bench:codecs -- [--files a.mlf,b.mlf] [--repeats 5]'
const { values } = benchArgs(USAGE, () => parseArgs({ options: { files: { type: 'string', default: '' }, repeats: { type: 'string', default: '5' } } }))
const repeats = Number(values.repeats)
const record = openRecord('codecs', 'Compression candidates on float64 checkpoint payloads')

type Codec = [compress: (b: Uint8Array) => Uint8Array, decompress: (c: Uint8Array) => Uint8Array]
const brotli = (quality: number): Codec => [
  (b) => brotliCompressSync(b, { params: { [constants.BROTLI_PARAM_QUALITY]: quality, [constants.BROTLI_PARAM_SIZE_HINT]: b.byteLength } }),
  (c) => brotliDecompressSync(c),
]
const codecs: Record<string, Codec> = {
  'zlib deflate-1': [(b) => deflateRawSync(b, { level: 1 }), (c) => inflateRawSync(c)],
  'zlib brotli-0': brotli(0),
  'zlib brotli-1': brotli(1),
}
// Optional candidates, loaded when present (untyped: they are not dependencies).
const require = createRequire(import.meta.url)
const optional = (name: string, add: (m: Record<string, (...a: unknown[]) => Uint8Array>) => void) => {
  try {
    add(require(name) as Record<string, (...a: unknown[]) => Uint8Array>)
  } catch {
    // Not installed (or its native part not built): compared only where it is.
    console.log(`(${name} not available: left out)`)
  }
}
optional('fflate', (m) => (codecs['fflate deflate-1'] = [(b) => m.deflateSync(b, { level: 1 }), (c) => m.inflateSync(c)]))
optional('lz4-napi', (m) => (codecs['lz4-napi'] = [(b) => m.compressSync(b), (c) => m.uncompressSync(c)]))
optional('zstd-napi', (m) => (codecs['zstd-napi 1'] = [(b) => m.compress(b, { compressionLevel: 1 }), (c) => m.decompress(c)]))

const sets: [string, Uint8Array][] = []
for (const file of values.files!.split(',').filter(Boolean)) {
  const f = decodeRankFile(new Uint8Array(readFileSync(file)), file)
  const heavy = [...f.entries.values()].filter((e) => e.kind === 'heavy' && e.dtype === 'float64')
  const all = new Uint8Array(heavy.reduce((n, e) => n + e.bytes.byteLength, 0))
  let at = 0
  for (const e of heavy) (all.set(e.bytes, at), (at += e.bytes.byteLength))
  sets.push([`${file} (step ${f.header.step})`, all])
}
sets.push(['random doubles', new Uint8Array(new Float64Array(2 ** 21).map(() => Math.random()).buffer)])

/** Median CPU time (ms) of `f`, and its last result. */
function cpu<T>(f: () => T): [T, number] {
  const ms: number[] = []
  let r!: T
  for (let i = 0; i < repeats; i++) {
    const t = process.cpuUsage()
    r = f()
    const d = process.cpuUsage(t)
    ms.push((d.user + d.system) / 1000)
  }
  return [r, summary(ms).median]
}

const rows: string[][] = []
for (const [name, raw] of sets) {
  const mb = raw.byteLength / 1e6
  for (const [cname, [enc, dec]] of Object.entries(codecs)) {
    for (const shuffle of [false, true]) {
      const [stored, cms] = cpu(() => enc(shuffle ? shuffleBytes(raw, 8) : raw))
      const [back, dms] = cpu(() => {
        const d = dec(stored)
        return shuffle ? unshuffleBytes(d, 8, new Uint8Array(d.byteLength)) : d
      })
      if (Buffer.compare(Buffer.from(back), Buffer.from(raw)) !== 0) throw new Error(`${cname} does not give ${name} back`)
      const ratio = raw.byteLength / stored.byteLength
      const key = `${name}: ${cname}${shuffle ? ' + shuffle' : ''}`
      record.figure(`${key}: raw / stored`, ratio, '×')
      record.figure(`${key}: compress`, (mb / cms) * 1000, 'MB/s')
      record.figure(`${key}: decompress`, (mb / dms) * 1000, 'MB/s')
      rows.push([name, cname, shuffle ? 'yes' : 'no', ratio.toFixed(2), ((mb / cms) * 1000).toFixed(0), ((mb / dms) * 1000).toFixed(0)])
    }
  }
}
console.log(table(['payload', 'codec', 'shuffle', 'raw / stored', 'compress MB/s', 'decompress MB/s'], rows))
record.save()
