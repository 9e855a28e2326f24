/**
 * Wire compatibility with Redisson's RFairLock: the test plays a Java service on Redisson with
 * the scripts RedissonFairLock sends, reproduced command for command with Redisson's own keys and
 * argument order (its deadlines from the caller's clock, here the test's), and its per-waiter
 * channel `redisson_lock__channel:{<key>}:<owner>`. Shown both ways: mutual exclusion, one line
 * shared in arrival order, and wake-ups (a latchkey release wakes a queued Redisson waiter on its
 * channel; a Redisson unlock wakes a queued latchkey waiter on its own).
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/index.js';
import { fairHeartbeatsOf, fairQueueOf, fairTimeoutsOf } from '../support/keys.js';
import type { Redis } from '../support/resources.js';
import { sharedSuite } from '../support/shared-suite.js';
import { sleep, waitUntil } from '../support/wait.js';

/**
 * RedissonFairLock.tryLockInnerAsync (the EVAL_LONG variant, used by lock() and tryLock(wait)), as
 * Redisson 3.52 sends it: KEYS = lock, queue, timeouts; ARGV = lease ms, owner, threadWaitTime ms,
 * currentTime ms. nil: taken or re-entered (taking moves every waiter's deadline one
 * threadWaitTime earlier); a number: queued (once, with the last waiter's deadline plus
 * threadWaitTime), the time to wait.
 */
const REDISSON_FAIR_TRY_LOCK = `
while true do
  local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
  if firstThreadId2 == false then
    break;
  end;
  local timeout = redis.call('zscore', KEYS[3], firstThreadId2);
  if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then
    redis.call('zrem', KEYS[3], firstThreadId2);
    redis.call('lpop', KEYS[2]);
  else
    break;
  end;
end;
if (redis.call('exists', KEYS[1]) == 0)
    and ((redis.call('exists', KEYS[2]) == 0) or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
  redis.call('lpop', KEYS[2]);
  redis.call('zrem', KEYS[3], ARGV[2]);
  local keys = redis.call('zrange', KEYS[3], 0, -1);
  for i = 1, #keys, 1 do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);
  end;
  redis.call('hset', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
local timeout = redis.call('zscore', KEYS[3], ARGV[2]);
if timeout ~= false then
  local ttl = redis.call('pttl', KEYS[1]);
  return math.max(0, ttl);
end;
local lastThreadId = redis.call('lindex', KEYS[2], -1);
local ttl;
if lastThreadId ~= false and lastThreadId ~= ARGV[2] and redis.call('zscore', KEYS[3], lastThreadId) ~= false then
  ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);
else
  ttl = redis.call('pttl', KEYS[1]);
end;
local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);
if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2]);
end;
return ttl;`;

/**
 * RedissonFairLock.unlockInnerAsync: KEYS = lock, queue, timeouts, unlock channel; ARGV = `0`,
 * lease ms, owner, currentTime ms. Publishes `0` to the head's own channel only.
 */
const REDISSON_FAIR_UNLOCK = `
while true do
  local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
  if firstThreadId2 == false then
    break;
  end;
  local timeout = redis.call('zscore', KEYS[3], firstThreadId2);
  if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then
    redis.call('zrem', KEYS[3], firstThreadId2);
    redis.call('lpop', KEYS[2]);
  else
    break;
  end;
end;
if (redis.call('exists', KEYS[1]) == 0) then
  local nextThreadId = redis.call('lindex', KEYS[2], 0);
  if nextThreadId ~= false then
    redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]);
  end;
  return 1;
end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
  return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
  redis.call('pexpire', KEYS[1], ARGV[2]);
  return 0;
end;
redis.call('del', KEYS[1]);
local nextThreadId = redis.call('lindex', KEYS[2], 0);
if nextThreadId ~= false then
  redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]);
end;
return 1;`;

/**
 * RedissonFairLock.acquireFailedAsync (a tryLock that timed out): KEYS = queue, timeouts;
 * ARGV = owner, threadWaitTime ms. Leaves the line; the deadlines behind it move earlier.
 */
const REDISSON_FAIR_ACQUIRE_FAILED = `
local queue = redis.call('lrange', KEYS[1], 0, -1);
local i = 1;
while i <= #queue and queue[i] ~= ARGV[1] do
  i = i + 1;
end;
i = i + 1;
while i <= #queue do
  redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i]);
  i = i + 1;
end;
redis.call('zrem', KEYS[2], ARGV[1]);
redis.call('lrem', KEYS[1], 0, ARGV[1]);`;

const REDISSON_LEASE_MS = 30_000;
/** `tryLock(5, SECONDS)`: Redisson's threadWaitTime is then the wait time. */
const REDISSON_THREAD_WAIT_MS = 5_000;
/** `lock()`: Redisson's threadWaitTime is its `fairLockWaitTimeout`, 5 minutes by default. */
const REDISSON_DEFAULT_THREAD_WAIT_MS = 300_000;

/** Redisson's names, spelt out here (and in test/support/keys.ts) rather than taken from src/keys.ts. */
const channelOf = (key: string): string => `redisson_lock__channel:{${key}}`;

/** Redis's clock, in ms since the epoch. */
async function redisNowMsOf(admin: Redis): Promise<number> {
  const [seconds, micros] = await admin.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** One Redisson thread: `<uuid>:<threadId>`, playing RedissonFairLock on a raw connection. */
class RedissonThread {
  readonly field = `${randomUUID()}:${Math.floor(Math.random() * 1000) + 1}`;
  readonly messages: string[] = [];

  constructor(
    private readonly java: Redis,
    private readonly key: string,
    private readonly threadWaitMs = REDISSON_THREAD_WAIT_MS,
  ) {}

  /** Redisson's acquire: null when taken, else the time to wait (and queued, once). */
  async tryLock(): Promise<number | null> {
    const reply = await this.java.sendCommand<number | null>([
      'EVAL',
      REDISSON_FAIR_TRY_LOCK,
      '3',
      this.key,
      fairQueueOf(this.key),
      fairTimeoutsOf(this.key),
      String(REDISSON_LEASE_MS),
      this.field,
      String(this.threadWaitMs),
      String(Date.now()),
    ]);
    return reply === null ? null : Number(reply);
  }

  async unlock(): Promise<unknown> {
    return this.java.sendCommand([
      'EVAL',
      REDISSON_FAIR_UNLOCK,
      '4',
      this.key,
      fairQueueOf(this.key),
      fairTimeoutsOf(this.key),
      channelOf(this.key),
      '0',
      String(REDISSON_LEASE_MS),
      this.field,
      String(Date.now()),
    ]);
  }

  async acquireFailed(): Promise<unknown> {
    return this.java.sendCommand([
      'EVAL',
      REDISSON_FAIR_ACQUIRE_FAILED,
      '2',
      fairQueueOf(this.key),
      fairTimeoutsOf(this.key),
      this.field,
      String(this.threadWaitMs),
    ]);
  }

  /** Subscribes to this thread's own channel, as RedissonFairLock.subscribe does. */
  async listen(subscriber: Redis): Promise<void> {
    await subscriber.subscribe(`${channelOf(this.key)}:${this.field}`, (message) =>
      this.messages.push(message),
    );
  }
}

describe('wire compatibility with Redisson RFairLock', () => {
  const suite = sharedSuite('fair-wire');
  const { res, lockClient } = suite;

  async function setUp(name: string, waiterTimeoutMs = 60_000) {
    const lock = lockClient({ watchdogTimeoutMs: 5_000 }).fairLock(name, { waiterTimeoutMs });
    const java = await res.connect();
    const thread = new RedissonThread(java, lock.key);
    await thread.listen(await res.connect());
    const queueLength = async (): Promise<number> => suite.admin.lLen(fairQueueOf(lock.key));
    return { lock, thread, queueLength };
  }

  it('excludes a Redisson holder, and a Redisson unlock wakes the queued latchkey waiter at once', async () => {
    // A long waiter timeout: the wake-up can only come from Redisson's message, not a heartbeat.
    const { lock, thread, queueLength } = await setUp('settlements:java-holds');
    expect(await thread.tryLock()).toBeNull();
    expect(await lock.tryAcquire()).toBeNull();
    const waiting = lock.acquire({ waitMs: 15_000 });
    await waitUntil('latchkey queued in Redisson’s line', async () => (await queueLength()) === 1);
    const [latchkeyField] = await suite.admin.lRange(fairQueueOf(lock.key), 0, 0);
    // Redisson's reentry still works beside a latchkey waiter.
    expect(await thread.tryLock()).toBeNull();
    expect(await thread.unlock()).toBe(0);
    await sleep(300);
    const unlockedAt = performance.now();
    expect(await thread.unlock()).toBe(1);
    const lease = await waiting;
    expect(performance.now() - unlockedAt).toBeLessThan(1_500);
    expect(Object.keys(await suite.admin.hGetAll(lock.key))).toEqual([latchkeyField]);
    // Redisson is refused while latchkey holds, and queues.
    expect(await thread.tryLock()).toBeGreaterThan(0);
    await lease.release();
    await thread.acquireFailed();
    expect(await suite.admin.exists([lock.key, fairQueueOf(lock.key), fairTimeoutsOf(lock.key)])).toBe(0);
  });

  it('wakes a queued Redisson waiter on its own channel when latchkey releases, and it takes the lock', async () => {
    const { lock, thread, queueLength } = await setUp('settlements:node-holds');
    const lease = await lock.acquire();
    const wait = await thread.tryLock();
    expect(wait).toBeGreaterThan(0);
    expect(await queueLength()).toBe(1);
    // Asking again keeps one entry.
    expect(await thread.tryLock()).not.toBeNull();
    expect(await queueLength()).toBe(1);

    await lease.release();
    await waitUntil('Redisson’s waiter heard the release', () => thread.messages.length === 1, 2_000);
    expect(thread.messages).toEqual(['0']);
    expect(await thread.tryLock()).toBeNull();
    expect(await lock.tryAcquire()).toBeNull();
    expect(await thread.unlock()).toBe(1);
    expect(await suite.admin.exists([lock.key, fairQueueOf(lock.key), fairTimeoutsOf(lock.key)])).toBe(0);
  });

  it('shares one line in arrival order: latchkey holder, Redisson waiter, then latchkey waiter', async () => {
    const { lock, thread, queueLength } = await setUp('settlements:mixed-line');
    const holder = await lock.acquire();
    expect(await thread.tryLock()).toBeGreaterThan(0);
    const behind = lock.acquire({ waitMs: 20_000 });
    await waitUntil('latchkey queued behind Redisson', async () => (await queueLength()) === 2);
    const served: string[] = [];
    const behindServed = behind.then((lease: Lease) => {
      served.push('latchkey');
      return lease;
    });

    await holder.release();
    await waitUntil('Redisson’s waiter heard the release', () => thread.messages.length === 1, 2_000);
    // The lock is free, but Redisson is next: latchkey's waiter does not go ahead of it.
    await sleep(300);
    expect(served).toEqual([]);
    expect(await suite.admin.exists(lock.key)).toBe(0);
    expect(await thread.tryLock()).toBeNull();
    served.push('redisson');
    await sleep(200);
    expect(await thread.unlock()).toBe(1);
    const lease = await behindServed;
    expect(served).toEqual(['redisson', 'latchkey']);
    await lease.release();
    expect(await suite.admin.exists([lock.key, fairQueueOf(lock.key), fairTimeoutsOf(lock.key)])).toBe(0);
  });

  it('serves a latchkey waiter within a heartbeat when a Redisson head gives up without a word', async () => {
    // Redisson's acquireFailed publishes nothing: latchkey's next call (a third of 3 s) finds out.
    const { lock, thread, queueLength } = await setUp('settlements:java-gives-up', 3_000);
    const holder = await lock.acquire();
    expect(await thread.tryLock()).toBeGreaterThan(0);
    const behind = lock.acquire({ waitMs: 20_000 });
    await waitUntil('latchkey queued behind Redisson', async () => (await queueLength()) === 2);
    await holder.release();
    await waitUntil('Redisson’s waiter heard the release', () => thread.messages.length === 1, 2_000);
    const gaveUpAt = performance.now();
    await thread.acquireFailed();
    const lease = await behind;
    expect(performance.now() - gaveUpAt).toBeLessThan(1_000 + 1_000);
    await lease.release();
    expect(await suite.admin.exists([lock.key, fairQueueOf(lock.key), fairTimeoutsOf(lock.key)])).toBe(0);
  });

  it('keeps one line in arrival order with default settings on both sides: Redisson lock() and latchkey waiters alternate', async () => {
    // Default options on both sides: latchkey's fair lock as it comes, Redisson's lock() (lease:
    // its 30 s watchdog; threadWaitTime: fairLockWaitTimeout, 5 minutes).
    const name = 'settlements:defaults';
    const holder = lockClient().fairLock(name);
    const first = lockClient().fairLock(name);
    const second = lockClient().fairLock(name);
    const key = holder.key;
    const java1 = new RedissonThread(await res.connect(), key, REDISSON_DEFAULT_THREAD_WAIT_MS);
    const java2 = new RedissonThread(await res.connect(), key, REDISSON_DEFAULT_THREAD_WAIT_MS);
    await java1.listen(await res.connect());
    await java2.listen(await res.connect());
    const queueLength = async (): Promise<number> => suite.admin.lLen(fairQueueOf(key));
    const served: string[] = [];
    const serve = (who: string) => (lease: Lease) => {
      served.push(who);
      return lease;
    };

    const held = await holder.acquire();
    expect(await java1.tryLock()).toBeGreaterThan(0);
    const firstServed = first.acquire({ waitMs: 60_000 }).then(serve('latchkey 1'));
    await waitUntil('latchkey 1 queued behind Redisson 1', async () => (await queueLength()) === 2);
    expect(await java2.tryLock()).toBeGreaterThan(0);
    const secondServed = second.acquire({ waitMs: 60_000 }).then(serve('latchkey 2'));
    await waitUntil('latchkey 2 queued last', async () => (await queueLength()) === 4);
    const line = await suite.admin.lRange(fairQueueOf(key), 0, -1);
    expect([line[0], line[2]]).toEqual([java1.field, java2.field]);

    // Redisson 1 is woken and takes the lock, which moves every deadline 5 minutes earlier; it
    // holds across a latchkey heartbeat (a third of 10 s) before it unlocks.
    await held.release();
    await waitUntil('Redisson 1 heard the release', () => java1.messages.length === 1, 5_000);
    expect(await java1.tryLock()).toBeNull();
    served.push('redisson 1');
    await sleep(4_000);
    expect(await java1.unlock()).toBe(1);

    // Next is latchkey 1, not Redisson 2, who queued after it.
    await waitUntil(
      'someone after Redisson 1 was served or woken',
      () => served.length > 1 || java2.messages.length > 0,
      10_000,
    );
    expect(java2.messages).toEqual([]);
    const firstLease = await firstServed;
    await sleep(200);
    expect(java2.messages).toEqual([]);
    await firstLease.release();

    await waitUntil('Redisson 2 heard the release', () => java2.messages.length === 1, 5_000);
    expect(await java2.tryLock()).toBeNull();
    served.push('redisson 2');
    expect(await java2.unlock()).toBe(1);
    await (await secondServed).release();
    expect(served).toEqual(['redisson 1', 'latchkey 1', 'redisson 2', 'latchkey 2']);
    expect(
      await suite.admin.exists([key, fairQueueOf(key), fairTimeoutsOf(key), fairHeartbeatsOf(key)]),
    ).toBe(0);
  });

  it('skips a SIGKILLed latchkey head by its heartbeat, within latchkey’s bound, though Redisson’s deadline for it lies minutes ahead', async () => {
    const waiterTimeoutMs = 1_500;
    const lock = lockClient({ watchdogTimeoutMs: 5_000 }).fairLock('settlements:dead-head', {
      waiterTimeoutMs,
    });
    const key = lock.key;
    const worker = res.worker('test/support/fixtures/fair-waiter.ts', {
      REDIS_URL: suite.url,
      KEY_PREFIX: key.slice(0, -lock.name.length),
      LOCK_NAME: lock.name,
      WAITER_TIMEOUT_MS: String(waiterTimeoutMs),
    });
    await worker.next((msg) => msg.type === 'ready', 20_000);
    const java = new RedissonThread(await res.connect(), key, REDISSON_DEFAULT_THREAD_WAIT_MS);
    await java.listen(await res.connect());
    const queueLength = async (): Promise<number> => suite.admin.lLen(fairQueueOf(key));

    const held = await lock.acquire();
    worker.send({ type: 'acquire', id: 'dead', holdMs: 60_000 });
    await waitUntil('the worker heads the line', async () => (await queueLength()) === 1);
    const [deadField] = await suite.admin.lRange(fairQueueOf(key), 0, 0);
    if (deadField === undefined) throw new Error('nobody queued');
    expect(await java.tryLock()).toBeGreaterThan(0);
    const behind = lock.acquire({ waitMs: 20_000 });
    await waitUntil('a latchkey waiter queued last', async () => (await queueLength()) === 3);

    worker.kill('SIGKILL');
    await worker.exited;
    const killedAt = performance.now();
    // The dead head's deadline in RFairLock's arithmetic: a wait step beyond the lock's expiry.
    const [deadline, redisNow] = await Promise.all([
      suite.admin.zScore(fairTimeoutsOf(key), deadField),
      redisNowMsOf(suite.admin),
    ]);
    expect(Number(deadline) - redisNow).toBeGreaterThan(REDISSON_DEFAULT_THREAD_WAIT_MS - 1_000);
    // The release wakes the dead head alone; nobody hears it.
    await held.release();

    // Redisson's lock(): ask, then wait for its channel or the time its script answered.
    let taken = false;
    while (!taken && performance.now() - killedAt < 15_000) {
      const wait = await java.tryLock();
      taken = wait === null;
      if (!taken) {
        const heard = java.messages.length;
        await waitUntil(
          'Redisson’s wait ends',
          () => java.messages.length > heard,
          Math.max(wait ?? 0, 10),
        ).catch(() => undefined);
      }
    }
    const javaServedAt = performance.now();
    expect(taken).toBe(true);
    // The latchkey waiter's heartbeat dropped the dead head; Redisson's next try took the lock.
    expect(javaServedAt - killedAt).toBeLessThan(waiterTimeoutMs + waiterTimeoutMs / 3 + 1_000);
    expect(await suite.admin.zScore(fairTimeoutsOf(key), deadField)).toBeNull();
    // And the line's order holds: Redisson first, then the latchkey waiter behind it.
    expect(await java.unlock()).toBe(1);
    await (await behind).release();
    expect(
      await suite.admin.exists([key, fairQueueOf(key), fairTimeoutsOf(key), fairHeartbeatsOf(key)]),
    ).toBe(0);
  });
});
