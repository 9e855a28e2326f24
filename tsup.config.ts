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
]);
