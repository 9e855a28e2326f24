import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { LockError } from '../../src/index.js';
import {
  ClientClosedError,
  LockClient,
  LockLostError,
  LockNotOwnedError,
  type AcquiredEvent,
  type LockClientOptions,
  type LockLostEvent,
  type ReleasedEvent,
} from '../../src/index.js';
import { uniquePrefix } from '../support/keys.js';
import { sharedRedis } from '../support/redis-server.js';
import { commandsOf } from '../support/clients.js';
import { testResources, type LockConnection, type Redis } from '../support/resources.js';
import { sleep } from '../support/wait.js';

describe('Lock and Lease API', () => {
  let url: string;
  /** The user's client, shared by the LockClients under test. */
  let redis: LockConnection;
  let admin: Redis;
  const perFile = testResources(() => url);
  const res = testResources(() => url);

  function lockClient(options: LockClientOptions = {}): LockClient {
    return res.track(new LockClient(redis, { keyPrefix: uniquePrefix('lock-api'), ...options }));
  }

  beforeAll(async () => {
    ({ url } = await sharedRedis());
    redis = await perFile.connectLocks();
    admin = await perFile.connect();
  });

  afterEach(() => res.closeAll());

  afterAll(() => perFile.closeAll());

  it('reports isLocked, remainingTtlMs and forceUnlock truthfully', async () => {
    const lock = lockClient({ watchdogTimeoutMs: 5_000 }).lock('invoice:7');
    expect(await lock.isLocked()).toBe(false);
    expect(await lock.remainingTtlMs()).toBeNull();
    expect(await lock.forceUnlock()).toBe(false);

    const lease = await lock.acquire();
    expect(await lock.isLocked()).toBe(true);
    const ttl = await lock.remainingTtlMs();
    expect(ttl).toBeGreaterThan(4_000);
    expect(ttl).toBeLessThanOrEqual(5_000);

    // A key without expiry (as a foreign tool could leave) reads as Infinity, not -1.
    await admin.persist(lock.key);
    expect(await lock.remainingTtlMs()).toBe(Number.POSITIVE_INFINITY);

    expect(await lock.forceUnlock()).toBe(true);
    expect(await admin.exists(lock.key)).toBe(0);
    expect(lease.signal.aborted).toBe(true);
    expect(lease.signal.reason).toBeInstanceOf(LockLostError);
    expect((lease.signal.reason as LockLostError).reason).toBe('force-unlocked');
    await expect(lease.release()).rejects.toBeInstanceOf(LockNotOwnedError);
  });

  it('emits acquired and released with hold counts, and lockLost with the signal’s error', async () => {
    const locks = lockClient();
    const acquired: AcquiredEvent[] = [];
    const released: ReleasedEvent[] = [];
    const lost: LockLostEvent[] = [];
    locks.on('acquired', (event) => acquired.push(event));
    locks.on('released', (event) => released.push(event));
    locks.on('lockLost', (event) => lost.push(event));
    const lock = locks.lock('order:11');

    await lock.withLock(async () => {
      await lock.withLock(async () => {});
    });
    expect(acquired.map((e) => [e.name, e.key, e.holdCount])).toEqual([
      ['order:11', lock.key, 1],
      ['order:11', lock.key, 2],
    ]);
    for (const event of acquired) expect(event.waitedMs).toBeGreaterThanOrEqual(0);
    expect(released.map((e) => e.holdCount)).toEqual([1, 0]);

    const lease = await lock.acquire();
    await admin.del(lock.key);
    await lock.forceUnlock();
    expect(lost).toHaveLength(1);
    expect(lost[0]?.error).toBe(lease.signal.reason);
    expect(lost[0]?.name).toBe('order:11');
  });

  it('a listener that throws does not break the lock; the throw is reported as an error event', async () => {
    const locks = lockClient();
    const errors: Error[] = [];
    locks.on('error', (error) => errors.push(error));
    locks.on('acquired', () => {
      throw new Error('listener bug');
    });
    const lease = await locks.lock('coupon:3').acquire();
    expect(lease.holdCount).toBe(1);
    await lease.release();
    expect(errors.map((e) => e.message)).toEqual(['listener bug']);
  });

  it('releases a lease once: a second release rejects with LockNotOwnedError', async () => {
    const lock = lockClient().lock('invoice:8');
    const lease = await lock.acquire();
    expect(lease.released).toBe(false);
    await lease.release();
    expect(lease.released).toBe(true);
    const error: unknown = await lease.release().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotOwnedError);
    expect((error as LockError).code).toBe('NOT_OWNER');
    expect(await lock.isLocked()).toBe(false);
  });

  it('`await using` releases the lease at the end of the block, also after an explicit release', async () => {
    const lock = lockClient().lock('invoice:9');
    {
      await using lease = await lock.acquire();
      expect(lease.holdCount).toBe(1);
      expect(await lock.isLocked()).toBe(true);
    }
    expect(await lock.isLocked()).toBe(false);
    {
      await using lease = await lock.acquire();
      await lease.release();
    }
    expect(await lock.isLocked()).toBe(false);
  });

  it('withLock returns what the callback returns and rethrows what it throws, releasing either way', async () => {
    const lock = lockClient().lock('cart:5');
    await expect(lock.withLock(() => 42)).resolves.toBe(42);
    const failure = new Error('payment declined');
    await expect(
      lock.withLock(async () => {
        await Promise.resolve();
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(await lock.isLocked()).toBe(false);
  });

  it('withLock rejects with the LockLostError when the lock was lost while the callback ran', async () => {
    const lock = lockClient({ watchdogTimeoutMs: 300 }).lock('report:1');
    const outcome = await lock
      .withLock(async (lease) => {
        await admin.del(lock.key);
        await new Promise<void>((resolve) => lease.signal.addEventListener('abort', () => resolve()));
        return 'done';
      })
      .catch((e: unknown) => e);
    expect(outcome).toBeInstanceOf(LockLostError);
    expect((outcome as LockLostError).reason).toBe('not-owner');
  });

  it('close() rejects waiting acquisitions, releases held locks and refuses new calls', async () => {
    const keyPrefix = uniquePrefix('lock-api-close');
    const holder = lockClient({ keyPrefix });
    const waiterClient = lockClient({ keyPrefix });
    const held = await holder.lock('shipment:4').acquire();
    const waiting = waiterClient
      .lock('shipment:4')
      .acquire()
      .catch((e: unknown) => e);
    // Let the waiter subscribe and queue.
    await sleep(100);

    await waiterClient.close();
    expect(await waiting).toBeInstanceOf(ClientClosedError);
    expect(waiterClient.closed).toBe(true);
    expect(() => waiterClient.lock('shipment:4')).not.toThrow();
    await expect(waiterClient.lock('shipment:4').acquire()).rejects.toBeInstanceOf(ClientClosedError);

    await holder.close();
    expect(held.signal.aborted).toBe(true);
    expect((held.signal.reason as LockLostError).reason).toBe('client-closed');
    // The lock was handed back rather than left to expire.
    expect(await admin.exists(held.key)).toBe(0);
    // The user's client stays open.
    expect(await commandsOf(redis).sendCommand(['PING'])).toBe('PONG');
  });
});
