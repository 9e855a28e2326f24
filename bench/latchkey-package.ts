// latchkey as its users run it: the built package this workspace depends on (`"latchkey":
// "file:.."`), loaded from the entry its package.json exports for `import`: the bundle in dist/
// that `npm run build:bundle` writes (`npm run bench` does), not the TypeScript sources. tsx
// compiles the sources with names kept, which wraps every function made at run time in a call
// that gives it a property of its own: heap and CPU the published package does not spend (about
// 1.8 KB more per waiting acquire). The package is found by its package.json, not imported by
// name: tsx maps the name `latchkey` to the sources (tsconfig.json's `paths`, which the types
// here still come from).
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type * as Latchkey from 'latchkey';

interface Manifest {
  readonly exports: { readonly '.': { readonly import: { readonly default: string } } };
}

const manifestPath = createRequire(import.meta.url).resolve('latchkey/package.json');
const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as Manifest;
const bundle = new URL(manifest.exports['.'].import.default, pathToFileURL(manifestPath));
if (!existsSync(bundle)) {
  throw new Error(
    `bench: ${fileURLToPath(bundle)} is missing; run \`npm run build:bundle\` in the repository's root first (\`npm run bench\` does)`,
  );
}

/** The built package's exports. */
export const latchkey = (await import(bundle.href)) as typeof Latchkey;
