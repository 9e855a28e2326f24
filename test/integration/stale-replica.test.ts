/**
 * A client that reaches a read-only replica by the master's old address (a failover behind a
 * fixed address or a stale DNS entry, a Sentinel client that has not switched yet) must not be
 * told by it that its hold is gone: the replica may not have the latest writes. The lock's
 * scripts refuse to answer from reads alone there (READONLY), so the call is retried until the
 * client reaches the master again, and the hold is neither declared lost nor left locked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockClient, type LockLostEvent } from '../../src/index.js';
import { connectClient, connectNodeRedis, destroyClient } from '../support/clients.js';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.js';
import { uniquePrefix } from '../support/keys.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { waitUntil } from '../support/wait.js';

describe('a client that reaches a read-only replica', () => {
  let master: RedisInstance;
  let other: RedisInstance;
  let replica: RedisInstance;
  let admin: Awaited<ReturnType<typeof connectNodeRedis>>;
  let replicaAdmin: Awaited<ReturnType<typeof connectNodeRedis>>;

  beforeAll(async () => {
    master = await startRedis();
    // A replica of another, empty master: read-only, and without any of the master's keys.
    other = await startRedis();
    replica = await startRedis({ args: ['--replicaof', '127.0.0.1', String(other.port)] });
    admin = await connectNodeRedis({ url: master.url });
    replicaAdmin = await connectNodeRedis({ url: replica.url });
    await waitUntil(
      'the replica is linked',
      async () => (await replicaAdmin.info('replication')).includes('master_link_status:up'),
      10_000,
    );
  }, 30_000);

  afterAll(async () => {
    destroyClient(admin);
    destroyClient(replicaAdmin);
    await Promise.all([master?.stop(), other?.stop(), replica?.stop()]);
  });

  /** READONLY errors the replica has answered so far. */
  async function refusals(): Promise<number> {
    const line = (await replicaAdmin.info('errorstats'))
      .split('\n')
      .find((l) => l.startsWith('errorstat_READONLY:'));
    return Number(/count=(\d+)/.exec(line ?? '')?.[1] ?? 0);
  }

  /** A LockClient whose connection goes through `proxy`, with its lost holds recorded. */
  async function lockClient(
    proxy: FaultProxy,
    options: { watchdogTimeoutMs?: number } = {},
  ): Promise<{ locks: LockClient; lost: LockLostEvent[]; close: () => Promise<void> }> {
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

  /**
   * Sends the proxy's connections to the replica, runs `start`, waits until the replica has
   * refused a call, then sends them back to the master; returns what `start` returned.
   */
  async function viaReplica<T>(proxy: FaultProxy, start: () => T): Promise<T> {
    const before = await refusals();
    proxy.retarget('127.0.0.1', replica.port);
    proxy.resetAll();
    const started = start();
    await waitUntil('the replica refused a call', async () => (await refusals()) > before, 10_000);
    proxy.retarget('127.0.0.1', master.port);
    proxy.resetAll();
    return started;
  }

  it('a release that reaches the replica is retried on the master, not reported as a lost hold', async () => {
    const proxy = await startFaultProxy({ targetHost: '127.0.0.1', targetPort: master.port });
    const client = await lockClient(proxy);
    try {
      const lease = await client.locks.lock('ledger').acquire();
      expect(await admin.exists(lease.key)).toBe(1);
      // Wrapped: the release's promise settles only once the master answers.
      const { released } = await viaReplica(proxy, () => ({ released: lease.release() }));
      await released;
      expect(await admin.exists(lease.key)).toBe(0);
      expect(client.lost).toEqual([]);
    } finally {
      await client.close();
      await proxy.close();
    }
  }, 30_000);

  it('a renewal that reaches the replica is retried on the master: the hold lives on', async () => {
    const proxy = await startFaultProxy({ targetHost: '127.0.0.1', targetPort: master.port });
    // Renewed every second; retried every 250 ms after a failed call.
    const client = await lockClient(proxy, { watchdogTimeoutMs: 3_000 });
    try {
      const lease = await client.locks.lock('ledger').acquire();
      await viaReplica(proxy, () => undefined);
      // A renewal on the master again: the lease is set anew.
      await waitUntil('renewed on the master', async () => (await admin.pTTL(lease.key)) > 2_500, 5_000);
      expect(client.lost).toEqual([]);
      expect(lease.signal.aborted).toBe(false);
      await lease.release();
      expect(await admin.exists(lease.key)).toBe(0);
    } finally {
      await client.close();
      await proxy.close();
    }
  }, 30_000);
});
