// latchkey as its users run it: the bundle `npm run build:bundle` writes to dist/, not the
// TypeScript sources. tsx compiles the sources with names kept, which wraps every function made at
// run time in a call that gives it a property of its own: heap and CPU the published package does
// not spend (about 1.8 KB more per waiting acquire). Types still come from the sources.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type * as Latchkey from '../src/index.js';

const bundle = new URL('../dist/index.js', import.meta.url);
if (!existsSync(fileURLToPath(bundle))) {
  throw new Error('bench: dist/index.js is missing; run `npm run build:bundle` first (`npm run bench` does)');
}

/** The built package's exports. */
export const latchkey = (await import(bundle.href)) as typeof Latchkey;
