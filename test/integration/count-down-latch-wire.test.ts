/**
 * Wire compatibility of the count-down latch with Redisson's RCountDownLatch: the Java side is
 * played by raw commands reproducing what Redisson sends (its scripts command for command, in
 * its argument order) and a subscriber that acts as its CountDownLatchPubSub. Counts are shared
 * both ways, a Redisson countDown wakes a latchkey await, and a latchkey countDown wakes a
 * Redisson waiter.
 */
import { describe, expect, it } from 'vitest';
import { uniquePrefix } from '../support/keys.js';
import type { Redis } from '../support/resources.js';
import { sharedSuite } from '../support/shared-suite.js';
import { settle, sleep, waitUntil, within } from '../support/wait.js';

/** RedissonCountDownLatch.trySetCountAsync: KEYS [name, channel], ARGV [1, count, publish command]. */
const REDISSON_TRY_SET_COUNT = `
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('set', KEYS[1], ARGV[2]);
  redis.call(ARGV[3], KEYS[2], ARGV[1]);
  return 1
else
  return 0
end`;

/** RedissonCountDownLatch.countDownAsync: KEYS [name, channel], ARGV [0, publish command]. */
const REDISSON_COUNT_DOWN = `
local v = redis.call('decr', KEYS[1]);
if v <= 0 then redis.call('del', KEYS[1]) end;
if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;`;

/** RedissonCountDownLatch.deleteAsync: KEYS [name, channel], ARGV [1, publish command]. */
const REDISSON_DELETE = `
if redis.call('del', KEYS[1]) == 1 then
  redis.call(ARGV[2], KEYS[2], ARGV[1]);
  return 1
else
  return 0
end`;

/** CountDownLatchPubSub's messages. */
const ZERO_COUNT_MESSAGE = '0';
const NEW_COUNT_MESSAGE = '1';

/** RedissonCountDownLatch.getChannelName, spelt out here rather than taken from src/keys.ts. */
function redissonChannel(key: string): string {
  return `redisson_countdownlatch__channel__{${key}}`;
}

/** Slack for round trips and timers on a loaded machine. */
const SLACK_MS = 400;

/** The Java side: Redisson's latch calls as raw commands on a connection latchkey does not use. */
function redissonLatch(java: Redis, key: string) {
  return {
    trySetCount: async (count: number): Promise<number> =>
      Number(
        await java.sendCommand([
          'EVAL',
          REDISSON_TRY_SET_COUNT,
          '2',
          key,
          redissonChannel(key),
          NEW_COUNT_MESSAGE,
          String(count),
          'publish',
        ]),
      ),
    countDown: async (): Promise<void> => {
      await java.sendCommand([
        'EVAL',
        REDISSON_COUNT_DOWN,
        '2',
        key,
        redissonChannel(key),
        ZERO_COUNT_MESSAGE,
        'publish',
      ]);
    },
    /** getCountAsync: GET with LongCodec, which reads a missing key as 0. */
    getCount: async (): Promise<number> => Number((await java.get(key)) ?? '0'),
    delete: async (): Promise<number> =>
      Number(
        await java.sendCommand([
          'EVAL',
          REDISSON_DELETE,
          '2',
          key,
          redissonChannel(key),
          NEW_COUNT_MESSAGE,
          'publish',
        ]),
      ),
  };
}

describe('wire compatibility with Redisson RCountDownLatch', () => {
  const suite = sharedSuite('latch-wire');
  const { res, lockClient } = suite;

  /**
   * Acts as Redisson's `await(time, unit)` with CountDownLatchPubSub: subscribe, then read the
   * count while it is above 0, waiting on the entry's latch between reads; `0` opens the latch
   * (and wakes the wait), `1` (a new count) closes it. Resolves true at a count of 0, false
   * after `waitMs`. Records every message.
   */
  async function redissonAwait(
    key: string,
    waitMs: number,
  ): Promise<{ opened: Promise<boolean>; messages: string[] }> {
    const java = await res.connect();
    const subscriber = await res.connect();
    const latch = redissonLatch(java, key);
    const messages: string[] = [];
    // The entry's latch (a ReclosableLatch, closed at first): `0` opens it and wakes whoever
    // waits on it, `1` closes it. Open, a wait on it returns at once, so a `0` that arrives
    // while the count is being read is not lost.
    let gateOpen = false;
    let wake: (() => void) | undefined;
    await subscriber.subscribe(redissonChannel(key), (message) => {
      messages.push(message);
      if (message === ZERO_COUNT_MESSAGE) {
        gateOpen = true;
        wake?.();
      }
      if (message === NEW_COUNT_MESSAGE) gateOpen = false;
    });
    const opened = (async (): Promise<boolean> => {
      const deadline = performance.now() + waitMs;
      while ((await latch.getCount()) > 0) {
        const remaining = deadline - performance.now();
        if (remaining <= 0) return false;
        if (gateOpen) continue;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, remaining);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
      return true;
    })();
    return { opened, messages };
  }

  it("shares the count both ways: Redisson's trySetCount and countDown, latchkey's count, countDown and trySetCount", async () => {
    const latch = lockClient().countDownLatch('warmup:shared');
    const java = redissonLatch(suite.admin, latch.key);

    expect(await java.trySetCount(3)).toBe(1);
    expect(await latch.trySetCount(7)).toBe(false);
    expect(await latch.count()).toBe(3);
    await java.countDown();
    expect(await latch.count()).toBe(2);
    expect(await latch.countDown()).toBe(1);
    expect(await java.getCount()).toBe(1);
    await java.countDown();
    expect(await suite.admin.exists(latch.key)).toBe(0);
    expect(await latch.count()).toBe(0);

    expect(await latch.trySetCount(2)).toBe(true);
    expect(await java.trySetCount(9)).toBe(0);
    expect(await java.getCount()).toBe(2);
  });

  it('wakes a latchkey await on the zero message of a Redisson countDown', async () => {
    const latch = lockClient().countDownLatch('warmup:from-java');
    const java = redissonLatch(suite.admin, latch.key);
    expect(await java.trySetCount(2)).toBe(1);
    const waiting = settle(latch.await({ waitMs: 20_000 }));
    await waitUntil(
      'latchkey is subscribed',
      async () => (await res.numsub(redissonChannel(latch.key))) === 1,
    );
    await sleep(150);
    await java.countDown();
    await sleep(200);
    expect(await Promise.race([waiting.then(() => 'ended'), sleep(0).then(() => 'waiting')])).toBe('waiting');

    const lastAt = performance.now();
    await java.countDown();
    const outcome = await within(waiting, 5_000, 'the latchkey waiter');
    expect(outcome.value).toBe(true);
    expect(outcome.at - lastAt).toBeLessThan(SLACK_MS);
  });

  it("wakes a waiter acting as Redisson's CountDownLatchPubSub on latchkey's count-down to zero", async () => {
    const latch = lockClient().countDownLatch('warmup:to-java');
    expect(await latch.trySetCount(2)).toBe(true);
    const java = await redissonAwait(latch.key, 20_000);
    await latch.countDown();
    await sleep(200);
    expect(await Promise.race([java.opened.then(() => 'ended'), sleep(0).then(() => 'waiting')])).toBe(
      'waiting',
    );

    const lastAt = performance.now();
    expect(await latch.countDown()).toBe(0);
    expect(await within(java.opened, 5_000, 'the Redisson waiter')).toBe(true);
    expect(performance.now() - lastAt).toBeLessThan(SLACK_MS);
    // latchkey's zero message, as Redisson publishes it; nothing for the count of 1.
    expect(java.messages).toEqual([ZERO_COUNT_MESSAGE]);

    // A new count from latchkey is announced with Redisson's new-count message.
    const again = await redissonAwait(latch.key, 20_000);
    expect(await latch.trySetCount(1)).toBe(true);
    await waitUntil('the new-count message arrived', () => again.messages.length === 1);
    expect(again.messages).toEqual([NEW_COUNT_MESSAGE]);
    await latch.countDown();
    expect(await within(again.opened, 5_000, 'the second Redisson waiter')).toBe(true);
  });

  it("opens latchkey's waiters on Redisson's delete (its `1` makes them re-read a count of 0)", async () => {
    const latch = lockClient().countDownLatch('warmup:java-delete');
    const java = redissonLatch(suite.admin, latch.key);
    expect(await java.trySetCount(5)).toBe(1);
    const waiting = settle(latch.await({ waitMs: 20_000 }));
    await waitUntil(
      'latchkey is subscribed',
      async () => (await res.numsub(redissonChannel(latch.key))) === 1,
    );
    await sleep(150);
    const deletedAt = performance.now();
    expect(await java.delete()).toBe(1);
    const outcome = await within(waiting, 5_000, 'the latchkey waiter');
    expect(outcome.value).toBe(true);
    expect(outcome.at - deletedAt).toBeLessThan(SLACK_MS);
  });

  it("opens Redisson's waiters on latchkey's delete, which announces `0` (Redisson's own delete sends `1`)", async () => {
    const latch = lockClient().countDownLatch('warmup:latchkey-delete');
    expect(await latch.trySetCount(5)).toBe(true);
    const java = await redissonAwait(latch.key, 20_000);
    await sleep(100);
    expect(await latch.delete()).toBe(true);
    expect(await within(java.opened, 5_000, 'the Redisson waiter')).toBe(true);
    expect(java.messages).toEqual([ZERO_COUNT_MESSAGE]);
  });

  it('names the channel with braces around the whole key, as Redisson does, even for a key with a hash tag', async () => {
    // The tag is a unique test prefix, so the key stays within the test keys (and their ACL).
    const latch = lockClient({ keyPrefix: '' }).countDownLatch(`{${uniquePrefix('latch-tag')}orders}:warmup`);
    const java = await redissonAwait(latch.key, 20_000);
    try {
      expect(await latch.trySetCount(1)).toBe(true);
      expect(await latch.countDown()).toBe(0);
      await waitUntil('both messages arrived', () => java.messages.length === 2);
      expect(java.messages).toEqual([NEW_COUNT_MESSAGE, ZERO_COUNT_MESSAGE]);
    } finally {
      await suite.admin.del(latch.key);
    }
  });

  it('times out a latchkey await on a Redisson latch nobody counts down, leaving it as it was', async () => {
    const latch = lockClient().countDownLatch('warmup:stuck');
    const java = redissonLatch(suite.admin, latch.key);
    expect(await java.trySetCount(1)).toBe(1);
    expect(await latch.await({ waitMs: 200 })).toBe(false);
    expect(await java.getCount()).toBe(1);
    expect(await suite.admin.pTTL(latch.key)).toBe(-1);
    const outcome = await settle(latch.delete());
    expect(outcome.value).toBe(true);
  });
});
