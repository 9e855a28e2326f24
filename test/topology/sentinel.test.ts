/**
 * A LockClient on a node-redis `createSentinel()` client, against a master, two replicas and
 * three sentinels: locks work, the WAIT of `syncReplicas` stays on the connection of its write,
 * and a waiter is woken after the master is killed and replaced.
 */
import { Redis } from 'ioredis';
import { createSentinel } from 'redis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LockClient, type LockClientOptions } from '../../src/index.js';
import { MASTER_NAME, startReplicated, type Replicated } from '../support/replication.js';

type Sentinel = ReturnType<typeof createSentinel>;

/**
 * A failover here waits for the killed master to come back as a replica and catch up, which a
 * busy machine can stretch to a minute (the harness allows 60 s): the lease and the wait outlast
 * that, so the release is what the waiter hears, and the test is timed by what it checks.
 */
const FAILOVER_LEASE_MS = 100_000;
const FAILOVER_TEST_MS = 150_000;
/**
 * A waiter has no timer of its own before the holder's lease ends (FAILOVER_LEASE_MS), so a
 * waiter that gets in well before then was woken. The bound leaves room for the clients' own
 * reconnect back-off after the failover on a loaded machine (3.5 s seen at load 10).
 */
const WOKEN_WITHIN_MS = FAILOVER_LEASE_MS / 10;

describe('Sentinel (node-redis createSentinel)', () => {
  let cluster: Replicated;
  const sentinels: Sentinel[] = [];
  const lockClients: LockClient[] = [];

  async function connectSentinel(masterPoolSize = 1): Promise<Sentinel> {
    const sentinel = createSentinel({
      name: MASTER_NAME,
      sentinelRootNodes: [...cluster.sentinelRootNodes],
      masterPoolSize,
      scanInterval: 200,
    });
    sentinel.on('error', () => undefined);
    await sentinel.connect();
    sentinels.push(sentinel);
    return sentinel;
  }

  function locksOn(sentinel: Sentinel, options: LockClientOptions = {}): LockClient {
    const locks = new LockClient(sentinel, { keyPrefix: 'sentinel:', ...options });
    locks.on('error', () => undefined);
    lockClients.push(locks);
    return locks;
  }

  beforeAll(async () => {
    cluster = await startReplicated();
  }, 60_000);

  // A failover of an earlier test, or one the sentinels started on their own, is over: every
  // replica follows the master the sentinels name.
  beforeEach(() => cluster.settled(), 70_000);

  afterEach(async () => {
    await Promise.all(lockClients.splice(0).map((locks) => locks.close()));
    await Promise.all(
      sentinels.splice(0).map((sentinel) => sentinel.close().catch(() => sentinel.destroy())),
    );
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  it('every kind of lock works through a Sentinel client, hand-over included', async () => {
    const [a, b] = [await connectSentinel(), await connectSentinel(2)];
    const first = locksOn(a);
    const second = locksOn(b, { syncReplicas: { count: 2, timeoutMs: 500 } });
    for (const make of [
      (locks: LockClient) => locks.lock('kind-lock'),
      (locks: LockClient) => locks.fencedLock('kind-fenced'),
      (locks: LockClient) => locks.fairLock('kind-fair'),
      (locks: LockClient) => locks.readWriteLock('kind-rw').writeLock(),
    ]) {
      const held = await make(first).acquire();
      const waiting = make(second).acquire({ waitMs: 5_000 });
      await new Promise((resolve) => setTimeout(resolve, 100));
      await held.release();
      const handed = await waiting;
      await handed.release();
    }
    const semaphore = first.semaphore('kind-semaphore', { permits: 1 });
    await semaphore.acquire();
    await semaphore.release();
  });

  it(
    'a waiter is woken after the master is killed and replaced, and takes the lock on the new master',
    async () => {
      const holderSentinel = await connectSentinel();
      const waiterSentinel = await connectSentinel();
      const holder = locksOn(holderSentinel, { watchdogTimeoutMs: 30_000 });
      const waiter = locksOn(waiterSentinel);
      // Held with a lease longer than the failover, then the master dies: the new master has the hold
      // (it was replicated). Only the unlock message on the new master can wake the waiter in
      // time: its subscription must have followed the master.
      const lease = await holder.lock('failover').acquire({ leaseMs: FAILOVER_LEASE_MS });
      const waiting = waiter.lock('failover').acquire({ waitMs: FAILOVER_LEASE_MS });
      await new Promise((resolve) => setTimeout(resolve, 200));
      // The hold and the waiter's entry are on both replicas before the master dies.
      await cluster.settled();
      const before = await cluster.masterPort();
      const { to } = await cluster.failover();
      expect(to).not.toBe(before);
      // The holder releases on the new master (its client followed): the waiter hears it there.
      const releasedAt = performance.now();
      await lease.release().catch(() => undefined);
      const taken = await waiting;
      expect(performance.now() - releasedAt).toBeLessThan(WOKEN_WITHIN_MS);
      expect(taken.key).toBe(lease.key);
      try {
        await taken.release();
      } catch (error) {
        // Say whether the sentinels moved the master again meanwhile: a grant made on one master
        // and not yet replicated is gone on the next (asynchronous replication).
        const now = await cluster.masterPort().catch(() => undefined);
        throw new Error(
          `the waiter's release failed; the master was ${to} after the failover and is ${String(now)} now`,
          { cause: error },
        );
      }
    },
    FAILOVER_TEST_MS,
  );

  it(
    'an ioredis client with `sentinels` works too, and its waiter is woken on the new master',
    async () => {
      const ioredis = (): Redis => {
        const client = new Redis({
          name: MASTER_NAME,
          sentinels: [...cluster.sentinelRootNodes],
          maxRetriesPerRequest: null,
        });
        client.on('error', () => undefined);
        return client;
      };
      const [a, b] = [ioredis(), ioredis()];
      try {
        const holder = new LockClient(a, { keyPrefix: 'sentinel-io:' });
        const waiter = new LockClient(b, {
          keyPrefix: 'sentinel-io:',
          syncReplicas: { count: 1, timeoutMs: 500 },
        });
        for (const locks of [holder, waiter]) {
          locks.on('error', () => undefined);
          lockClients.push(locks);
        }
        const lease = await holder.lock('io-failover').acquire({ leaseMs: FAILOVER_LEASE_MS });
        const waiting = waiter.lock('io-failover').acquire({ waitMs: FAILOVER_LEASE_MS });
        await new Promise((resolve) => setTimeout(resolve, 200));
        // The hold and the waiter's entry are on both replicas before the master dies.
        await cluster.settled();
        await cluster.failover();
        const releasedAt = performance.now();
        await lease.release();
        const taken = await waiting;
        expect(performance.now() - releasedAt).toBeLessThan(WOKEN_WITHIN_MS);
        await taken.release();
      } finally {
        a.disconnect();
        b.disconnect();
      }
    },
    FAILOVER_TEST_MS,
  );
});
