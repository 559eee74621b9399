// Module resolution hook of a rank (registered by load-program.mjs): the
// program's `import ... from 'molotof'` resolves to the framework copy that
// started the rank, whatever the program's directory holds — another
// installed version, a tsconfig `paths` entry, or nothing at all.
let entry

export async function initialize(data) {
  entry = data.entry
}

export async function resolve(specifier, context, nextResolve) {
  // Passed on as a URL, so the loaders after this one (tsx) still load it.
  return nextResolve(specifier === 'molotof' ? entry : specifier, context)
}
