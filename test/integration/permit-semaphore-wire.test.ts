/**
 * Wire compatibility with Redisson's RPermitExpirableSemaphore: a Java service on Redisson and a
 * Node service on latchkey share one permit semaphore. Redisson's side is played by its acquire
 * and release scripts, reproduced command for command below in Redisson's argument order (its
 * time argument is the client's clock, here the test's), and by a subscription to its channel.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { PermitSemaphore } from '../../src/index.js';
import type { Redis } from '../support/resources.js';
import { sharedSuite } from '../support/shared-suite.js';
import { sleep, waitUntil } from '../support/wait.js';

/**
 * RedissonPermitExpirableSemaphore.tryAcquireAsync(List<String> ids, long timeoutDate).
 * KEYS: name, `{name}:timeout`, `redisson_sc:{name}`. ARGV: count, timeoutDate, now,
 * nonExpirableTimeout, publish command, then the ids' bytes.
 */
const REDISSON_TRY_ACQUIRE = `
local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]);
if #expiredIds > 0 then
  redis.call('zrem', KEYS[2], unpack(expiredIds));
  local value = redis.call('incrby', KEYS[1], #expiredIds);
  if tonumber(value) > 0 then
    redis.call(ARGV[5], KEYS[3], value);
  end;
end;
local value = redis.call('get', KEYS[1]);
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
  redis.call('decrby', KEYS[1], ARGV[1]);
  for i = 6, #ARGV, 1 do
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]);
  end;
  local ttl = redis.call('pttl', KEYS[1]);
  if ttl > 0 then
    redis.call('pexpire', KEYS[2], ttl);
  end;
  return 'OK';
end;
local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES');
if v[1] ~= nil and v[2] ~= ARGV[4] then
  return ':' .. tostring(v[2]);
end
return nil;`;

/**
 * RedissonPermitExpirableSemaphore.tryReleaseAsync(String permitId).
 * KEYS: name, `redisson_sc:{name}`, `{name}:timeout`. ARGV: the id's bytes, 1, now, publish command.
 */
const REDISSON_TRY_RELEASE = `
local expire = redis.call('zscore', KEYS[3], ARGV[1]);
local removed = redis.call('zrem', KEYS[3], ARGV[1]);
if tonumber(removed) ~= 1 then
  return 0;
end;
local value = redis.call('incrby', KEYS[1], ARGV[2]);
redis.call(ARGV[4], KEYS[2], value);
if tonumber(expire) <= tonumber(ARGV[3]) then
  return 0;
end;
return 1;`;

/** Redisson's score for a permit taken without a lease. */
const NON_EXPIRABLE = '922337203685477';

/** Names spelt out here rather than taken from src/keys.ts, so a renamed one fails the tests. */
function timeoutKeyOf(key: string): string {
  return `{${key}}:timeout`;
}
function channelOf(key: string): string {
  return `redisson_sc:{${key}}`;
}

/** The Java side: Redisson's scripts run as raw EVALs on a connection latchkey does not use. */
function redisson(java: Redis, key: string) {
  return {
    /** `tryAcquire(1, leaseMs)` once, with a new id (16 random bytes, hex as Redisson shows it). */
    async tryAcquire(leaseMs?: number): Promise<{ id: string; reply: unknown }> {
      const id = randomBytes(16).toString('hex');
      const timeoutDate = leaseMs === undefined ? NON_EXPIRABLE : String(Date.now() + leaseMs);
      const reply = await java.sendCommand([
        'EVAL',
        REDISSON_TRY_ACQUIRE,
        '3',
        key,
        timeoutKeyOf(key),
        channelOf(key),
        '1',
        timeoutDate,
        String(Date.now()),
        NON_EXPIRABLE,
        'publish',
        Buffer.from(id, 'hex'),
      ]);
      return { id, reply };
    },
    /** `tryRelease(id)`: 1 when released in time. */
    async tryRelease(id: string): Promise<number> {
      const reply = await java.sendCommand([
        'EVAL',
        REDISSON_TRY_RELEASE,
        '3',
        key,
        channelOf(key),
        timeoutKeyOf(key),
        Buffer.from(id, 'hex'),
        '1',
        String(Date.now()),
        'publish',
      ]);
      return Number(reply);
    },
  };
}

describe('wire compatibility with Redisson RPermitExpirableSemaphore', () => {
  const suite = sharedSuite('permit-wire');
  const { res, lockClient } = suite;

  async function setUp(
    name: string,
  ): Promise<{ semaphore: PermitSemaphore; java: ReturnType<typeof redisson> }> {
    const semaphore = lockClient().permitSemaphore(name);
    return { semaphore, java: redisson(await res.connect(), semaphore.key) };
  }

  it('shares the permits both ways, and releases by id across the two libraries', async () => {
    const { semaphore, java } = await setUp('warehouse:pickers');
    expect(await semaphore.trySetPermits(2)).toBe(true);

    const theirs = await java.tryAcquire(60_000);
    expect(String(theirs.reply)).toBe('OK');
    const ours = await semaphore.acquire();
    expect(await semaphore.availablePermits()).toBe(0);
    expect(await semaphore.tryAcquire()).toBeNull();
    // Redisson, finding none free, is told when the earliest lease ends.
    const busy = await java.tryAcquire(60_000);
    expect(String(busy.reply)).toMatch(/^:\d+$/);

    // A latchkey permit released by id from Redisson, and a Redisson one from latchkey.
    expect(await java.tryRelease(ours.permitId)).toBe(1);
    expect(await semaphore.release(theirs.id)).toBe(true);
    expect(await semaphore.availablePermits()).toBe(2);
    expect(await suite.admin.exists(timeoutKeyOf(semaphore.key))).toBe(0);
  });

  it('wakes waiters both ways', async () => {
    const { semaphore, java } = await setUp('warehouse:forklifts');
    await semaphore.trySetPermits(1);
    const messages: string[] = [];
    const subscriber = await res.connect();
    await subscriber.subscribe(channelOf(semaphore.key), (message) => messages.push(message));

    // Redisson holds the only permit; its release wakes latchkey's waiter.
    const theirs = await java.tryAcquire();
    expect(String(theirs.reply)).toBe('OK');
    const waiting = semaphore.acquire({ waitMs: 10_000 });
    await waitUntil(
      'latchkey waits on the channel',
      async () => (await res.numsub(channelOf(semaphore.key))) >= 2,
    );
    await sleep(100);
    const releasedAt = performance.now();
    expect(await java.tryRelease(theirs.id)).toBe(1);
    const ours = await waiting;
    expect(performance.now() - releasedAt).toBeLessThan(1_000);

    // latchkey's release publishes the count of free permits, which Redisson's SemaphorePubSub
    // reads as how many of its waiters may go.
    messages.length = 0;
    await ours.release();
    await waitUntil('the release is announced', () => messages.length > 0);
    expect(messages).toEqual(['1']);
    expect(String((await java.tryAcquire(1_000)).reply)).toBe('OK');
  });

  it('wakes a Redisson waiter on a missing counter when latchkey creates it with `permits`', async () => {
    const name = 'warehouse:cranes';
    const seeded = lockClient().permitSemaphore(name, { permits: 2 });
    const java = redisson(await res.connect(), seeded.key);
    // Redisson's tryAcquire(waitTime) on a missing counter: its script answers nil (no lease to
    // wait for), so it sleeps on its SemaphorePubSub until a message lets it go.
    expect(String((await java.tryAcquire(60_000)).reply)).toBe('null');
    const subscriber = await res.connect();
    const told = new Promise<string>((resolve) => {
      void subscriber.subscribe(channelOf(seeded.key), resolve);
    });
    await waitUntil(
      'Redisson waits on the channel',
      async () => (await res.numsub(channelOf(seeded.key))) >= 1,
    );

    expect(await seeded.availablePermits()).toBe(2);
    const message = await Promise.race([told, sleep(3_000).then(() => 'nothing within 3 s')]);
    // SemaphorePubSub lets min(its waiters, message) go: the count of free permits.
    expect(message).toBe('2');
    expect(String((await java.tryAcquire(60_000)).reply)).toBe('OK');
  });

  it('gives back a Redisson permit whose lease ended, in latchkey’s scripts', async () => {
    const { semaphore, java } = await setUp('warehouse:docks');
    await semaphore.trySetPermits(1);
    const theirs = await java.tryAcquire(300);
    expect(String(theirs.reply)).toBe('OK');
    expect(await semaphore.tryAcquire()).toBeNull();
    // latchkey waits by the earliest lease's end (nothing is published when it ends).
    const startedAt = performance.now();
    const ours = await semaphore.acquire({ waitMs: 5_000 });
    expect(performance.now() - startedAt).toBeLessThan(2_000);
    expect(await java.tryRelease(theirs.id)).toBe(0);
    await ours.release();
    expect(await semaphore.availablePermits()).toBe(1);
  });
});
