import { defineConfig } from 'tsup';

export default defineConfig([
  {
    entry: ['src/index.ts'],
    format: ['esm'],
    dts: true,
    sourcemap: true,
    clean: true,
    target: 'node20',
  },
  {
    entry: ['src/index.ts'],
    format: ['cjs'],
    dts: true,
    sourcemap: true,
    target: 'node20',
    // p-retry ships only as ESM; bundling it keeps `require('latchkey')` working on every Node 20.
    noExternal: ['p-retry', 'is-network-error'],
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
