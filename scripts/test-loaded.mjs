#!/usr/bin/env node
// `npm run test:loaded [-- <vitest arguments>]`: runs `vitest run` with its arguments on a
// machine made busy the way a shared CI runner or a developer's laptop is, not only with
// spinning CPUs: other Redis servers and Node processes that wake up all the time.
//
//   - CPU burners: Node processes that spin (LATCHKEY_LOAD_BURNERS, default: one per core);
//   - a redis-server of this script's own on a free loopback port, kept busy by redis-benchmark
//     (LATCHKEY_LOAD_BENCH_CLIENTS connections, default 50, with a pipeline of 4): a server and
//     a client process that each take a core's share in short slices, and many syscalls;
//   - a Node process doing busy I/O: small files written, flushed to disk and read back.
//
// Everything it starts is stopped when vitest exits, on Ctrl-C and on SIGTERM, and runs under
// `timeout` of LATCHKEY_LOAD_MAX_MINUTES (default 60) in case this script is killed outright.
// The load average is printed before and after; vitest's exit code is this script's.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout } from 'node:timers';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function positiveInteger(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) {
    console.error(`Expected ${name} to be a whole number >= 0, got ${JSON.stringify(raw)}`);
    process.exit(2);
  }
  return value;
}

const BURNERS = positiveInteger('LATCHKEY_LOAD_BURNERS', cpus().length);
const BENCH_CLIENTS = positiveInteger('LATCHKEY_LOAD_BENCH_CLIENTS', 50);
const MAX_SECONDS = positiveInteger('LATCHKEY_LOAD_MAX_MINUTES', 60) * 60;

// Node loaders end when this script is gone (their IPC channel closes) or after the limit.
const NODE_LIMIT = `
process.on('disconnect', () => process.exit(0));
setTimeout(() => process.exit(0), ${MAX_SECONDS * 1_000}).unref();
`;

/** A spinning CPU burner. */
const BURNER = `${NODE_LIMIT}
let x = 0;
for (;;) {
  const until = Date.now() + 50;
  while (Date.now() < until) x = (x * 1103515245 + 12345) % 2147483648;
  await new Promise((resolve) => setImmediate(resolve));
}
`;

/** Busy I/O: small files written, fsync'd, read back and parsed, over and over. */
const IO_LOADER = `
import { openSync, writeSync, fsyncSync, closeSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
${NODE_LIMIT}
const dir = process.argv[1];
const record = JSON.stringify({ orders: Array.from({ length: 200 }, (_, i) => ({ id: i, total: i * 3.5 })) });
for (let n = 0; ; n += 1) {
  const file = join(dir, 'io-' + (n % 16) + '.json');
  const fd = openSync(file, 'w');
  writeSync(fd, record);
  fsyncSync(fd);
  closeSync(fd);
  JSON.parse(readFileSync(file, 'utf8'));
  if (n % 64 === 0) await new Promise((resolve) => setTimeout(resolve, 1));
}
`;

const children = [];
let workDir;
let stopped = false;

function startChild(label, command, args, options = {}) {
  const child = spawn(command, args, {
    stdio: ['ignore', 'ignore', 'pipe', ...(options.ipc ? ['ipc'] : [])],
    ...options.spawn,
  });
  let stderr = '';
  child.stderr?.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-2_000);
  });
  child.on('exit', (code, signal) => {
    if (!stopped && code !== 0 && signal === null) {
      console.error(
        `[test:loaded] ${label} exited with code ${code}${stderr === '' ? '' : `: ${stderr.trim()}`}`,
      );
    }
  });
  children.push(child);
  return child;
}

function running(child) {
  return child.exitCode === null && child.signalCode === null;
}

/**
 * Stops every process this script started, by its own pid: SIGTERM (which `timeout` passes on
 * to the command it runs), then SIGKILL for any still running after `graceMs`; then removes the
 * load's files. With `graceMs` 0 (on the way out of the process) it only signals.
 */
async function stopAll(graceMs = 3_000) {
  if (!stopped) {
    stopped = true;
    for (const child of children) if (running(child)) child.kill('SIGTERM');
  }
  const until = Date.now() + graceMs;
  while (graceMs > 0 && children.some(running) && Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  if (graceMs > 0) for (const child of children) if (running(child)) child.kill('SIGKILL');
  if (workDir !== undefined && (graceMs > 0 || !children.some(running))) {
    rmSync(workDir, { recursive: true, force: true });
    workDir = undefined;
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function hasCommand(command) {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

async function waitForRedis(port) {
  for (let i = 0; i < 100; i += 1) {
    const ping = spawnSync('redis-cli', ['-p', String(port), 'PING'], { encoding: 'utf8' });
    if (ping.stdout?.trim() === 'PONG') return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`the load's redis-server on port ${port} did not answer PING within 10 s`);
}

function formatLoad() {
  return loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');
}

async function startLoad() {
  workDir = mkdtempSync(join(tmpdir(), 'latchkey-load-'));
  const bounded = (command, args) => ['timeout', ['-s', 'KILL', String(MAX_SECONDS), command, ...args]];
  for (let i = 0; i < BURNERS; i += 1) {
    startChild('a CPU burner', process.execPath, ['--input-type=module', '-e', BURNER], { ipc: true });
  }
  startChild('the I/O loader', process.execPath, ['--input-type=module', '-e', IO_LOADER, workDir], {
    ipc: true,
  });
  setTimeout(() => void stopAll(), MAX_SECONDS * 1_000).unref();

  if (BENCH_CLIENTS === 0) return 'no redis-benchmark';
  if (!hasCommand('redis-server') || !hasCommand('redis-benchmark') || !hasCommand('redis-cli')) {
    console.error(
      '[test:loaded] redis-server, redis-cli or redis-benchmark is not on PATH: CPU and I/O load only',
    );
    return 'no redis-benchmark (not installed)';
  }
  const port = await freePort();
  startChild(
    'the load redis-server',
    ...bounded('redis-server', [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      workDir,
    ]),
  );
  await waitForRedis(port);
  // -l: loop until killed; a mix of commands on random keys, pipelined.
  startChild(
    'redis-benchmark',
    ...bounded('redis-benchmark', [
      '-p',
      String(port),
      '-c',
      String(BENCH_CLIENTS),
      '-P',
      '4',
      '-r',
      '100000',
      '-t',
      'set,get,incr,lpush,lpop,hset',
      '-q',
      '-l',
    ]),
  );
  return `redis-benchmark with ${BENCH_CLIENTS} connections against a redis-server on port ${port}`;
}

let vitest;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    if (vitest !== undefined && running(vitest)) vitest.kill(signal);
    void stopAll().then(() => process.exit(130));
  });
}
process.on('exit', () => void stopAll(0));

console.log(`[test:loaded] load average before: ${formatLoad()}`);
let bench;
try {
  bench = await startLoad();
} catch (error) {
  await stopAll();
  console.error(
    `[test:loaded] could not start the load: ${error instanceof Error ? error.message : String(error)}`,
  );
  process.exit(1);
}
console.log(
  `[test:loaded] load: ${BURNERS} CPU burner(s), a busy-I/O Node process, ${bench}; ` +
    `everything stops after ${MAX_SECONDS / 60} min at the latest`,
);
// Let the load settle in before the tests start.
await new Promise((resolve) => setTimeout(resolve, 2_000));
console.log(`[test:loaded] load average at the start of the tests: ${formatLoad()}`);

vitest = spawn(
  process.execPath,
  [join(root, 'node_modules', 'vitest', 'vitest.mjs'), 'run', ...process.argv.slice(2)],
  {
    cwd: root,
    stdio: 'inherit',
  },
);
vitest.on('exit', (code, signal) => {
  console.log(`[test:loaded] load average at the end of the tests: ${formatLoad()}`);
  void stopAll().then(() => process.exit(code ?? (signal === null ? 1 : 128)));
});
