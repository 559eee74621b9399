import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

// The layers of src/, lowest first, as in docs/ARCHITECTURE.md ("Layers"). A
// module may import modules of its own layer or of lower layers, never of a
// higher one; type-only imports count like the others. A layer is a file or a
// folder of src/; a file belongs to the longest layer path that holds it, so
// `checkpoint` alone means the files directly in src/checkpoint (its contracts
// with skeletons and the runtime), between its sub-folders.
const LAYERS = [
  'util',
  'errors.ts',
  'domains',
  'routing',
  // How a compressed payload is stored: a plain-JS leaf beside the checkpoint
  // I/O thread (which compresses with it), read by the rank-file format.
  'checkpoint/store/io-worker/payload-codec.mjs',
  'checkpoint/format',
  'checkpoint/light',
  'checkpoint/policy',
  'checkpoint/store',
  'checkpoint',
  'checkpoint/recovery',
  'checkpoint/redundancy',
  'checkpoint/coordination',
  // The phase list and status-slot layout: a plain-JS leaf beside the boot
  // files (which run before tsx and must find it there), shared by skeletons.
  'runtime/boot/status-layout.mjs',
  'skeletons',
  // The rooms of runtime/, lowest first; the files directly in src/runtime are
  // the contracts between rooms (group, protocol, status slots, injections,
  // cluster environment, compiled program, where the boot files are).
  'runtime/boot',
  'runtime/transport',
  'runtime',
  'runtime/rank',
  'runtime/groups',
  'runtime/cluster',
  'runtime/launch',
  'bench',
  'cli',
  'index.ts',
  'testing.ts',
]

const SRC = resolve(__dirname, '../src')

/** Every relative import of a TypeScript or JavaScript module: static, type-only, `export … from`, dynamic `import()`, `import('…')` types. */
function importsOf(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, file.endsWith('.ts') ? ts.ScriptKind.TS : ts.ScriptKind.JS)
  const found: string[] = []
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push(node.moduleSpecifier.text)
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const arg = node.arguments[0]
      if (arg && ts.isStringLiteralLike(arg)) found.push(arg.text)
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push(node.argument.literal.text)
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      const e = node.moduleReference.expression
      if (ts.isStringLiteral(e)) found.push(e.text)
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found.filter((s) => s.startsWith('.'))
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name)
    if (e.isDirectory()) return sourceFiles(p)
    return /\.(ts|mts|mjs|js)$/.test(e.name) ? [p] : []
  })
}

/** The file an import names: `./x.js` is written for `./x.ts`. */
function resolveImport(from: string, spec: string): string | undefined {
  const target = resolve(dirname(from), spec)
  const candidates = [target, target.replace(/\.js$/, '.ts'), target.replace(/\.mjs$/, '.mts'), `${target}.ts`, join(target, 'index.ts')]
  return candidates.find((c) => existsSync(c) && !c.endsWith('/'))
}

/** The import graph of src/: file → files it imports (paths relative to src/). */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>()
  for (const file of sourceFiles(SRC)) {
    const targets = importsOf(file, readFileSync(file, 'utf8')).map((spec) => {
      const to = resolveImport(file, spec)
      if (!to) throw new Error(`${relative(SRC, file)}: import "${spec}" names no file`)
      return relative(SRC, to)
    })
    graph.set(relative(SRC, file), targets)
  }
  return graph
}

/** Index in LAYERS of the layer holding `file` (relative to src/). */
function layerOf(file: string, layers: readonly string[] = LAYERS): number {
  let best = -1
  layers.forEach((l, i) => {
    if ((file === l || file.startsWith(`${l}/`)) && (best < 0 || l.length > layers[best].length)) best = i
  })
  if (best < 0) throw new Error(`src/${file} belongs to no layer: add it to LAYERS here and to docs/ARCHITECTURE.md`)
  return best
}

/** Imports that go from a lower layer to a higher one, as "from → to" lines. */
function upwardImports(graph: ReadonlyMap<string, readonly string[]>, layers: readonly string[] = LAYERS): string[] {
  const out: string[] = []
  for (const [from, tos] of graph) {
    for (const to of tos) if (layerOf(to, layers) > layerOf(from, layers)) out.push(`${from} → ${to}`)
  }
  return out
}

/** The import circles: strongly connected components of more than one file, or a file importing itself (Tarjan). */
function importCircles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let counter = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const circles: string[][] = []
  const connect = (v: string): void => {
    index.set(v, counter)
    low.set(v, counter++)
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        connect(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = []
      let w: string
      do {
        w = stack.pop()!
        onStack.delete(w)
        component.push(w)
      } while (w !== v)
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) circles.push(component.sort())
    }
  }
  for (const v of graph.keys()) if (!index.has(v)) connect(v)
  return circles
}

describe('structure of src/', () => {
  const graph = importGraph()

  it('finds the imports of every kind (the checks below are not vacuous)', () => {
    const edges = [...graph.values()].reduce((n, tos) => n + tos.length, 0)
    expect(edges).toBeGreaterThan(150)
    // A plain-JS boot file, a type-only import and an export-from are all seen.
    expect(graph.get('runtime/boot/rank-boot.mjs')).toContain('runtime/boot/load-program.mjs')
    expect(graph.get('skeletons/runtime.ts')).toContain('checkpoint/skeleton-hooks.ts')
    expect(graph.get('index.ts')).toContain('errors.ts')
  })

  it('has no import circle, type-only imports included', () => {
    expect(importCircles(graph)).toEqual([])
  })

  it('imports only from its own layer or lower ones', () => {
    for (const file of graph.keys()) layerOf(file)
    expect(upwardImports(graph)).toEqual([])
  })

  it('starts threads from module files, not from code in a string (the type checker and the layers see their code)', () => {
    const evaluated = sourceFiles(SRC).filter((f) => /\beval:\s*true\b/.test(readFileSync(f, 'utf8')))
    expect(evaluated.map((f) => relative(SRC, f))).toEqual([])
    // The checkpoint I/O thread and the heartbeat thread, with the code they share.
    expect(graph.get('checkpoint/store/io-worker/thread.mjs')).toContain('checkpoint/store/io-worker/runs.mjs')
    expect(graph.get('checkpoint/store/staging.ts')).toContain('checkpoint/store/io-worker/runs.mjs')
    expect(graph.get('runtime/boot/heartbeat-thread.mjs')).toContain('runtime/boot/boot-heartbeat.mjs')
  })

  it('detects circles and upward imports in a small graph', () => {
    const g = new Map<string, string[]>([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['d.ts']],
      ['e.ts', ['a.ts']],
    ])
    expect(importCircles(g)).toEqual([['a.ts', 'b.ts', 'c.ts'], ['d.ts']])
    expect(upwardImports(new Map([['low/x.ts', ['high/y.ts']], ['high/y.ts', ['low/x.ts']]]), ['low', 'high'])).toEqual(['low/x.ts → high/y.ts'])
    // The longest layer path wins: root files of a folder sit between its sub-folders.
    const nested = ['c/base', 'c', 'c/top']
    expect(upwardImports(new Map([['c/x.ts', ['c/base/y.ts', 'c/top/z.ts']]]), nested)).toEqual(['c/x.ts → c/top/z.ts'])
    expect(importsOf('x.ts', "import type { A } from './a.js'\nexport { B } from './b.js'\nconst c = await import('./c.js')\ntype D = import('./d.js').D\nimport 'node:fs'")).toEqual([
      './a.js',
      './b.js',
      './c.js',
      './d.js',
    ])
  })
})
