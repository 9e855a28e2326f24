// The Redis server the benchmark runs against: its own redis-server on a free loopback port
// (no persistence), or REDIS_URL when given; plus the admin reads (INFO) the scenarios need.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { createClient } from 'redis';

export type Admin = ReturnType<typeof createClient>;

export interface BenchRedis {
  readonly url: string;
  /** Whether the harness started this server (and so may flush it). */
  readonly spawned: boolean;
  readonly admin: Admin;
  stop(): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function spawnServer(port: number): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  // Never leave a server behind, however the harness ends.
  const kill = (): void => {
    if (child.exitCode === null) child.kill('SIGKILL');
  };
  process.once('exit', kill);
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`redis-server did not start:\n${output}`)), 15_000);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited with ${String(code)}:\n${output}`));
    });
  });
}

export async function startBenchRedis(): Promise<BenchRedis> {
  const given = process.env['REDIS_URL'];
  let child: ChildProcess | undefined;
  let url: string;
  if (given !== undefined && given !== '') {
    url = given;
  } else {
    const port = await freePort();
    child = await spawnServer(port);
    url = `redis://127.0.0.1:${port}`;
  }
  const admin = createClient({ url, name: 'bench-admin' });
  admin.on('error', () => undefined);
  await admin.connect();
  return {
    url,
    spawned: child !== undefined,
    admin,
    async stop(): Promise<void> {
      admin.destroy();
      if (child !== undefined && child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
    },
  };
}

/** Flushes the server between runs, only when the harness started it. */
export async function flushIfOwned(redis: BenchRedis): Promise<void> {
  if (redis.spawned) await redis.admin.sendCommand(['FLUSHALL']);
}

export type Info = ReadonlyMap<string, string>;

export async function info(admin: Admin, ...sections: string[]): Promise<Info> {
  const reply: unknown = await admin.sendCommand(['INFO', ...sections]);
  if (typeof reply !== 'string') throw new Error('INFO did not answer with text');
  const text = reply;
  const fields = new Map<string, string>();
  for (const line of text.split('\r\n')) {
    const at = line.indexOf(':');
    if (at > 0 && !line.startsWith('#')) fields.set(line.slice(0, at), line.slice(at + 1));
  }
  return fields;
}

/** Commands the harness itself sends between snapshots; never counted against a contender. */
const HARNESS_COMMANDS = new Set(['info', 'config']);

/** Total calls in INFO commandstats, the harness's own left out. */
export function commandCalls(stats: Info): number {
  let total = 0;
  for (const [field, value] of stats) {
    if (!field.startsWith('cmdstat_')) continue;
    const name = field.slice('cmdstat_'.length);
    if (HARNESS_COMMANDS.has(name)) continue;
    const calls = /calls=(\d+)/.exec(value);
    if (calls?.[1] !== undefined) total += Number(calls[1]);
  }
  return total;
}

/** Redis CPU time (user + sys) in microseconds. */
export function cpuUs(stats: Info): number {
  const user = Number(stats.get('used_cpu_user') ?? 0);
  const sys = Number(stats.get('used_cpu_sys') ?? 0);
  return (user + sys) * 1e6;
}

export interface ServerCost {
  readonly commands: number;
  readonly cpuUs: number;
}

/** Snapshot of what the server has done so far; subtract two with {@link costSince}. */
export async function serverCost(admin: Admin): Promise<ServerCost> {
  const stats = await info(admin, 'commandstats', 'cpu');
  return { commands: commandCalls(stats), cpuUs: cpuUs(stats) };
}

export function costSince(before: ServerCost, after: ServerCost): ServerCost {
  return { commands: after.commands - before.commands, cpuUs: after.cpuUs - before.cpuUs };
}

export async function pubsubChannels(admin: Admin): Promise<number> {
  const stats = await info(admin, 'stats');
  return Number(stats.get('pubsub_channels') ?? 0);
}
