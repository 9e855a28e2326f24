/**
 * Runs the examples one after another, each in a process of its own, with a heading for each
 * and a summary at the end; exits non-zero if any of them failed.
 *
 *   npm run demo                          all examples
 *   npm run example -- coupon-claim       one of them (tsx examples/demo.ts --only <name>)
 *
 * With REDIS_URL set, the examples use that server, each under a key prefix of its own, and
 * delete their keys when they end; only latchkey's records of retried requests stay, and they
 * expire within a minute.
 * Without it, the demo starts a throwaway redis-server on a free loopback port, with
 * persistence off, and stops it when it ends, also on Ctrl-C or an error.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

interface Example {
  readonly name: string;
  readonly shows: string;
}

const EXAMPLES: readonly Example[] = [
  { name: 'nested-reentrancy', shows: 'nested async functions re-enter the lock they already hold' },
  {
    name: 'batch-job-watchdog',
    shows: 'a long job keeps its lock through watchdog renewals, and stops when it is force-unlocked',
  },
  { name: 'waiters-pubsub', shows: 'waiters handed the lock one by one by unlock messages' },
  {
    name: 'coupon-claim',
    shows: 'three processes oversell a coupon stock without a lock, and sell it exactly with latchkey',
  },
  {
    name: 'fenced-writes',
    shows: 'fencing tokens: a store refuses the late write of a holder whose lease ran out',
  },
  {
    name: 'warmup-latch',
    shows: 'a count-down latch: a service takes traffic once every cache warmer is done',
  },
  {
    name: 'ordered-settlement',
    shows: 'a fair lock settles payments from several workers strictly in arrival order',
  },
  {
    name: 'account-transfers',
    shows: 'a multi-lock: transfers hold both accounts at once, in any order, without deadlock',
  },
  {
    name: 'rate-limited-crawler',
    shows: 'a permit semaphore caps fetches to one host; a crashed worker’s permit comes back',
  },
  {
    name: 'report-cache',
    shows:
      'a read-write lock: handlers read a cached report side by side while a refresher rebuilds it alone',
  },
];

const EXAMPLES_DIR = dirname(fileURLToPath(import.meta.url));
const PROJECT_ROOT = dirname(EXAMPLES_DIR);
/**
 * Only catches an example that hangs. Each takes a few seconds on an idle machine; on a 2-core
 * one at load 20, where every Node process took ~10 s to start, coupon-claim (seven processes)
 * took over a minute.
 */
const EXAMPLE_TIMEOUT_MS = 180_000;
const LOOPBACK = '127.0.0.1';
const READY_TIMEOUT_MS = 10_000;
const PORT_ATTEMPTS = 5;

const RULE_WIDTH = 72;

function heading(text: string): void {
  console.log(`\n── ${text} ${'─'.repeat(Math.max(3, RULE_WIDTH - text.length - 4))}`);
}

function seconds(ms: number): string {
  return `${(ms / 1_000).toFixed(1)} s`;
}

/** The URL without its password, for printing. */
function redacted(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparsable REDIS_URL)';
  }
}

// ---- command line --------------------------------------------------------------------------

function listNames(): string {
  return EXAMPLES.map((example) => `  ${example.name.padEnd(20)} ${example.shows}`).join('\n');
}

function selectExamples(argv: readonly string[]): readonly Example[] {
  if (argv.length === 0) return EXAMPLES;
  if (argv[0] === '--only' && argv.length === 2) {
    // Accept `examples/coupon-claim.ts` too, as tab completion writes it.
    const wanted = (argv[1] ?? '').replace(/^examples\//, '').replace(/\.ts$/, '');
    const found = EXAMPLES.find((example) => example.name === wanted);
    if (found !== undefined) return [found];
    console.error(`Unknown example "${argv[1]}". The examples are:\n${listNames()}`);
  } else {
    console.error(`Usage: npm run demo | npm run example -- <name>\nThe examples are:\n${listNames()}`);
  }
  process.exit(1);
}

// ---- throwaway redis-server ----------------------------------------------------------------

interface ThrowawayRedis {
  readonly url: string;
  readonly child: ChildProcess;
  readonly dir: string;
  readonly exited: Promise<void>;
  readonly output: () => string;
}

function hasRedisServer(): boolean {
  const probe = spawnSync('redis-server', ['--version'], { stdio: 'ignore', timeout: 5_000 });
  return probe.error === undefined && probe.status === 0;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, LOOPBACK, () => {
      const address = probe.address();
      probe.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error('could not read the port of a probe socket'));
      });
    });
  });
}

/** One RESP PING on a fresh connection; true on +PONG. Never rejects. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: LOOPBACK, port });
    const finish = (pong: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(pong);
    };
    const timer = setTimeout(() => finish(false), 500);
    socket.on('connect', () => socket.write('*1\r\n$4\r\nPING\r\n'));
    socket.on('data', (chunk: Buffer) => finish(chunk.toString('latin1').startsWith('+PONG')));
    socket.on('error', () => finish(false));
  });
}

function launchRedis(port: number): ThrowawayRedis {
  // A directory of its own, so nothing the server might write lands in the project.
  const dir = mkdtempSync(join(tmpdir(), 'latchkey-demo-redis-'));
  const args = ['--port', String(port), '--bind', LOOPBACK, '--save', '', '--appendonly', 'no', '--dir', dir];
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const collect = (chunk: Buffer): void => {
    output = (output + chunk.toString('utf8')).slice(-4_000);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', () => resolve());
  });
  return { url: `redis://${LOOPBACK}:${port}`, child, dir, exited, output: () => output };
}

async function stopRedis(server: ThrowawayRedis): Promise<void> {
  if (server.child.exitCode === null && server.child.signalCode === null) {
    server.child.kill('SIGTERM');
    const gone = await Promise.race([server.exited.then(() => true), sleep(5_000).then(() => false)]);
    if (!gone) {
      server.child.kill('SIGKILL');
      await server.exited;
    }
  }
  rmSync(server.dir, { recursive: true, force: true });
}

async function startRedis(onStarted: (server: ThrowawayRedis) => void): Promise<ThrowawayRedis> {
  for (let attempt = 1; attempt <= PORT_ATTEMPTS; attempt += 1) {
    const port = await freePort();
    const server = launchRedis(port);
    onStarted(server);
    const deadline = performance.now() + READY_TIMEOUT_MS;
    let exited = false;
    void server.exited.then(() => {
      exited = true;
    });
    while (!exited && performance.now() < deadline) {
      if (await ping(port)) return server;
      await sleep(50);
    }
    await stopRedis(server);
    // Someone else may have taken the port between the probe and redis binding it.
    if (exited && /address already in use/i.test(server.output())) continue;
    throw new Error(`redis-server on port ${port} did not start. Its output:\n${server.output()}`);
  }
  throw new Error(`redis-server found no free port in ${PORT_ATTEMPTS} attempts`);
}

// ---- running the examples ------------------------------------------------------------------

interface Outcome {
  readonly example: Example;
  readonly ok: boolean;
  readonly ms: number;
  readonly detail: string;
}

let running: ChildProcess | undefined;
let server: ThrowawayRedis | undefined;

function runExample(example: Example, url: string): Promise<Outcome> {
  const startedAt = performance.now();
  const child = spawn(process.execPath, ['--import', 'tsx', join(EXAMPLES_DIR, `${example.name}.ts`)], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, REDIS_URL: url },
    stdio: 'inherit',
  });
  running = child;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, EXAMPLE_TIMEOUT_MS);
  return new Promise((resolve) => {
    const finish = (ok: boolean, detail: string): void => {
      clearTimeout(timer);
      running = undefined;
      resolve({ example, ok, ms: performance.now() - startedAt, detail });
    };
    child.once('error', (error) => finish(false, `could not start: ${error.message}`));
    child.once('exit', (code, signal) => {
      if (timedOut) finish(false, `timed out after ${seconds(EXAMPLE_TIMEOUT_MS)}`);
      else if (code === 0) finish(true, '');
      else finish(false, signal === null ? `exit code ${String(code)}` : `killed by ${signal}`);
    });
  });
}

function cleanUpNow(): void {
  running?.kill('SIGKILL');
  if (server !== undefined) {
    server.child.kill('SIGKILL');
    rmSync(server.dir, { recursive: true, force: true });
  }
}

async function main(): Promise<number> {
  const selected = selectExamples(process.argv.slice(2));

  let url = process.env['REDIS_URL'] ?? '';
  if (url === '') {
    if (!hasRedisServer()) {
      console.error(
        [
          'The demo needs Redis, and found no redis-server binary to start a throwaway one.',
          'Either install redis-server (Debian/Ubuntu: apt-get install redis-server;',
          'macOS: brew install redis), or point the demo at a server you run:',
          '  REDIS_URL=redis://127.0.0.1:6379 npm run demo',
        ].join('\n'),
      );
      return 1;
    }
    server = await startRedis((started) => {
      server = started;
    });
    url = server.url;
    console.log(`Started a throwaway redis-server at ${url}; it stops when the demo ends.`);
  } else {
    console.log(
      `Using the Redis at REDIS_URL=${redacted(url)} (keys under examples:<random>:, deleted at the end).`,
    );
  }

  const outcomes: Outcome[] = [];
  for (const [index, example] of selected.entries()) {
    heading(`${index + 1}/${selected.length}  ${example.name}`);
    console.log(`Shows: ${example.shows}\n`);
    const outcome = await runExample(example, url);
    outcomes.push(outcome);
    const verdict = outcome.ok ? 'passed' : `FAILED (${outcome.detail})`;
    console.log(`\n${example.name} ${verdict} in ${seconds(outcome.ms)}`);
  }

  if (selected.length > 1) {
    heading('Summary');
    for (const outcome of outcomes) {
      const mark = outcome.ok ? 'ok    ' : 'FAILED';
      const detail = outcome.ok ? '' : `  ${outcome.detail}`;
      console.log(
        `  ${mark}  ${outcome.example.name.padEnd(20)} ${seconds(outcome.ms).padStart(6)}${detail}`,
      );
    }
  }
  const failed = outcomes.filter((outcome) => !outcome.ok);
  if (failed.length > 0) {
    console.error(
      `\n${failed.length} of ${outcomes.length} failed: ${failed.map((o) => o.example.name).join(', ')}`,
    );
    return 1;
  }
  if (selected.length > 1) console.log(`\nAll ${outcomes.length} examples passed.`);
  return 0;
}

// Neither a Ctrl-C nor a crash may leave the throwaway server or an example running.
process.on('exit', cleanUpNow);
const SIGNAL_EXIT_CODES = { SIGHUP: 129, SIGINT: 130, SIGTERM: 143 } as const;
for (const [signal, code] of Object.entries(SIGNAL_EXIT_CODES)) {
  process.once(signal, () => {
    console.error(`\nInterrupted (${signal}); stopping.`);
    cleanUpNow();
    process.exit(code);
  });
}

let exitCode = 1;
try {
  exitCode = await main();
} catch (error) {
  console.error(`The demo failed: ${error instanceof Error ? error.message : String(error)}`);
} finally {
  if (server !== undefined) await stopRedis(server);
  server = undefined;
}
process.exit(exitCode);
