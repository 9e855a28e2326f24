/**
 * Real Redis servers for tests (never a mock; see DESIGN.md, Tests).
 *
 * Order of preference:
 *   sharedRedis(): REDIS_URL if set, else a server from startRedis().
 *   startRedis():  a `redis-server` on PATH, spawned on a free loopback port;
 *                  else a `redis:7` container through testcontainers;
 *                  else one error that says how to get Redis.
 *
 * Tests that pause, kill or restart a server must use startRedis(), never the shared one.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { Socket, createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type * as Testcontainers_ from 'testcontainers';
import type { StartedTestContainer } from 'testcontainers';
import { onProcessExit } from './cleanup.js';

export interface RedisInstance {
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** true: a local redis-server child process; false: a Docker container. */
  readonly spawned: boolean;
  /** Freezes the server (SIGSTOP): connections stay open, nothing is answered. */
  pause(): Promise<void>;
  /** Thaws a paused server (SIGCONT). */
  resume(): Promise<void>;
  /** Sends `signal` (default SIGKILL) and waits until the server has exited. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Kills the server if it runs, then starts an empty one on the same port and waits for PING. */
  restart(): Promise<void>;
  /** Kills the server for good and removes its files. Safe to call twice. */
  stop(): Promise<void>;
}

export interface StartRedisOptions {
  /** Extra redis-server arguments, e.g. ['--replicaof', '127.0.0.1', '6380']. */
  readonly args?: readonly string[];
}

export type PingOutcome = 'pong' | 'timeout' | 'refused' | 'error';

const LOOPBACK = '127.0.0.1';
const READY_TIMEOUT_MS = 10_000;
const EXIT_TIMEOUT_MS = 10_000;
const OUTPUT_TAIL_CHARS = 4_000;
const PORT_ATTEMPTS = 5;
const DOCKER_IMAGE = 'redis:7';
// Persistence off in every server we start: a restart must come back empty, and tests
// must not leave dump files behind.
const NO_PERSISTENCE = ['--save', '', '--appendonly', 'no'];

// ---------------------------------------------------------------------------------------
// Process-wide state. Kept on globalThis so that several evaluations of this module in one
// process (one per test file under some runners) share one server and one port list.

interface SharedRedis {
  readonly url: string;
  readonly instance?: RedisInstance;
}

interface ServerRegistry {
  /** Ports handed out but perhaps not yet bound, so two starts never race for one port. */
  readonly reservedPorts: Set<number>;
  shared?: Promise<SharedRedis> | undefined;
  sharedInstance?: OwnedRedis | undefined;
}

const REGISTRY_KEY = Symbol.for('latchkey.test.redis-server');

function registry(): ServerRegistry {
  const holder = globalThis as unknown as Record<symbol, ServerRegistry | undefined>;
  let reg = holder[REGISTRY_KEY];
  if (reg === undefined) {
    reg = { reservedPorts: new Set() };
    holder[REGISTRY_KEY] = reg;
  }
  return reg;
}

// ---------------------------------------------------------------------------------------
// Small helpers.

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Sends one RESP PING over a fresh TCP connection. Resolves (never rejects) with what
 * happened, so callers can assert on 'timeout' for a paused server or 'refused' for a dead one.
 */
export function pingRedis(host: string, port: number, timeoutMs = 1_000): Promise<PingOutcome> {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port });
    let buffered = '';
    let settled = false;
    const finish = (outcome: PingOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    socket.setNoDelay(true);
    socket.on('connect', () => socket.write('*1\r\n$4\r\nPING\r\n'));
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('latin1');
      const end = buffered.indexOf('\r\n');
      if (end === -1) return;
      // Anything but +PONG (e.g. -LOADING while a replica syncs) means "not ready yet".
      finish(buffered.slice(0, end) === '+PONG' ? 'pong' : 'error');
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      finish(error.code === 'ECONNREFUSED' ? 'refused' : 'error');
    });
    socket.on('close', () => finish('error'));
  });
}

/** Asks the kernel for a free port, which is released again before returning. */
function probeFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, LOOPBACK, () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error('could not read the port of a probe socket'));
      });
    });
  });
}

async function reserveFreePort(): Promise<number> {
  const reserved = registry().reservedPorts;
  for (let attempt = 0; attempt < 20; attempt += 1) {
    const port = await probeFreePort();
    if (!reserved.has(port)) {
      reserved.add(port);
      return port;
    }
  }
  throw new Error('could not find a free loopback port that this process has not used yet');
}

// Child stdio pipes are sockets at run time, typed only as Readable.
function unrefStream(stream: Readable | null): void {
  if (stream instanceof Socket) stream.unref();
}

class OutputTail {
  private text = '';

  append(chunk: Buffer): void {
    this.text += chunk.toString('utf8');
    if (this.text.length > OUTPUT_TAIL_CHARS * 2) this.text = this.text.slice(-OUTPUT_TAIL_CHARS);
  }

  toString(): string {
    return this.text.slice(-OUTPUT_TAIL_CHARS);
  }
}

interface ExitInfo {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message())), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// ---------------------------------------------------------------------------------------
// Local redis-server child processes.

let binaryAvailable: boolean | undefined;

function hasRedisServerBinary(): boolean {
  if (binaryAvailable === undefined) {
    const probe = spawnSync('redis-server', ['--version'], { stdio: 'ignore', timeout: 5_000 });
    binaryAvailable = probe.error === undefined && probe.status === 0;
  }
  return binaryAvailable;
}

class PortInUseError extends Error {}

interface RunningProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly dir: string;
  readonly output: OutputTail;
  readonly exited: Promise<ExitInfo>;
  hasExited: boolean;
  readonly unregister: () => void;
}

function launchProcess(port: number, extraArgs: readonly string[]): RunningProcess {
  const dir = mkdtempSync(join(tmpdir(), 'latchkey-redis-'));
  const args = [
    '--port',
    String(port),
    '--bind',
    LOOPBACK,
    ...NO_PERSISTENCE,
    '--daemonize',
    'no',
    '--protected-mode',
    'no',
    '--dir',
    dir,
    ...extraArgs,
  ];
  // Not detached: a Ctrl-C in the terminal reaches the whole process group, redis included.
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const output = new OutputTail();
  child.stdout?.on('data', (chunk: Buffer) => output.append(chunk));
  child.stderr?.on('data', (chunk: Buffer) => output.append(chunk));
  // The 'error' of a failed spawn (e.g. ENOENT) arrives later; unheard it would crash the
  // test process, and the missing pid below already reports the failure.
  child.once('error', () => {});
  const pid = child.pid;
  if (pid === undefined) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error('could not spawn redis-server (no pid; is it still on PATH?)');
  }
  // An idle server must not keep the test process alive; the exit hook below kills it.
  // Whoever waits for its exit refs it again for the duration (see awaitExit).
  child.unref();
  unrefStream(child.stdout);
  unrefStream(child.stderr);
  const unregister = onProcessExit(() => {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
    rmSync(dir, { recursive: true, force: true });
  });
  const running: RunningProcess = {
    child,
    pid,
    dir,
    output,
    hasExited: false,
    unregister,
    exited: new Promise<ExitInfo>((resolve) => {
      child.once('exit', (code, signal) => {
        running.hasExited = true;
        resolve({ code, signal });
      });
    }),
  };
  return running;
}

/** Waits for exit while holding the event loop open, which the unref'd child does not. */
async function awaitExit(running: RunningProcess): Promise<ExitInfo> {
  running.child.ref();
  try {
    return await running.exited;
  } finally {
    running.child.unref();
  }
}

async function disposeProcess(running: RunningProcess): Promise<void> {
  if (!running.hasExited) {
    running.child.kill('SIGKILL');
    await awaitExit(running);
  }
  running.unregister();
  rmSync(running.dir, { recursive: true, force: true });
}

async function waitUntilReady(running: RunningProcess, port: number): Promise<void> {
  const deadline = performance.now() + READY_TIMEOUT_MS;
  while (performance.now() < deadline) {
    if (running.hasExited) {
      const exit = await awaitExit(running);
      // 'exit' can overtake the last chunks of output, which hold the reason.
      await delay(50);
      const text = running.output.toString();
      if (/address already in use/i.test(text)) throw new PortInUseError(text);
      throw new Error(
        `redis-server on port ${port} exited during start-up ` +
          `(code ${String(exit.code)}, signal ${String(exit.signal)}). Output:\n${text}`,
      );
    }
    if ((await pingRedis(LOOPBACK, port, 500)) === 'pong') return;
    await delay(20);
  }
  throw new Error(
    `redis-server on port ${port} did not answer PING within ${READY_TIMEOUT_MS} ms. ` +
      `Output:\n${running.output.toString()}`,
  );
}

async function startProcessOn(port: number, extraArgs: readonly string[]): Promise<RunningProcess> {
  const running = launchProcess(port, extraArgs);
  try {
    await waitUntilReady(running, port);
    return running;
  } catch (error) {
    await disposeProcess(running);
    throw error;
  }
}

function hasArg(args: readonly string[], name: string): boolean {
  return args.some((arg) => arg.toLowerCase() === name);
}

class ProcessRedis implements RedisInstance {
  readonly host = LOOPBACK;
  readonly spawned = true;
  readonly url: string;
  private current: RunningProcess | undefined;
  private paused = false;
  private stopped = false;

  constructor(
    readonly port: number,
    private readonly args: readonly string[],
    running: RunningProcess,
  ) {
    this.url = `redis://${LOOPBACK}:${port}`;
    this.current = running;
  }

  /** For sharedRedis(): a memoized server that a test killed must not be handed out again. */
  get alive(): boolean {
    return !this.stopped && this.current !== undefined && !this.current.hasExited;
  }

  private running(action: string): RunningProcess {
    if (this.stopped) throw new Error(`cannot ${action}: the redis-server on port ${this.port} was stopped`);
    if (this.current === undefined || this.current.hasExited) {
      throw new Error(`cannot ${action}: the redis-server on port ${this.port} is not running`);
    }
    return this.current;
  }

  pause(): Promise<void> {
    process.kill(this.running('pause').pid, 'SIGSTOP');
    this.paused = true;
    return Promise.resolve();
  }

  resume(): Promise<void> {
    process.kill(this.running('resume').pid, 'SIGCONT');
    this.paused = false;
    return Promise.resolve();
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const running = this.current;
    if (running === undefined || running.hasExited) return;
    running.child.kill(signal);
    // A stopped process only acts on a catchable signal once it runs again.
    if (this.paused && signal !== 'SIGKILL') process.kill(running.pid, 'SIGCONT');
    this.paused = false;
    await withTimeout(
      awaitExit(running),
      EXIT_TIMEOUT_MS,
      () => `redis-server on port ${this.port} did not exit within ${EXIT_TIMEOUT_MS} ms after ${signal}`,
    );
    await disposeProcess(running);
    this.current = undefined;
  }

  async restart(): Promise<void> {
    if (this.stopped) throw new Error(`cannot restart: the redis-server on port ${this.port} was stopped`);
    await this.kill('SIGKILL');
    // The old socket is closed once the process has exited, but give the kernel a few
    // chances in case something else grabbed the port in between.
    let lastError: unknown;
    for (let attempt = 0; attempt < 20; attempt += 1) {
      try {
        this.current = await startProcessOn(this.port, this.args);
        return;
      } catch (error) {
        if (!(error instanceof PortInUseError)) throw error;
        lastError = error;
        await delay(100);
      }
    }
    throw new Error(`could not restart redis-server on port ${this.port}: port stays in use`, {
      cause: lastError,
    });
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const running = this.current;
    this.current = undefined;
    this.paused = false;
    if (running !== undefined) await disposeProcess(running);
  }
}

async function startProcessRedis(extraArgs: readonly string[]): Promise<ProcessRedis> {
  let lastError: unknown;
  for (let attempt = 0; attempt < PORT_ATTEMPTS; attempt += 1) {
    const port = await reserveFreePort();
    const args = [...extraArgs];
    // A cluster node also listens on a bus port (port + 10000 by default), which nobody
    // checked; give it a second checked port instead.
    if (hasArg(args, '--cluster-enabled') && !hasArg(args, '--cluster-port')) {
      args.push('--cluster-port', String(await reserveFreePort()));
    }
    try {
      const running = await startProcessOn(port, args);
      return new ProcessRedis(port, args, running);
    } catch (error) {
      // The probe socket was closed before redis bound the port, so another process may have
      // taken it in between; that alone is worth another try, nothing else is.
      if (!(error instanceof PortInUseError)) throw error;
      lastError = error;
    }
  }
  throw new Error(`redis-server could not bind a free port after ${PORT_ATTEMPTS} attempts`, {
    cause: lastError,
  });
}

// ---------------------------------------------------------------------------------------
// Docker fallback (testcontainers). Loaded lazily: it is heavy and most runs never need it.
// Containers left behind by a crashed test process are removed by testcontainers' reaper.

type Testcontainers = typeof Testcontainers_;

/** Set (to 1) to have each look for a Docker engine say so on stderr: see harness-without-redis. */
export const TRACE_DOCKER_PROBES_ENV = 'LATCHKEY_TEST_TRACE_DOCKER_PROBES';
export const DOCKER_PROBE_LINE = 'latchkey test harness: looking for a Docker engine';

async function dockerRuntime(): Promise<{ module: Testcontainers } | { unavailable: string }> {
  if (process.env[TRACE_DOCKER_PROBES_ENV] === '1') process.stderr.write(`${DOCKER_PROBE_LINE}\n`);
  try {
    const module = await import('testcontainers');
    await module.getContainerRuntimeClient();
    return { module };
  } catch (error) {
    return { unavailable: error instanceof Error ? error.message : String(error) };
  }
}

async function startContainer(
  module: Testcontainers,
  extraArgs: readonly string[],
  hostPort: number | undefined,
): Promise<StartedTestContainer> {
  const exposed = hostPort === undefined ? 6379 : { container: 6379, host: hostPort };
  return new module.GenericContainer(DOCKER_IMAGE)
    .withCommand(['redis-server', ...NO_PERSISTENCE, '--protected-mode', 'no', ...extraArgs])
    .withExposedPorts(exposed)
    .withWaitStrategy(module.Wait.forLogMessage(/Ready to accept connections/))
    .start();
}

class DockerRedis implements RedisInstance {
  readonly spawned = false;
  readonly host: string;
  readonly port: number;
  readonly url: string;
  private current: StartedTestContainer | undefined;
  private stopped = false;

  constructor(
    private readonly module: Testcontainers,
    private readonly args: readonly string[],
    container: StartedTestContainer,
  ) {
    this.current = container;
    this.host = container.getHost();
    this.port = container.getMappedPort(6379);
    this.url = `redis://${this.host}:${this.port}`;
  }

  get alive(): boolean {
    return !this.stopped && this.current !== undefined;
  }

  private running(action: string): StartedTestContainer {
    if (this.stopped || this.current === undefined) {
      throw new Error(`cannot ${action}: the Redis container for ${this.url} is not running`);
    }
    return this.current;
  }

  // `docker pause` freezes the container's cgroup, which is what SIGSTOP does for a process.
  async pause(): Promise<void> {
    const container = this.running('pause');
    const client = await this.module.getContainerRuntimeClient();
    await client.container.getById(container.getId()).pause();
  }

  async resume(): Promise<void> {
    const container = this.running('resume');
    const client = await this.module.getContainerRuntimeClient();
    await client.container.getById(container.getId()).unpause();
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const container = this.current;
    if (container === undefined) return;
    this.current = undefined;
    const client = await this.module.getContainerRuntimeClient();
    const handle = client.container.getById(container.getId());
    const state = await handle.inspect();
    if (state.State.Paused) await handle.unpause();
    if (signal === 'SIGKILL') {
      await container.stop({ timeout: 0 });
      return;
    }
    await handle.kill({ signal });
    await container.stop({ timeout: EXIT_TIMEOUT_MS });
  }

  async restart(): Promise<void> {
    if (this.stopped) throw new Error(`cannot restart: the Redis container for ${this.url} was stopped`);
    await this.kill('SIGKILL');
    // A new container rather than `docker restart`, so nothing from the old one survives;
    // the host port is pinned so the URL stays valid.
    this.current = await startContainer(this.module, this.args, this.port);
    const deadline = performance.now() + READY_TIMEOUT_MS;
    while ((await pingRedis(this.host, this.port, 500)) !== 'pong') {
      if (performance.now() > deadline) {
        throw new Error(`restarted Redis container at ${this.url} did not answer PING in time`);
      }
      await delay(50);
    }
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    await this.kill('SIGKILL');
    this.stopped = true;
  }
}

// ---------------------------------------------------------------------------------------
// Public entry points.

/**
 * Set by the global set-up once it has printed how to get Redis, so that each test file that
 * then has none says so in one line instead of repeating the guidance:
 * 'no-own-server' (only REDIS_URL works) or 'none' (no Redis at all).
 */
const GUIDANCE_SHOWN_ENV = 'LATCHKEY_TEST_REDIS_GUIDANCE_SHOWN';

const NO_SERVER = 'latchkey tests need a real Redis server (never a mock), and none could be started.';

function noRedisMessage(dockerReason: string, headline: readonly string[]): string {
  return [
    ...headline,
    'Do one of the following:',
    '  - install redis-server so it is on PATH (Debian/Ubuntu: `apt-get install -y redis-server`;',
    '    macOS: `brew install redis`); tests spawn their own servers on free loopback ports;',
    '  - set REDIS_URL=redis://host:port to use a server you already run (tests use their own',
    '    key prefixes and never flush it); tests that kill or pause a server still need one',
    '    of the other two options;',
    '  - run a Docker engine; the `redis:7` image is then started through testcontainers.',
    `(Docker check: ${dockerReason})`,
  ].join('\n');
}

function noRedisError(): Error {
  return new Error('No Redis for this test: see the message at the start of the run for how to get one.');
}

function noOwnServerError(dockerReason: string): Error {
  if (process.env[GUIDANCE_SHOWN_ENV] === 'none') return noRedisError();
  if (process.env[GUIDANCE_SHOWN_ENV] === 'no-own-server') {
    return new Error(
      'This test needs a Redis server of its own (REDIS_URL is not enough), and there is no ' +
        'redis-server on PATH and no Docker engine; see the note at the start of the run.',
    );
  }
  const headline =
    process.env['REDIS_URL'] === undefined
      ? [NO_SERVER]
      : [NO_SERVER, 'REDIS_URL is set, but this test needs a server it can stop, pause or reconfigure.'];
  return new Error(noRedisMessage(dockerReason, headline));
}

export type RedisAvailability =
  { readonly ok: true; readonly note?: string } | { readonly ok: false; readonly message: string };

/**
 * Whether the harness can get Redis at all, for the global set-up to check once per run:
 * a redis-server binary or a Docker engine, or else REDIS_URL (then with a note that tests
 * needing servers of their own will fail). A REDIS_URL that does not answer is not enough.
 */
export async function redisAvailability(): Promise<RedisAvailability> {
  const url = process.env['REDIS_URL'] ?? '';
  if (url !== '') {
    let target: URL | undefined;
    try {
      target = new URL(url);
    } catch {
      return { ok: false, message: 'REDIS_URL is set but is not a URL (expected redis://host:port).' };
    }
    if (target.protocol === 'redis:') {
      const port = target.port === '' ? 6379 : Number(target.port);
      const host = target.hostname.replace(/^\[|\]$/g, '') || LOOPBACK;
      // Anything but no answer will do: an -NOAUTH reply still proves a server is there.
      const outcome = await pingRedis(host, port, 2_000);
      if (outcome === 'refused' || outcome === 'timeout') {
        return {
          ok: false,
          message: `REDIS_URL points at ${host}:${port}, which does not answer (${outcome}). Start that server, or unset REDIS_URL so the tests start their own.`,
        };
      }
    }
  }
  if (hasRedisServerBinary()) return { ok: true };
  const docker = await dockerRuntime();
  if (!('unavailable' in docker)) return { ok: true };
  if (url !== '') {
    const headline = [
      'Note: the tests use the Redis at REDIS_URL, but there is no redis-server on PATH and no',
      'Docker engine, so the tests that stop, pause or reconfigure a server of their own will fail.',
    ];
    return { ok: true, note: noRedisMessage(docker.unavailable, headline) };
  }
  return { ok: false, message: noRedisMessage(docker.unavailable, [NO_SERVER]) };
}

/**
 * For the global set-up: the guidance has been printed once for this run, and what it found
 * (set before vitest starts the worker processes, which inherit it).
 */
export function markGuidanceShown(found: 'none' | 'no-own-server'): void {
  process.env[GUIDANCE_SHOWN_ENV] = found;
}

type OwnedRedis = ProcessRedis | DockerRedis;

async function startOwnedRedis(args: readonly string[]): Promise<OwnedRedis> {
  if (process.env[GUIDANCE_SHOWN_ENV] === 'none') throw noRedisError();
  if (hasRedisServerBinary()) return startProcessRedis(args);

  const docker = await dockerRuntime();
  if ('unavailable' in docker) throw noOwnServerError(docker.unavailable);
  const container = await startContainer(docker.module, args, undefined);
  return new DockerRedis(docker.module, args, container);
}

/** Starts a dedicated, empty Redis server for the caller, who must stop() it. */
export async function startRedis(options: StartRedisOptions = {}): Promise<RedisInstance> {
  return startOwnedRedis(options.args ?? []);
}

/**
 * The server most integration tests use: REDIS_URL if set (then `instance` is undefined and
 * nothing may be flushed), else one server started per process and killed when it exits.
 * Do not kill or pause the returned instance; take your own from startRedis() for that.
 */
export async function sharedRedis(): Promise<{ url: string; instance?: RedisInstance }> {
  // 'none' also covers a REDIS_URL that did not answer: every test would fail on it alike.
  if (process.env[GUIDANCE_SHOWN_ENV] === 'none') throw noRedisError();
  const fromEnv = process.env['REDIS_URL'];
  if (fromEnv !== undefined && fromEnv !== '') return { url: fromEnv };

  const reg = registry();
  if (reg.sharedInstance !== undefined && !reg.sharedInstance.alive) {
    reg.shared = undefined;
    reg.sharedInstance = undefined;
  }
  if (reg.shared === undefined) {
    const started = startOwnedRedis([]).then((instance): SharedRedis => {
      reg.sharedInstance = instance;
      return { url: instance.url, instance };
    });
    // A failure is remembered too, so every test reports the same clear error quickly
    // instead of probing for Redis again.
    reg.shared = started;
  }
  const shared = await reg.shared;
  return shared.instance === undefined ? { url: shared.url } : { url: shared.url, instance: shared.instance };
}
