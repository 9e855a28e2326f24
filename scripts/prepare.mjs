#!/usr/bin/env node
// npm's `prepare` step: runs on `npm install` / `npm ci` in a clone, on `npm pack` and
// `npm publish`, and when npm installs latchkey from git (`npm install github:owner/latchkey`),
// where npm installs the dev dependencies first and packs the result afterwards. So this builds
// everything the package needs: the Lua table, then dist/ with tsup.
//
// With the dev dependencies left out (`npm ci --omit=dev`) there is no tsup: the build of
// dist/ is skipped with a note, since nothing then runs it. Packing or publishing without it
// fails instead, because a tarball without dist/ cannot be imported.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function run(label, args) {
  const result = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
  if (result.error !== undefined) {
    console.error(`prepare: ${label} could not start: ${result.error.message}`);
    process.exit(1);
  }
  if (result.status !== 0) {
    console.error(`prepare: ${label} failed (exit code ${String(result.status ?? result.signal)})`);
    process.exit(result.status ?? 1);
  }
}

/** tsup's command-line entry point, or undefined when the dev dependencies are not installed. */
function tsupCli() {
  const manifest = join(root, 'node_modules', 'tsup', 'package.json');
  if (!existsSync(manifest)) return undefined;
  const bin = JSON.parse(readFileSync(manifest, 'utf8')).bin;
  const relative = typeof bin === 'string' ? bin : bin?.tsup;
  return relative === undefined ? undefined : join(dirname(manifest), relative);
}

run('build-lua', [join(root, 'scripts', 'build-lua.mjs')]);

const cli = tsupCli();
if (cli === undefined) {
  // npm names the command it runs; only these two hand the package to someone else.
  const packing = ['pack', 'publish'].includes(process.env['npm_command'] ?? '');
  if (packing) {
    console.error('prepare: tsup is not installed, so dist/ cannot be built; run `npm ci` first');
    process.exit(1);
  }
  console.log('prepare: dev dependencies not installed; skipped building dist/ (`npm run build` does it)');
} else {
  // Quiet unless something fails: this runs inside every `npm ci`.
  run('tsup', [cli, '--silent']);
  console.log('prepare: built dist/ (ESM and CommonJS, with types)');
}
