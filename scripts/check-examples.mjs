#!/usr/bin/env node
// Type-checks examples/*.ts as a user's own project would compile them, against node-redis 5
// (the dev dependency) and node-redis 6, whose types differ (its clients default to RESP3).
//
//   node scripts/check-examples.mjs      (npm run check:examples; part of npm test)
//
// The project is tsconfig.examples.json: the options `tsc --init` writes (strict, exact
// optional properties, checked indexed access), with `module: nodenext` and ES2022, as a
// project with `"type": "module"` in its package.json has them. The examples see latchkey as a
// user does, through its declarations: they are emitted from src/ into .tmp/examples-check/,
// so the check needs no build of dist/. node-redis 6 is installed into .tmp/redis6 the first
// time, as `npm run test:redis6` does.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const work = join(root, '.tmp', 'examples-check');
const redis6Dir = join(root, '.tmp', 'redis6');
const redis6Types = join(redis6Dir, 'node_modules', 'redis', 'dist', 'index.d.ts');
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');

function fail(message) {
  console.error(`check-examples: ${message}`);
  process.exit(1);
}

function runSync(label, command, args) {
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit' });
  if (result.error !== undefined) fail(`${label} could not start: ${result.error.message}`);
  if (result.status !== 0) fail(`${label} failed (exit code ${String(result.status ?? result.signal)})`);
}

function majorOf(manifest) {
  try {
    return Number(JSON.parse(readFileSync(manifest, 'utf8')).version.split('.')[0]);
  } catch {
    return undefined;
  }
}

/** Runs tsc on a project file; resolves its output, and whether it passed. */
function typecheck(project) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [tsc, '--pretty', 'false', '-p', project], { cwd: root });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    child.once('error', (error) => resolve({ ok: false, output: error.message }));
    child.once('close', (code) => resolve({ ok: code === 0, output }));
  });
}

function writeJson(name, value) {
  const path = join(work, name);
  writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`);
  return path;
}

runSync('build-lua', process.execPath, [join(root, 'scripts', 'build-lua.mjs')]);

if (majorOf(join(redis6Dir, 'node_modules', 'redis', 'package.json')) !== 6) {
  console.log('check-examples: installing node-redis 6 into .tmp/redis6 (once)');
  runSync('npm install redis@6', 'npm', [
    'install',
    '--no-save',
    '--no-package-lock',
    '--no-audit',
    '--no-fund',
    '--prefix',
    redis6Dir,
    'redis@6',
  ]);
}
if (!existsSync(redis6Types)) fail(`node-redis 6 has no types at ${redis6Types}`);

// latchkey's declarations, as its package ships them: compiled from src/ with the repository's
// own options, since the user's options apply to the user's code only.
// Incremental: a second run with nothing changed takes a second or two.
mkdirSync(work, { recursive: true });
const declarations = writeJson('declarations.json', {
  extends: '../../tsconfig.json',
  compilerOptions: {
    noEmit: false,
    emitDeclarationOnly: true,
    declaration: true,
    declarationMap: false,
    incremental: true,
    tsBuildInfoFile: './declarations.tsbuildinfo',
    sourceMap: false,
    rootDir: '../../src',
    outDir: './latchkey',
  },
  include: ['../../src/index.ts'],
});
const emitted = await typecheck(declarations);
// tsc writes declarations despite type errors in src/; those are `npm run typecheck`'s to
// report, so they only make this check say that its view of latchkey may be off.
if (!existsSync(join(work, 'latchkey', 'index.d.ts'))) {
  fail(`emitting latchkey's declarations failed:\n${emitted.output}`);
}
if (!emitted.ok) {
  console.warn("check-examples: src/ has type errors (see npm run typecheck); latchkey's types may be off");
}

const latchkeyTypes = './latchkey/index.d.ts';
const projects = [
  { label: 'node-redis 5', paths: { latchkey: [latchkeyTypes] } },
  { label: 'node-redis 6', paths: { latchkey: [latchkeyTypes], redis: [redis6Types] } },
];
const results = await Promise.all(
  projects.map(async ({ label, paths }) => {
    const file = `examples-${label.replace(/\W+/g, '-')}.json`;
    const project = writeJson(file, {
      extends: '../../tsconfig.examples.json',
      compilerOptions: { paths, incremental: true, tsBuildInfoFile: `./${file}.tsbuildinfo` },
      include: ['../../examples'],
    });
    return { label, project, ...(await typecheck(project)) };
  }),
);

let failed = false;
for (const { label, project, ok, output } of results) {
  if (ok) {
    console.log(`check-examples: the examples type-check with ${label}`);
  } else {
    failed = true;
    // The first line of each error; tsc's elaboration of node-redis's generic types runs to
    // dozens of lines per error. `npx tsc -p <project>` shows it all.
    const errors = output.split('\n').filter((line) => /^\S.*error TS\d+/.test(line));
    console.error(
      `check-examples: the examples fail to type-check with ${label} (project ${relative(root, project)}):`,
    );
    console.error((errors.length > 0 ? errors : [output]).join('\n'));
  }
}
process.exit(failed ? 1 : 0);
