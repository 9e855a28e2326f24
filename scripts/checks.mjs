#!/usr/bin/env node
// The static checks of `npm test`, run side by side: type-check, lint, formatting, layering,
// sizes and the examples' types. Each is an npm script of its own (`npm run lint`, ...), and this
// runs them as that would, two or more at a time (one per core), since each is mostly one
// process on one core. Each check's output is printed whole when it ends, under its name, so
// outputs never interleave; the exit code is 1 if any check failed, and the last lines name them.
//
//   node scripts/checks.mjs            (part of `npm test`)
//   node scripts/checks.mjs lint ...   only the checks named
import { Buffer } from 'node:buffer';
import { spawn, spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

// Longest first, so that the last to start is a short one.
const CHECKS = ['lint', 'typecheck', 'check:examples', 'format:check', 'lint:layers', 'check:sizes'];

const asked = process.argv.slice(2);
const unknown = asked.filter((name) => !CHECKS.includes(name));
if (unknown.length > 0) {
  console.error(`checks: unknown check ${unknown.join(', ')}; the checks are ${CHECKS.join(', ')}`);
  process.exit(2);
}
const queue = asked.length > 0 ? CHECKS.filter((name) => asked.includes(name)) : [...CHECKS];

// The scripts table is generated once here, before checks that read it start side by side.
const built = spawnSync(process.execPath, [join(root, 'scripts', 'build-lua.mjs')], {
  cwd: root,
  stdio: 'inherit',
});
if (built.status !== 0) process.exit(1);

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const lanes = Math.max(2, availableParallelism());
const failed = [];

function run(name) {
  const startedAt = performance.now();
  return new Promise((resolve) => {
    const child = spawn(npm, ['run', '--silent', name], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, FORCE_COLOR: process.stdout.isTTY ? '1' : '0' },
    });
    const output = [];
    child.stdout.on('data', (chunk) => output.push(chunk));
    child.stderr.on('data', (chunk) => output.push(chunk));
    const finish = (code, error) => {
      const seconds = ((performance.now() - startedAt) / 1_000).toFixed(1);
      const ok = code === 0;
      if (!ok) failed.push(name);
      process.stdout.write(`\n> ${name}: ${ok ? 'passed' : 'FAILED'} in ${seconds} s\n`);
      const text = Buffer.concat(output).toString('utf8').trimEnd();
      if (text !== '') process.stdout.write(`${text}\n`);
      if (error !== undefined) process.stdout.write(`${error.message}\n`);
      resolve();
    };
    child.on('error', (error) => finish(1, error));
    child.on('close', (code) => finish(code ?? 1));
  });
}

async function lane() {
  for (let name = queue.shift(); name !== undefined; name = queue.shift()) await run(name);
}

await Promise.all(Array.from({ length: lanes }, lane));
if (failed.length > 0) {
  console.error(`\nchecks: ${failed.join(', ')} failed`);
  process.exit(1);
}
console.log('\nchecks: all passed');
