import { defineConfig } from 'tsup';

// The optional peer `@opentelemetry/api` is looked up at run time (src/engine/telemetry.ts) and
// must never be bundled: latchkey has to load, and report nothing, where it is not installed.
const external = ['@opentelemetry/api'];

// LATCHKEY_BUILD_TYPES=0 (`npm run bench`) writes the bundles alone: type declarations are most of
// the build's time, and the benchmark takes its types from the sources.
const types = process.env.LATCHKEY_BUILD_TYPES !== '0';

export default defineConfig([
  {
    entry: ['src/index.ts'],
    format: ['esm'],
    dts: types,
    sourcemap: true,
    clean: types,
    target: 'node20',
    external,
  },
  {
    entry: ['src/index.ts'],
    format: ['cjs'],
    dts: types,
    sourcemap: true,
    target: 'node20',
    external,
    // p-retry ships only as ESM; bundling it keeps `require('latchkey')` working on every Node 20.
    noExternal: ['p-retry', 'is-network-error'],
    // Defines `import.meta.url`, which only the ESM build reads (src/engine/telemetry.ts).
    shims: true,
  },
  {
    // The `latchkey` command (package.json `bin`): ESM only, no types, with the shebang that lets
    // npm link it as an executable. `redis` and the library's dependencies stay external.
    entry: { cli: 'src/cli/main.ts' },
    format: ['esm'],
    dts: false,
    sourcemap: true,
    target: 'node20',
    banner: { js: '#!/usr/bin/env node' },
  },
]);
