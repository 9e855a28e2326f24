// Layering of src/ (DESIGN.md, "Architecture: one engine, many primitives"; STYLE.md rule 4).
// Imports point down only: cli -> client/index -> primitives -> engine -> topology -> redis, with
// scripts/ (the runner and the generated script table) between topology and redis, and the root
// leaves (errors, keys, validate, owner, options) importable from every layer. The operator CLI
// (src/cli/) sits on top and uses the library as a user does. A rule about a folder that does
// not exist yet matches nothing until it does.
//
// Paths are relative to the directory the cruise runs in, so the same rules check the real
// tree (`npm run lint:layers`, run at the repository root) and the fixture tree of
// test/unit/layering.test.ts (run inside test/fixtures/layering).
//
// Type-only imports count as imports (`tsPreCompilationDeps`): a type reaching up a layer
// ties the lower layer to the upper one as much as a value does.

/**
 * The top of the library: may import anything, imported by nothing in src/ but the CLI. The
 * checks of LockClient's arguments (client-options.ts) are part of client.ts. The Redlock client
 * (src/redlock/) is a client of its own beside client.ts: it builds one engine per master and the
 * lock kind on each, so it sits at the top too.
 */
const TOP = '^src/((client|client-options|index)\\.ts$|redlock/)';
/** The operator CLI, above the library. */
const CLI = '^src/cli/';
/** The root leaves, which every layer may import. */
const LEAVES = '^src/(errors|keys|validate|owner|options)\\.ts$';
/** The engine's only door for the layers above it. */
const ENGINE_DOOR = '^src/engine/index\\.ts$';

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'cli-on-top',
      comment:
        'The operator CLI is built on the library, never the other way round: nothing else in ' +
        'src/ imports it, so the library and its bundles carry no CLI code.',
      severity: 'error',
      from: { path: '^src/', pathNot: CLI },
      to: { path: CLI },
    },
    {
      name: 'cli-public-api',
      comment:
        'The CLI uses the library as a user does, through index/client, plus the root leaves ' +
        '(keys for key names, validate for the name rules); reaching into the engine, a kind, ' +
        'topology, scripts or redis would tie it to internals a refactor may move.',
      severity: 'error',
      from: { path: CLI },
      to: { path: ['^src/engine/', '^src/primitives/', '^src/topology/', '^src/scripts/', '^src/redis/'] },
    },
    {
      name: 'engine-one-door',
      comment:
        'Outside src/engine/, the engine is imported through src/engine/index.ts only, type-only ' +
        'imports included: the kinds, Redlock and the top of the library see one surface, and ' +
        'the files behind it can move without touching them.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/engine/' },
      to: { path: '^src/engine/', pathNot: ENGINE_DOOR },
    },
    {
      name: 'engine-not-above',
      comment:
        'The engine is what every kind shares and names no kind: a primitive plugs into it ' +
        'through the driver interfaces in src/engine/, never the other way round.',
      severity: 'error',
      from: { path: '^src/engine/' },
      to: { path: ['^src/primitives/', TOP] },
    },
    {
      name: 'primitive-not-other-primitive',
      comment:
        'A kind never reaches into another kind ($1 is the kind of the importing file), so ' +
        'adding or removing one touches only its own folder. What two kinds share belongs in ' +
        'src/engine/; a file directly under src/primitives/ belongs to no kind and is refused too.',
      severity: 'error',
      from: { path: '^src/primitives/([^/]+)/' },
      to: { path: '^src/primitives/', pathNot: '^src/primitives/$1/' },
    },
    {
      name: 'primitive-not-above',
      comment:
        'The client builds primitives and index exports them; a primitive importing either ' +
        'would close a loop through the top of the tree.',
      severity: 'error',
      from: { path: '^src/primitives/' },
      to: { path: TOP },
    },
    {
      name: 'topology-not-above',
      comment:
        'Topology decides where commands go (standalone, cluster, replica sync, redlock); it ' +
        'serves the engine and knows nothing of waiting, holds or kinds.',
      severity: 'error',
      from: { path: '^src/topology/' },
      to: { path: ['^src/engine/', '^src/primitives/', TOP] },
    },
    {
      name: 'redis-only-redis',
      comment:
        'src/redis/ is the connection interface and one adapter per client library; it is ' +
        'the bottom layer and may import only other files in src/redis/ (and packages).',
      severity: 'error',
      from: { path: '^src/redis/' },
      to: { path: '^src/', pathNot: '^src/redis/' },
    },
    {
      name: 'scripts-not-above',
      comment:
        'The script runner and the generated script table sit below topology, which runs ' +
        'scripts through them: they may use src/redis/ and the root leaves, never the layers ' +
        'that call them.',
      severity: 'error',
      from: { path: '^src/scripts/' },
      to: { path: ['^src/engine/', '^src/primitives/', '^src/topology/', TOP] },
    },
    {
      name: 'leaf-not-above',
      comment:
        'errors, keys, validate, owner and options are imported from every layer; importing a ' +
        'primitive, the client or index back would make every layer depend on the top.',
      severity: 'error',
      from: { path: LEAVES },
      to: { path: ['^src/primitives/', TOP] },
    },
    {
      name: 'leaf-not-engine',
      comment:
        'The engine imports errors, keys, validate and options; those importing the engine, even ' +
        'a type, would be a cycle. owner.ts has no reason to either.',
      severity: 'error',
      from: { path: LEAVES },
      to: { path: '^src/engine/' },
    },
    {
      name: 'no-circular',
      comment:
        'An error, not a warning: a warning never fails the run, so it would go unread. The ' +
        'rules above already rule out cycles between layers; this one catches them inside a ' +
        'layer, type-only ones included: a type both sides need moves down (e.g. to ' +
        'src/engine/types.ts).',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'src-imports-resolve',
      comment:
        'A relative import that cannot be resolved is an edge no rule above sees; failing on ' +
        'it keeps the rules honest (e.g. if `./x.js` stopped resolving to x.ts).',
      severity: 'error',
      from: { path: '^src/' },
      to: { couldNotResolve: true, path: '^\\.' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // The fixture tree breaks the rules on purpose; only its own test cruises it.
    exclude: { path: '^test/fixtures/layering/' },
    // Keeps the imports that compile away (`import type`) and marks them type-only, so the rules
    // above see them too.
    tsPreCompilationDeps: true,
    // dependency-cruiser resolves `./x.js` in a .ts file to x.ts as tsc does under NodeNext
    // (src-imports-resolve fails the run if it ever stops); the tsconfig makes any future
    // `paths` or `baseUrl` resolve as tsc sees them. An absolute path, so the fixture run reads
    // the same file.
    tsConfig: { fileName: `${import.meta.dirname}/tsconfig.json` },
  },
};
