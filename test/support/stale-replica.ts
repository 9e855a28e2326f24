/**
 * A master and a read-only replica that lacks every key of it, for tests of a client that
 * reaches a replica by the master's old address (a failover behind a fixed address or a stale
 * DNS entry, a Sentinel client that has not switched yet). The replica follows another, empty
 * master, so whatever a script reads there says the holds are gone; a call that goes through a
 * fault proxy is sent there and back with `viaReplica`, and the replica's READONLY errors are
 * counted. The servers are the test file's own: `stop()` ends them.
 */
import { LockClient, type LockClientOptions, type LockLostEvent } from '../../src/index.js';
import { connectClient, connectNodeRedis, destroyClient, type NodeRedis } from './clients.js';
import type { FaultProxy } from './fault-proxy.js';
import { uniquePrefix } from './keys.js';
import { startRedis, type RedisInstance } from './redis-server.js';
import { waitUntil } from './wait.js';

const LOOPBACK = '127.0.0.1';

export interface StaleReplica {
  readonly master: RedisInstance;
  /** A connection to the master, for looking at the locks. */
  readonly admin: NodeRedis;
  /** READONLY errors the replica has answered so far. */
  refusals(): Promise<number>;
  /**
   * Sends the proxy's connections to the replica, runs `start`, waits until the replica has
   * refused a call, then sends them back to the master; returns what `start` returned.
   */
  viaReplica<T>(proxy: FaultProxy, start: () => T): Promise<T>;
  /** Ends the servers and the connections to them. */
  stop(): Promise<void>;
}

export async function startStaleReplica(): Promise<StaleReplica> {
  const master = await startRedis();
  // A replica of another, empty master: read-only, and without any of the master's keys.
  const other = await startRedis();
  const replica = await startRedis({ args: ['--replicaof', LOOPBACK, String(other.port)] });
  const admin = await connectNodeRedis({ url: master.url });
  const replicaAdmin = await connectNodeRedis({ url: replica.url });
  await waitUntil(
    'the replica is linked',
    async () => (await replicaAdmin.info('replication')).includes('master_link_status:up'),
    10_000,
  );

  async function refusals(): Promise<number> {
    const line = (await replicaAdmin.info('errorstats'))
      .split('\n')
      .find((l) => l.startsWith('errorstat_READONLY:'));
    return Number(/count=(\d+)/.exec(line ?? '')?.[1] ?? 0);
  }

  return {
    master,
    admin,
    refusals,
    async viaReplica<T>(proxy: FaultProxy, start: () => T): Promise<T> {
      const before = await refusals();
      proxy.retarget(LOOPBACK, replica.port);
      proxy.resetAll();
      const started = start();
      await waitUntil('the replica refused a call', async () => (await refusals()) > before, 10_000);
      proxy.retarget(LOOPBACK, master.port);
      proxy.resetAll();
      return started;
    },
    async stop(): Promise<void> {
      destroyClient(admin);
      destroyClient(replicaAdmin);
      await Promise.all([master.stop(), other.stop(), replica.stop()]);
    },
  };
}

export interface ProxiedLockClient {
  readonly locks: LockClient;
  /** Every `lockLost` event the client emitted. */
  readonly lost: LockLostEvent[];
  close(): Promise<void>;
}

/** A LockClient whose connection goes through `proxy`, with its lost holds recorded. */
export async function lockClientVia(
  proxy: FaultProxy,
  options: Pick<LockClientOptions, 'watchdogTimeoutMs'> = {},
): Promise<ProxiedLockClient> {
  const redis = await connectClient({ url: proxy.url });
  const locks = new LockClient(redis, { keyPrefix: uniquePrefix('stale-replica'), ...options });
  locks.on('error', () => undefined);
  const lost: LockLostEvent[] = [];
  locks.on('lockLost', (event) => lost.push(event));
  return {
    locks,
    lost,
    close: async () => {
      await locks.close();
      destroyClient(redis);
    },
  };
}
