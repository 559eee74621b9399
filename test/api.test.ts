import { readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

// The public API as a newcomer meets it: the names src/index.ts exports (and
// src/testing.ts, the failure injection of tests, as 'molotof/testing'), their
// doc comments, and the ```ts examples of README.md and of those comments,
// type-checked against src/index.ts as 'molotof' (one in-memory program).

const ROOT = resolve(__dirname, '..')
const INDEX = join(ROOT, 'src/index.ts')
const TESTING = join(ROOT, 'src/testing.ts')

/**
 * At most this many runtime names (values: classes, functions, constants) in
 * the main entry; types do not count. 31 since CountedKernel (the counted loop most programs
 * wrote out by hand); 32 since RankGrid (the rank grid every stencil program
 * on a 2-D or 3-D grid of ranks wrote out); raise it only for a name users need as much.
 */
const MAX_RUNTIME_NAMES = 32

/**
 * Free names a doc-comment example may use without declaring them, so that a
 * short example shows the call, not the set-up: README's `Plate` (a Domain2D:
 * an n×n plate in a one-cell boundary, strips of rows) and `Relax` (its
 * kernel), and `ctx`, `sk`, `grid`, `n`, `checkpoint` as a program's main has
 * them (declared globally: a block's own declarations shadow them). Blocks that
 * import nothing from 'molotof' also get every public name imported. A README
 * block may be preceded by a `<!-- ts-context … -->` comment, the code it
 * assumes (hidden on the rendered page); `$EXAMPLE` in it marks where the block
 * goes, else the block follows it.
 */
const PRELUDE = `import { CalcKernel, Domain2D, DomainDesc, splitPoint, type FaultToleranceConfig, type RankContext, type Skeleton } from 'molotof'
class PlateDomain extends Domain2D {
  constructor(readonly n: number) { super() }
  possessed(rank: number, size: number) {
    return DomainDesc.of([1 + splitPoint(this.n, size, rank), 1], [1 + splitPoint(this.n, size, rank + 1), this.n + 1])
  }
  needed(rank: number, size: number) { return this.possessed(rank, size).expand(1) }
}
class RelaxKernel extends CalcKernel<number, PlateDomain> {
  constructor(readonly sweeps: number) { super() }
  begin() { return 0 }
  end(it: number) { return it >= this.sweeps }
  next(it: number) { return it + 1 }
  calculate(_read: PlateDomain, _write: PlateDomain) {}
}
declare global {
  type Plate = PlateDomain
  var Plate: typeof PlateDomain
  type Relax = RelaxKernel
  var Relax: typeof RelaxKernel
  /** What a program's main receives (a program with options n and iterations). */
  const ctx: RankContext<{ readonly n: number; readonly iterations: number }>
  /** ctx.skeleton(new Relax(iterations), [new Plate(n), new Plate(n)]) */
  const sk: Skeleton<number, Plate>
  /** The domain sk.run() returned. */
  const grid: Plate
  const n: number
  /** A run's checkpoint configuration. */
  const checkpoint: FaultToleranceConfig
}
`

interface Example {
  /** Where it comes from, for the failure message: README.md:120, src/domains/desc.ts (DomainDesc). */
  where: string
  /** The file it is checked as: beside its source, so relative imports resolve as they would there. */
  file: string
  code: string
}

function compilerOptions(): ts.CompilerOptions {
  const cfg = ts.readConfigFile(join(ROOT, 'tsconfig.json'), ts.sys.readFile)
  const parsed = ts.parseJsonConfigFileContent(cfg.config, ts.sys, ROOT)
  // Examples may leave names unused (`const sk = …` to show a call).
  return { ...parsed.options, noUnusedLocals: false, noUnusedParameters: false, noEmit: true, incremental: false }
}

function programOf(extra: Map<string, string>, oldProgram?: ts.Program): ts.Program {
  const options = compilerOptions()
  const host = ts.createCompilerHost(options)
  const getSourceFile = host.getSourceFile.bind(host)
  host.getSourceFile = (name, lang, ...rest) => {
    const text = extra.get(resolve(name))
    return text !== undefined ? ts.createSourceFile(name, text, lang, true) : getSourceFile(name, lang, ...rest)
  }
  const fileExists = host.fileExists.bind(host)
  host.fileExists = (name) => extra.has(resolve(name)) || fileExists(name)
  const readFile = host.readFile.bind(host)
  host.readFile = (name) => extra.get(resolve(name)) ?? readFile(name)
  // The old program's parsed files are reused: only the examples are new.
  return ts.createProgram({ rootNames: [INDEX, TESTING, ...extra.keys()], options, host, oldProgram })
}

/** The ```ts blocks of a markdown text, with the line each starts at. */
function tsBlocks(text: string): Array<{ line: number; code: string; context: string | undefined }> {
  const found: Array<{ line: number; code: string; context: string | undefined }> = []
  const re = /(?:<!-- ts-context\n([\s\S]*?)-->\n(?:<!--[^\n]*-->\n)*)?```ts\n([\s\S]*?)```/g
  for (let m = re.exec(text); m; m = re.exec(text)) {
    found.push({ line: text.slice(0, m.index).split('\n').length, code: m[2], context: m[1] })
  }
  return found
}

/** The public names: each export of an entry (src/index.ts) with its declarations, and whether it is a runtime value. */
function publicNames(program: ts.Program, entry = INDEX): Array<{ name: string; runtime: boolean; declarations: ts.Declaration[] }> {
  const checker = program.getTypeChecker()
  const index = program.getSourceFile(entry)!
  const exports = checker.getExportsOfModule(checker.getSymbolAtLocation(index)!)
  return exports.map((s) => {
    const target = s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s
    // `export type { X }` of a class exports only its type.
    const typeOnly = s.declarations?.some((d) => ts.isExportSpecifier(d) && (d.isTypeOnly || d.parent.parent.isTypeOnly)) ?? false
    return { name: s.name, runtime: !typeOnly && (target.flags & ts.SymbolFlags.Value) !== 0, declarations: target.declarations ?? [] }
  })
}

/** The JSDoc comments of a declaration and, for classes and interfaces, of their members. */
function docsOf(d: ts.Declaration): string[] {
  const texts: string[] = []
  const take = (n: ts.Node) => {
    for (const j of ts.getJSDocCommentsAndTags(n)) if (ts.isJSDoc(j)) texts.push(j.getText())
  }
  const node = ts.isVariableDeclaration(d) ? d.parent.parent : d
  take(node)
  if (ts.isClassDeclaration(d) || ts.isInterfaceDeclaration(d)) for (const m of d.members) take(m)
  return texts
}

/** A doc comment's text without the leading ` * `. */
function uncomment(jsdoc: string): string {
  return jsdoc
    .replace(/^\/\*\*|\*\/$/g, '')
    .split('\n')
    .map((l) => l.replace(/^\s*\* ?/, ''))
    .join('\n')
}

const base = programOf(new Map())
const names = publicNames(base)
const runtimeNames = names.filter((n) => n.runtime).map((n) => n.name)
const testingNames = publicNames(base, TESTING)
/** Both entries: what a user may import. */
const allNames = [...names, ...testingNames]

describe('the public API (src/index.ts)', () => {
  it(`exports at most ${MAX_RUNTIME_NAMES} runtime names, none of them internal plumbing`, () => {
    expect(runtimeNames.length, runtimeNames.join(', ')).toBeLessThanOrEqual(MAX_RUNTIME_NAMES)
    // Names the issue tracker found exported by mistake; `describe` also collided with vitest's.
    for (const internal of ['Router', 'RoutingPlan', 'partitionAt', 'validatePartition', 'samePartition', 'localGroup', 'parseOptions', 'formatOptions', 'settingsOf', 'isProgram', 'parseInjection', 'describePolicy', 'describe', 'CheckpointStore']) {
      expect(runtimeNames).not.toContain(internal)
    }
  })

  it('keeps failure injection in molotof/testing and the supervisor\'s bookkeeping out of the main entry', () => {
    const main = names.map((n) => n.name)
    for (const internal of ['Injection', 'RandomInjection', 'parseInjection', 'RanksOrigin', 'ResumedFigures', 'BufferAllocator', 'InternalError']) {
      expect(main).not.toContain(internal)
    }
    expect(testingNames.map((n) => `${n.name}${n.runtime ? '()' : ''}`).sort()).toEqual(['Injection', 'RandomInjection', 'parseInjection()'])
  })

  it('exports every type its public signatures use', () => {
    const checker = base.getTypeChecker()
    const exported = new Set(allNames.flatMap((n) => n.declarations.map((d) => d.getSourceFile().fileName + '#' + (ts.getNameOfDeclaration(d)?.getText() ?? ''))))
    const missing = new Set<string>()
    const visit = (node: ts.Node, owner: string): void => {
      // Private and protected members and function bodies are not part of a signature.
      if (ts.canHaveModifiers(node) && ts.getModifiers(node)?.some((m) => m.kind === ts.SyntaxKind.PrivateKeyword || m.kind === ts.SyntaxKind.ProtectedKeyword)) return
      if (ts.isPrivateIdentifier((node as ts.NamedDeclaration).name ?? node)) return
      // A member tagged @internal is runtime plumbing (TypeDoc leaves it out too).
      if (ts.getJSDocTags(node).some((t) => t.tagName.text === 'internal')) return
      if (ts.isBlock(node) || (ts.isPropertyDeclaration(node) && !node.type)) return
      if (ts.isTypeReferenceNode(node) || ts.isExpressionWithTypeArguments(node)) {
        const at = ts.isTypeReferenceNode(node) ? node.typeName : node.expression
        let sym = checker.getSymbolAtLocation(at)
        if (sym && sym.flags & ts.SymbolFlags.Alias) sym = checker.getAliasedSymbol(sym)
        const decl = sym?.declarations?.[0]
        // A conditional helper type (how an option's spec gives its value's type) is computed, never written by a user.
        const helper = decl && ts.isTypeAliasDeclaration(decl) && ts.isConditionalTypeNode(decl.type)
        if (decl && !helper && decl.getSourceFile().fileName.startsWith(join(ROOT, 'src')) && !(sym!.flags & ts.SymbolFlags.TypeParameter)) {
          const key = decl.getSourceFile().fileName + '#' + (ts.getNameOfDeclaration(decl)?.getText() ?? '')
          if (!exported.has(key)) missing.add(`${sym!.name} (used by ${owner}, declared in ${relative(ROOT, decl.getSourceFile().fileName)})`)
        }
      }
      ts.forEachChild(node, (c) => visit(c, owner))
    }
    for (const n of allNames) for (const d of n.declarations) visit(ts.isVariableDeclaration(d) ? (d.type ?? d) : d, n.name)
    expect([...missing]).toEqual([])
  })

  it('opens every public class and function with a doc comment that shows its use in a ```ts example', () => {
    const undocumented: string[] = []
    for (const n of allNames.filter((x) => x.runtime)) {
      const isError = n.name.endsWith('Error') && n.name !== 'MolotofError'
      const own = n.declarations.flatMap((d) => ts.getJSDocCommentsAndTags(ts.isVariableDeclaration(d) ? d.parent.parent : d).filter(ts.isJSDoc))
      // An error subclass says when it is thrown; MolotofError shows how to catch them all.
      const ok = own.length > 0 && (isError || own.some((j) => j.getText().includes('```ts')))
      if (!ok) undocumented.push(n.name)
    }
    expect(undocumented).toEqual([])
  })

  it('has ```ts examples in README.md and in its doc comments that type-check against molotof', () => {
    const examples: Example[] = []
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
    for (const b of tsBlocks(readme)) {
      const code = b.context ? (b.context.includes('$EXAMPLE') ? b.context.replace('$EXAMPLE', b.code) : b.context + b.code) : b.code
      examples.push({ where: `README.md:${b.line}`, file: join(ROOT, `readme-example-${b.line}.ts`), code })
    }
    const seen = new Set<string>()
    for (const n of allNames) {
      for (const d of n.declarations) {
        for (const doc of docsOf(d)) {
          if (seen.has(doc)) continue
          seen.add(doc)
          for (const b of tsBlocks(uncomment(doc))) {
            const src = d.getSourceFile().fileName
            examples.push({ where: `${relative(ROOT, src)} (${n.name})`, file: join(dirname(src), `doc-example-${examples.length}.ts`), code: b.code })
          }
        }
      }
    }
    // The testing entry's own comment (its first statement's) shows how to import it.
    const testingEntry = base.getSourceFile(TESTING)!
    for (const j of ts.getJSDocCommentsAndTags(testingEntry.statements[0]).filter(ts.isJSDoc)) {
      for (const b of tsBlocks(uncomment(j.getText()))) examples.push({ where: 'src/testing.ts', file: join(ROOT, 'src/doc-example-testing.ts'), code: b.code })
    }
    expect(examples.length).toBeGreaterThan(names.filter((n) => n.runtime).length / 2)

    const listed = (ns: typeof names) => ns.map((n) => (n.runtime ? n.name : `type ${n.name}`)).join(', ')
    const all = `import { ${listed(names)} } from 'molotof'\nimport { ${listed(testingNames)} } from 'molotof/testing'\n`
    const files = new Map<string, string>([[join(ROOT, 'test/doc-prelude.ts'), PRELUDE]])
    for (const e of examples) {
      const imports = /from 'molotof(\/testing)?'/.test(e.code) ? '' : all
      files.set(e.file, `${imports}${e.code}\nexport {}\n`)
    }
    const program = programOf(files, base)
    const failures: string[] = []
    for (const e of examples) {
      const sf = program.getSourceFile(e.file)!
      const diags = [...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf)]
      // Auto-imported names an example declares itself are fine: its own declaration wins.
      const real = diags.filter((d) => d.code !== 2440)
      for (const d of real) failures.push(`${e.where}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}\n  in: ${sf.text.slice(d.start ?? 0, (d.start ?? 0) + 60).split('\n')[0]}`)
    }
    expect(failures).toEqual([])
  }, 60_000)
})
