/**
 * What integration tests open on a Redis server — connections, LockClients, MONITOR sockets,
 * worker processes — tracked so that one closeAll() in afterEach (or afterAll, for what a
 * file opens once) closes all of it.
 *
 * Connections and LockClients get an 'error' listener that ignores the error: tests that
 * break servers or connections must not crash on it, and the tests' own assertions say what
 * went wrong.
 */
import { LockClient, type LockClientOptions } from '../../src/index.js';
import { spawnProcess, spawnWorker, type Worker } from './child.js';
import {
  connectClient,
  connectNodeRedis,
  destroyClient,
  type LockConnection,
  type NodeRedis,
} from './clients.js';
import { monitorCommands, type CommandMonitor } from './monitor.js';

/** The type of a client createClient({ url }) returns: what tests send their own commands on. */
export type Redis = NodeRedis;

export type { LockConnection } from './clients.js';

/** The unlock channel of a lock key without a hash tag, spelt out as Redisson does. */
export function channelOf(key: string): string {
  return `redisson_lock__channel:{${key}}`;
}

export interface ConnectOptions {
  /** Default: the url the resources were created with. */
  readonly url?: string;
  /** CLIENT SETNAME for the connection. */
  readonly name?: string;
}

export interface TestResources {
  /** A new connected node-redis client (default: to the resources' url), for the test's own commands. */
  connect(options?: ConnectOptions): Promise<Redis>;
  /**
   * A new connected client of the library under test (LATCHKEY_TEST_CLIENT, see clients.ts),
   * for a LockClient.
   */
  connectLocks(options?: ConnectOptions): Promise<LockConnection>;
  /** Closes `locks` in closeAll(); ignores its 'error' events. */
  track(locks: LockClient): LockClient;
  /** A LockClient on a connection of its own, of the library under test. */
  lockClient(options?: LockClientOptions): Promise<LockClient>;
  /**
   * PUBSUB NUMSUB for one channel, on a connection opened for it on first use; for a pattern
   * (`*`), the sum over every channel it matches.
   */
  numsub(channel: string): Promise<number>;
  /** MONITOR on the resources' url, confirmed before this resolves. */
  monitor(): Promise<CommandMonitor>;
  /** spawnWorker(), killed in closeAll() if it still runs. */
  worker(scriptPath: string, env?: Record<string, string>): Worker;
  /** spawnProcess() (a worker in any language), killed in closeAll() if it still runs. */
  spawn(command: string, args: readonly string[], env?: Record<string, string>): Worker;
  /** Stops workers and monitors, closes LockClients, then destroys connections. */
  closeAll(): Promise<void>;
}

/**
 * PUBSUB NUMSUB of `channel` on `redis`; for a pattern (`*`, as a fair lock's waiters listen each
 * on a channel of its own), the subscriptions of every channel it matches, summed.
 */
export async function numsubOn(redis: Redis, channel: string): Promise<number> {
  const channels = channel.includes('*')
    ? (await redis.sendCommand<unknown[]>(['PUBSUB', 'CHANNELS', channel])).map(String)
    : [channel];
  if (channels.length === 0) return 0;
  const reply = await redis.sendCommand<unknown[]>(['PUBSUB', 'NUMSUB', ...channels]);
  return reply.filter((_, i) => i % 2 === 1).reduce<number>((sum, count) => sum + Number(count), 0);
}

/** `url` is read on use, so it may be set later, in beforeAll. */
export function testResources(url: () => string): TestResources {
  const workers: Worker[] = [];
  const monitors: CommandMonitor[] = [];
  const lockClients: LockClient[] = [];
  const clients: LockConnection[] = [];
  let numsubClient: Promise<Redis> | undefined;

  async function connect(options: ConnectOptions = {}): Promise<Redis> {
    const client = await connectNodeRedis({ url: options.url ?? url(), ...options });
    clients.push(client);
    return client;
  }

  async function connectLocks(options: ConnectOptions = {}): Promise<LockConnection> {
    const client = await connectClient({ url: options.url ?? url(), ...options });
    clients.push(client);
    return client;
  }

  function track(locks: LockClient): LockClient {
    locks.on('error', () => {});
    lockClients.push(locks);
    return locks;
  }

  return {
    connect,
    connectLocks,
    track,
    async lockClient(options?: LockClientOptions): Promise<LockClient> {
      return track(new LockClient(await connectLocks(), options));
    },
    async numsub(channel: string): Promise<number> {
      numsubClient ??= connect();
      return numsubOn(await numsubClient, channel);
    },
    async monitor(): Promise<CommandMonitor> {
      const started = await monitorCommands(url());
      monitors.push(started);
      return started;
    },
    worker(scriptPath: string, env?: Record<string, string>): Worker {
      const worker = spawnWorker(scriptPath, env);
      workers.push(worker);
      return worker;
    },
    spawn(command: string, args: readonly string[], env?: Record<string, string>): Worker {
      const worker = spawnProcess(command, args, env);
      workers.push(worker);
      return worker;
    },
    async closeAll(): Promise<void> {
      await Promise.all(workers.splice(0).map((worker) => worker.stop()));
      await Promise.all(monitors.splice(0).map((monitor) => monitor.stop()));
      await Promise.all(lockClients.splice(0).map((locks) => locks.close()));
      numsubClient = undefined;
      for (const client of clients.splice(0)) destroyClient(client);
    },
  };
}
