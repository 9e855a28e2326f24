#!/usr/bin/env node
// The first step of `npm test` and `npm run demo`, so that both work from a fresh clone:
//
//   node scripts/setup.mjs test   Redis for the test harness: redis-server on PATH, or else a
//                                 Docker engine (the harness then starts redis:7 containers).
//   node scripts/setup.mjs demo   Redis for the demo: the server at REDIS_URL if set, else
//                                 redis-server on PATH (the demo starts a throwaway one).
//
// When redis-server is missing, and this is Debian or Ubuntu and the user is root, it installs
// Debian's redis-server package with apt-get and says so; otherwise it prints one message
// saying how to get Redis and exits 1, within seconds. A REDIS_URL that does not answer fails
// the same way. Then it installs the dependencies (`npm ci`) if node_modules is missing or does
// not match package-lock.json.
//
// Plain Node with no dependencies: it runs before they are installed.
// LATCHKEY_SETUP_NO_INSTALL=1 turns off installing redis-server (the tests of this script use
// it to show the message a machine without Redis gets).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { dirname, join } from 'node:path';
import { clearTimeout, setTimeout } from 'node:timers';
import { URL, fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const PROBE_TIMEOUT_MS = 2_000;
const DOCKER_TIMEOUT_MS = 10_000;

const MODES = {
  test: { command: 'npm test', dockerWill: 'the tests will start redis:7 containers through Docker' },
  demo: { command: 'npm run demo' },
};

const mode = process.argv[2];
if (!Object.hasOwn(MODES, mode ?? '')) {
  console.error('Usage: node scripts/setup.mjs test|demo');
  process.exit(2);
}
const { command, dockerWill } = MODES[mode];

function say(line) {
  console.log(`setup: ${line}`);
}

/** Prints the one message for this failure and ends the run. */
function giveUp(lines) {
  console.error(`\n${lines.join('\n')}\n`);
  process.exit(1);
}

/** Runs a program to the end, quietly; true if it exited 0. A missing program is false. */
function succeeds(program, args, timeout = PROBE_TIMEOUT_MS * 5) {
  const result = spawnSync(program, args, { stdio: 'ignore', timeout });
  return result.error === undefined && result.status === 0;
}

// ---- Redis ---------------------------------------------------------------------------------

/** 'answers' if something replied to PING (an -NOAUTH error counts), else why not. */
function probe(host, port) {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port });
    const finish = (outcome) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => finish('no answer'), PROBE_TIMEOUT_MS);
    socket.once('connect', () => socket.write('*1\r\n$4\r\nPING\r\n'));
    socket.once('data', () => finish('answers'));
    socket.once('error', (error) =>
      finish(error.code === 'ECONNREFUSED' ? 'connection refused' : error.message),
    );
  });
}

/** Fails the run unless the server at REDIS_URL answers. */
async function checkRedisUrl(url) {
  let target;
  try {
    target = new URL(url);
  } catch {
    giveUp([`REDIS_URL is set to something that is not a URL; expected redis://host:port.`]);
  }
  // Only plain TCP is probed; a rediss:// (TLS) server is left to the client to judge.
  if (target.protocol !== 'redis:') return;
  const host = target.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1';
  const port = target.port === '' ? 6379 : Number(target.port);
  const outcome = await probe(host, port);
  if (outcome !== 'answers') {
    giveUp([
      `${command}: REDIS_URL points at ${host}:${port}, which does not answer (${outcome}).`,
      `Start that server, or unset REDIS_URL${mode === 'demo' ? ' so that the demo starts a throwaway redis-server' : ''}.`,
    ]);
  }
}

function hasRedisServer() {
  return succeeds('redis-server', ['--version']);
}

function osRelease() {
  try {
    return readFileSync('/etc/os-release', 'utf8');
  } catch {
    return '';
  }
}

/** Why redis-server will not be installed here, or undefined if it can be. */
function whyNotInstall() {
  if (process.env['LATCHKEY_SETUP_NO_INSTALL'] === '1') return 'LATCHKEY_SETUP_NO_INSTALL is set';
  if (process.platform !== 'linux') return `this is ${process.platform}, not Debian or Ubuntu`;
  const release = osRelease();
  const family = /^(?:ID|ID_LIKE)=.*\b(?:debian|ubuntu)\b/m.test(release);
  if (!family) return 'this is not Debian or Ubuntu';
  if (process.getuid?.() !== 0) return 'you are not root';
  if (!succeeds('apt-get', ['--version'])) return 'apt-get is not on PATH';
  return undefined;
}

function installRedisServer() {
  say("redis-server is not installed: installing Debian's redis-server package with apt-get,");
  say('since this is Debian/Ubuntu and you are root (apt-get update; apt-get install -y redis-server)');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [
    ['update', '-q'],
    ['install', '-y', '-q', 'redis-server'],
  ]) {
    const result = spawnSync('apt-get', args, { stdio: 'inherit', env });
    if (result.error !== undefined || result.status !== 0) {
      giveUp([
        `${command}: \`apt-get ${args.join(' ')}\` failed (${result.error?.message ?? `exit code ${String(result.status)}`}).`,
        'Install redis-server yourself, then run it again.',
      ]);
    }
  }
  if (!hasRedisServer()) giveUp([`${command}: apt-get installed redis-server, but it is still not on PATH.`]);
  say(
    'redis-server installed. (The package may also start a service on port 6379; latchkey does not use it.)',
  );
}

function howToGetRedis(reason, lines, alternative = []) {
  giveUp([
    ...lines,
    '',
    'Install redis-server and run it again:',
    '  Debian/Ubuntu: sudo apt-get install -y redis-server',
    '  macOS:         brew install redis',
    ...alternative,
    `(It was not installed automatically: ${reason}.)`,
  ]);
}

async function ensureRedis() {
  const url = process.env['REDIS_URL'] ?? '';
  if (url !== '') await checkRedisUrl(url);

  if (mode === 'demo' && url !== '') return;
  if (hasRedisServer()) return;
  if (mode === 'test' && succeeds('docker', ['info'], DOCKER_TIMEOUT_MS)) {
    say(`no redis-server on PATH; ${dockerWill}`);
    return;
  }
  const reason = whyNotInstall();
  if (reason === undefined) {
    installRedisServer();
    return;
  }
  if (mode === 'test') {
    howToGetRedis(reason, [
      `${command} needs redis-server: the tests start their own servers on free loopback ports`,
      '(and stop, pause and restart some of them), and there is no redis-server on PATH and no',
      `Docker engine answering \`docker info\`${url === '' ? '' : ' (REDIS_URL alone is not enough)'}.`,
    ]);
  }
  howToGetRedis(
    reason,
    [`${command} needs Redis: it starts a throwaway redis-server, and there is none on PATH.`],
    ['or point the demo at a Redis you run:', '  REDIS_URL=redis://127.0.0.1:6379 npm run demo'],
  );
}

// ---- dependencies --------------------------------------------------------------------------

function readJson(path) {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
}

/** Why the installed dependencies do not match the lockfile, or undefined if they do. */
function staleDependencies() {
  if (!existsSync(join(root, 'node_modules'))) return 'node_modules is missing';
  const manifest = readJson(join(root, 'package.json')) ?? {};
  const lock = readJson(join(root, 'package-lock.json'));
  const names = Object.keys({ ...manifest.dependencies, ...manifest.devDependencies });
  for (const name of names) {
    const installed = readJson(join(root, 'node_modules', name, 'package.json'))?.version;
    if (installed === undefined) return `${name} is not installed`;
    const locked = lock?.packages?.[`node_modules/${name}`]?.version;
    if (locked !== undefined && locked !== installed) {
      return `${name} ${installed} is installed, package-lock.json has ${locked}`;
    }
  }
  return undefined;
}

function ensureDependencies() {
  const stale = staleDependencies();
  if (stale === undefined) return;
  const args = existsSync(join(root, 'package-lock.json')) ? ['ci'] : ['install'];
  say(`installing dependencies with npm ${args[0]} (${stale})`);
  const result = spawnSync('npm', [...args, '--no-audit', '--no-fund'], { cwd: root, stdio: 'inherit' });
  if (result.error !== undefined || result.status !== 0) {
    giveUp([
      `${command}: \`npm ${args[0]}\` failed (${result.error?.message ?? `exit code ${String(result.status)}`}); see its output above.`,
    ]);
  }
}

// Redis first: it is the quick check, and the one a machine most often fails.
await ensureRedis();
ensureDependencies();
