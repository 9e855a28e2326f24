import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { LockClient, LockTimeoutError } from '../../src/index.js';
import { uniquePrefix } from '../support/keys.js';
import { REDISSON_LEASE_MS, redissonChannel, redissonTryLock, redissonUnlock } from '../support/redisson.js';
import { sharedRedis } from '../support/redis-server.js';
import { testResources, type LockConnection, type Redis } from '../support/resources.js';
import { sleep, waitUntil } from '../support/wait.js';

const WATCHDOG_TIMEOUT_MS = 2_000;

describe('wire compatibility with Redisson RLock', () => {
  let url: string;
  /** The fake Java client: raw commands on a connection latchkey does not use. */
  let java: Redis;
  let redis: LockConnection;
  const perFile = testResources(() => url);
  const res = testResources(() => url);

  /** A Redisson client identity: `<uuid>:<threadId>`. */
  const javaField = `${randomUUID()}:1`;

  function lockClient(keyPrefix: string): LockClient {
    return res.track(new LockClient(redis, { keyPrefix, watchdogTimeoutMs: WATCHDOG_TIMEOUT_MS }));
  }

  /** Holds `key` as Redisson does: HINCRBY owner 1 + PEXPIRE 30 s. */
  async function javaHold(key: string): Promise<void> {
    await java.hIncrBy(key, javaField, 1);
    await java.pExpire(key, REDISSON_LEASE_MS);
  }

  /** Releases Redisson's hold as its unlock does at count 0: DEL + PUBLISH 0. */
  async function javaRelease(key: string): Promise<void> {
    await java.del(key);
    await java.publish(redissonChannel(key), '0');
  }

  async function javaTryLock(key: string): Promise<unknown> {
    return redissonTryLock(java, key, javaField);
  }

  async function subscribe(channel: string): Promise<Array<[string, string]>> {
    const subscriber = await res.connect();
    const messages: Array<[string, string]> = [];
    await subscriber.subscribe(channel, (message, from) => {
      messages.push([message, from]);
    });
    return messages;
  }

  beforeAll(async () => {
    ({ url } = await sharedRedis());
    java = await perFile.connect();
    redis = await perFile.connectLocks();
  });

  afterEach(() => res.closeAll());

  afterAll(() => perFile.closeAll());

  it("a Redisson client's hold blocks latchkey and is left as it was", async () => {
    const locks = lockClient(uniquePrefix('wire-block'));
    const lock = locks.lock('invoice:42');
    await javaHold(lock.key);

    expect(await lock.tryAcquire()).toBeNull();
    const startedAt = performance.now();
    const error: unknown = await lock.acquire({ waitMs: 200 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockTimeoutError);
    expect(error).toMatchObject({ code: 'ACQUIRE_TIMEOUT' });
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(190);

    expect(await java.hGetAll(lock.key)).toEqual({ [javaField]: '1' });
    expect(await java.pTTL(lock.key)).toBeGreaterThan(REDISSON_LEASE_MS - 5_000);
    expect(await lock.isLocked()).toBe(true);
    await java.del(lock.key);
  });

  it("a Redisson client's release (DEL + PUBLISH 0) wakes a waiting latchkey acquire at once", async () => {
    const locks = lockClient(uniquePrefix('wire-wake'));
    const lock = locks.lock('invoice:43');
    const channel = redissonChannel(lock.key);
    await javaHold(lock.key);

    let resolvedAt: number | undefined;
    const acquiring = lock.acquire({ waitMs: 20_000 }).then((lease) => {
      resolvedAt = performance.now();
      return lease;
    });
    // Waiting means subscribed to Redisson's channel for this key.
    await waitUntil(
      'latchkey subscribed to the unlock channel',
      async () => (await res.numsub(channel)) === 1,
    );
    await sleep(50);
    expect(resolvedAt).toBeUndefined();
    expect(await java.pTTL(lock.key)).toBeGreaterThan(REDISSON_LEASE_MS - 5_000);

    await java.del(lock.key);
    const publishedAt = performance.now();
    await java.publish(channel, '0');
    const lease = await acquiring;
    // The key had ~30 s left: only the message can have woken the waiter this soon.
    expect((resolvedAt ?? Number.POSITIVE_INFINITY) - publishedAt).toBeLessThan(1_000);
    expect(Object.values(await java.hGetAll(lock.key))).toEqual(['1']);
    await lease.release();
    expect(await java.exists(lock.key)).toBe(0);
  });

  it('holds a lock in exactly the shape a Redisson client expects', async () => {
    const locks = lockClient(uniquePrefix('wire-shape'));
    const lock = locks.lock('invoice:44');

    const check = async (): Promise<void> => {
      expect(await java.type(lock.key)).toBe('hash');
      const hash = await java.hGetAll(lock.key);
      const fields = Object.keys(hash);
      expect(fields).toHaveLength(1);
      const field = fields[0] ?? '';
      expect(field).toMatch(/^[0-9a-f-]{36}:\d+$/);
      expect(hash[field]).toBe('1');
      const pttl = await java.pTTL(lock.key);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(WATCHDOG_TIMEOUT_MS);
    };

    const lease = await lock.acquire();
    await check();
    await lease.release();
    expect(await java.exists(lock.key)).toBe(0);

    await lock.withLock(check);
    expect(await java.exists(lock.key)).toBe(0);
  });

  it('publishes exactly "0" on redisson_lock__channel:{key} on full release, nothing on a partial one', async () => {
    const locks = lockClient(uniquePrefix('wire-publish'));
    const lock = locks.lock('invoice:45');
    const channel = `redisson_lock__channel:{${lock.key}}`;
    const messages = await subscribe(channel);

    await lock.withLock(async () => {
      const inner = await lock.acquire();
      await inner.release();
    });
    await waitUntil('the unlock message', () => messages.length > 0);
    // Messages of one channel arrive in order: a message for the partial release would be first.
    expect(messages).toEqual([['0', channel]]);
  });

  it("Redisson's tryLock script returns a PTTL while latchkey holds and nil after it releases", async () => {
    const locks = lockClient(uniquePrefix('wire-trylock'));
    const lock = locks.lock('invoice:46');

    const lease = await lock.acquire();
    const reply = await javaTryLock(lock.key);
    expect(typeof reply).toBe('number');
    expect(reply).toBeGreaterThan(0);
    expect(reply).toBeLessThanOrEqual(WATCHDOG_TIMEOUT_MS);
    // The refused Java attempt changed nothing.
    expect(Object.values(await java.hGetAll(lock.key))).toEqual(['1']);
    await lease.release();

    expect(await javaTryLock(lock.key)).toBeNull();
    expect(await java.hGetAll(lock.key)).toEqual({ [javaField]: '1' });
    // Now Java holds it: latchkey is refused, and Redisson's own unlock script wakes a waiter.
    expect(await lock.tryAcquire()).toBeNull();
    const acquiring = lock.acquire({ waitMs: 20_000 });
    await waitUntil('latchkey subscribed', async () => (await res.numsub(redissonChannel(lock.key))) === 1);
    const unlockedAt = performance.now();
    const unlocked = await redissonUnlock(java, lock.key, javaField);
    expect(unlocked).toBe(1);
    const next = await acquiring;
    expect(performance.now() - unlockedAt).toBeLessThan(1_000);
    await next.release();
    expect(await java.exists(lock.key)).toBe(0);
  });

  describe('a key with a hash tag', () => {
    it('uses redisson_lock__channel:<key> unchanged, for both directions', async () => {
      const prefix = uniquePrefix('wire-tag');
      const locks = lockClient(prefix);
      const lock = locks.lock('{orders}:7');
      expect(lock.key).toBe(`${prefix}{orders}:7`);
      const channel = `redisson_lock__channel:${prefix}{orders}:7`;
      const messages = await subscribe(channel);

      // latchkey -> Redisson: the release is announced on the channel Redisson listens to.
      const lease = await lock.acquire();
      await lease.release();
      await waitUntil('the unlock message', () => messages.length > 0);
      expect(messages).toEqual([['0', channel]]);

      // Redisson -> latchkey: a waiter listens on that same channel and is woken by it.
      await javaHold(lock.key);
      const acquiring = lock.acquire({ waitMs: 20_000 });
      await waitUntil('latchkey subscribed', async () => (await res.numsub(channel)) === 2);
      await javaRelease(lock.key);
      const releasedAt = performance.now();
      const next = await acquiring;
      expect(performance.now() - releasedAt).toBeLessThan(1_000);
      await next.release();
    });

    it('uses redisson_lock__channel:{orders}:7 for the key {orders}:7', async () => {
      // Hash-tagged prefix so the key is exactly `{orders-<random>}:7` without touching a shared name.
      const tag = uniquePrefix('orders').slice(0, -1);
      const locks = lockClient(`{${tag}}:`);
      const lock = locks.lock('7');
      expect(lock.key).toBe(`{${tag}}:7`);
      const channel = `redisson_lock__channel:{${tag}}:7`;
      const messages = await subscribe(channel);
      await lock.withLock(() => undefined);
      await waitUntil('the unlock message', () => messages.length > 0);
      expect(messages).toEqual([['0', channel]]);
    });
  });
});
