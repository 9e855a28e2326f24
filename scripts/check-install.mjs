#!/usr/bin/env node
// Installs latchkey the two ways that work before it is on the npm registry, each into a new
// project in a temporary directory, and checks that the installed package works there: from
// ESM and from CommonJS, it takes a lock on a real Redis and releases it.
//
//   node scripts/check-install.mjs            both ways
//   node scripts/check-install.mjs tarball    `npm pack`, then `npm install <tarball> redis`
//   node scripts/check-install.mjs git        `npm install git+file://<bare clone of HEAD>`
//                                             (npm runs `prepare` in its own clone: ~30 s)
//
// Redis: REDIS_URL if set, else a redis-server started on a Unix socket in the temporary
// directory and stopped at the end. npm is run with --prefer-offline, so packages already in
// the npm cache (all of them, after `npm ci`) are not downloaded again.
//
// Dependency-free on purpose: it checks what a user gets, not what the dev tree has.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const NPM_FLAGS = ['--prefer-offline', '--no-audit', '--no-fund', '--loglevel', 'error'];
const REDIS_READY_TIMEOUT_MS = 10_000;

const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
// The node-redis the project is developed against: already in the npm cache after `npm ci`.
const redisVersion = JSON.parse(
  readFileSync(join(root, 'node_modules', 'redis', 'package.json'), 'utf8'),
).version;

class CheckFailed extends Error {}

function fail(message) {
  throw new CheckFailed(message);
}

function seconds(since) {
  return `${((performance.now() - since) / 1_000).toFixed(1)} s`;
}

/** Runs a command to the end; returns its stdout, or fails with its output. */
function run(command, args, cwd, env = {}) {
  const result = spawnSync(command, args, {
    cwd,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (result.error !== undefined) fail(`${command} could not start: ${result.error.message}`);
  if (result.status !== 0) {
    fail(
      `\`${command} ${args.join(' ')}\` failed (exit code ${String(result.status ?? result.signal)}) in ${cwd}:\n` +
        `${result.stdout}\n${result.stderr}`.trim(),
    );
  }
  return result.stdout;
}

// ---- Redis for the round trips -------------------------------------------------------------

function socketAnswers(path) {
  return new Promise((resolve) => {
    const socket = createConnection({ path });
    const finish = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => socket.write('*1\r\n$4\r\nPING\r\n'));
    socket.once('data', (chunk) => finish(chunk.toString('latin1').startsWith('+PONG')));
    socket.once('error', () => finish(false));
  });
}

/** Client options for the checks, and a function that stops whatever was started for them. */
async function redisTarget(dir) {
  const url = process.env['REDIS_URL'];
  if (url !== undefined && url !== '') return { options: { url }, stop: async () => {} };

  const path = join(dir, 'redis.sock');
  const server = spawn(
    'redis-server',
    ['--port', '0', '--unixsocket', path, '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: 'ignore' },
  );
  const exited = new Promise((resolve) => {
    server.once('exit', resolve);
    server.once('error', resolve);
  });
  const stop = async () => {
    server.kill('SIGKILL');
    await exited;
  };
  const deadline = performance.now() + REDIS_READY_TIMEOUT_MS;
  while (performance.now() < deadline && server.exitCode === null) {
    if (existsSync(path) && (await socketAnswers(path))) return { options: { socket: { path } }, stop };
    await sleep(50);
  }
  await stop();
  fail('found no Redis: set REDIS_URL, or put redis-server on PATH');
}

// ---- the consumer project ------------------------------------------------------------------

// The same check from both module systems: take a lock, see it held once, release it.
const CHECK_BODY = `
  const target = JSON.parse(process.env.LATCHKEY_CHECK_REDIS);
  const redis = await createClient(target).connect();
  const locks = new LockClient(redis, { keyPrefix: process.env.LATCHKEY_CHECK_PREFIX });
  const lock = locks.lock('install-check');
  try {
    const inside = await lock.withLock(async (lease) => [lease.holdCount, await lock.isLocked()]);
    const after = await lock.isLocked();
    console.log(JSON.stringify({ inside, after, version: require('latchkey/package.json').version }));
  } finally {
    await locks.close();
    await redis.close();
  }
`;

const ESM_CHECK = `import { createRequire } from 'node:module';
import { createClient } from 'redis';
import { LockClient } from 'latchkey';
const require = createRequire(import.meta.url);
${CHECK_BODY}`;

const CJS_CHECK = `const { createClient } = require('redis');
const { LockClient } = require('latchkey');
(async () => {
${CHECK_BODY}
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
`;

function newProject(dir, name) {
  const project = join(dir, name);
  mkdirSync(project);
  writeFileSync(
    join(project, 'package.json'),
    `${JSON.stringify({ name: `check-${name}`, private: true })}\n`,
  );
  writeFileSync(join(project, 'check.mjs'), ESM_CHECK);
  writeFileSync(join(project, 'check.cjs'), CJS_CHECK);
  return project;
}

function checkInstalled(project, label, redis) {
  const installed = join(project, 'node_modules', 'latchkey');
  for (const file of ['dist/index.js', 'dist/index.cjs', 'dist/index.d.ts', 'dist/index.d.cts']) {
    if (!existsSync(join(installed, file))) fail(`${label}: the installed package has no ${file}`);
  }
  for (const dir of ['src', 'test', 'node_modules/tsup']) {
    if (existsSync(join(installed, dir))) fail(`${label}: the installed package should not contain ${dir}/`);
  }
  for (const script of ['check.mjs', 'check.cjs']) {
    const out = run(process.execPath, [script], project, {
      LATCHKEY_CHECK_REDIS: JSON.stringify(redis),
      LATCHKEY_CHECK_PREFIX: `install-check:${process.pid}:${label}:${script}:`,
    });
    let result;
    try {
      result = JSON.parse(out.trim().split('\n').at(-1) ?? '');
    } catch {
      fail(`${label}: ${script} printed no result:\n${out}`);
    }
    const ok = result.inside?.[0] === 1 && result.inside?.[1] === true && result.after === false;
    if (!ok || result.version !== manifest.version) {
      fail(`${label}: ${script} saw ${JSON.stringify(result)}; expected a lock held once, then released`);
    }
    console.log(
      `  ${label}: ${script.endsWith('.mjs') ? 'import' : 'require'} works; took and released a lock`,
    );
  }
}

function checkTarball(dir, redis) {
  const started = performance.now();
  // `npm pack` runs `prepare`, which must build dist/: removed first, so the check shows that
  // it does rather than packing whatever an earlier build left.
  rmSync(join(root, 'dist'), { recursive: true, force: true });
  const packed = run('npm', ['pack', '--json', '--pack-destination', dir, ...NPM_FLAGS], root);
  const filename = JSON.parse(packed.slice(packed.indexOf('[')))[0]?.filename;
  if (typeof filename !== 'string') fail(`npm pack printed no file name:\n${packed}`);
  const tarball = join(dir, filename);
  const project = newProject(dir, 'from-tarball');
  run('npm', ['install', ...NPM_FLAGS, tarball, `redis@${redisVersion}`], project);
  checkInstalled(project, 'tarball', redis);
  console.log(`tarball install: ok (${seconds(started)})`);
}

function checkGit(dir, redis) {
  const started = performance.now();
  if (run('git', ['status', '--porcelain'], root).trim() !== '') {
    console.log('  git: note: this installs the last commit; uncommitted changes are not in it');
  }
  const commit = run('git', ['rev-parse', 'HEAD'], root).trim();
  const bare = join(dir, 'latchkey.git');
  run('git', ['clone', '--quiet', '--bare', root, bare], dir);
  const project = newProject(dir, 'from-git');
  // npm clones it, installs its dev dependencies there, runs `prepare`, and packs the result.
  run(
    'npm',
    ['install', ...NPM_FLAGS, `git+${pathToFileURL(bare).href}#${commit}`, `redis@${redisVersion}`],
    project,
  );
  checkInstalled(project, 'git', redis);
  console.log(`git install (${commit.slice(0, 12)}): ok (${seconds(started)})`);
}

const wanted = process.argv.slice(2);
const ways = wanted.length === 0 ? ['tarball', 'git'] : wanted;
const unknown = ways.filter((way) => way !== 'tarball' && way !== 'git');
if (unknown.length > 0) {
  console.error(`Unknown install way ${unknown.join(', ')}; use: tarball, git (default: both)`);
  process.exit(2);
}

const dir = mkdtempSync(join(tmpdir(), 'latchkey-install-'));
let stopRedis = async () => {};
let exitCode = 0;
try {
  const target = await redisTarget(dir);
  stopRedis = target.stop;
  if (ways.includes('tarball')) checkTarball(dir, target.options);
  if (ways.includes('git')) checkGit(dir, target.options);
} catch (error) {
  console.error(
    `install check failed: ${error instanceof CheckFailed ? error.message : String(error?.stack ?? error)}`,
  );
  exitCode = 1;
} finally {
  await stopRedis();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(exitCode);
