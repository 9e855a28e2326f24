/**
 * Wire compatibility with Redisson's RSemaphore: a Java service on Redisson and a Node service on
 * latchkey share one semaphore. Redisson's side is played command for command with the scripts
 * of RedissonSemaphore (tryAcquireAsync, releaseAsync, trySetPermitsAsync), written in this
 * file's own formatting with Redisson's KEYS and ARGV order, and its SemaphorePubSub (subscribe to
 * `redisson_sc:{<name>}`, read the new count, wake min(count, local waiters)).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Semaphore } from '../../src/index.js';
import type { Redis } from '../support/resources.js';
import { sharedSuite } from '../support/shared-suite.js';
import { settle, sleep, waitUntil } from '../support/wait.js';

/** RedissonSemaphore.getChannelName: `redisson_sc:` plus the name, in braces unless it has a tag. */
function redissonChannel(name: string): string {
  return name.includes('{') ? `redisson_sc:${name}` : `redisson_sc:{${name}}`;
}

/** RedissonSemaphore.tryAcquireAsync(permits): KEYS [name], ARGV [permits]; 1 taken, 0 not. */
const REDISSON_TRY_ACQUIRE = [
  "local value = redis.call('get', KEYS[1]);",
  'if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then',
  "  local val = redis.call('decrby', KEYS[1], ARGV[1]);",
  '  return 1;',
  'end;',
  'return 0;',
].join('\n');

/** RedissonSemaphore.releaseAsync(permits): KEYS [name, channel], ARGV [permits]. */
const REDISSON_RELEASE = [
  "local value = redis.call('incrby', KEYS[1], ARGV[1]);",
  "redis.call('publish', KEYS[2], value);",
].join('\n');

/** RedissonSemaphore.trySetPermitsAsync(permits): KEYS [name, channel], ARGV [permits]. */
const REDISSON_TRY_SET = [
  "local value = redis.call('get', KEYS[1]);",
  'if (value == false) then',
  "  redis.call('set', KEYS[1], ARGV[1]);",
  "  redis.call('publish', KEYS[2], ARGV[1]);",
  '  return 1;',
  'end;',
  'return 0;',
].join('\n');

/** Redisson's side of one semaphore, on a connection of its own. */
function redisson(redis: Redis, name: string) {
  const channel = redissonChannel(name);
  return {
    tryAcquire: async (permits = 1): Promise<boolean> =>
      Number(await redis.sendCommand(['EVAL', REDISSON_TRY_ACQUIRE, '1', name, String(permits)])) === 1,
    release: async (permits = 1): Promise<void> => {
      await redis.sendCommand(['EVAL', REDISSON_RELEASE, '2', name, channel, String(permits)]);
    },
    trySetPermits: async (permits: number): Promise<boolean> =>
      Number(await redis.sendCommand(['EVAL', REDISSON_TRY_SET, '2', name, channel, String(permits)])) === 1,
    availablePermits: async (): Promise<number> => Number((await redis.get(name)) ?? '0'),
  };
}

describe('Semaphore on the wire: Redisson RSemaphore interop', () => {
  const suite = sharedSuite('semaphore-wire');
  const { res, lockClient } = suite;
  let java: Redis;
  beforeAll(() => {
    // Redisson's commands go out on the file's own connection, not the one latchkey uses.
    java = suite.admin;
  });

  function both(name: string, permits?: number): { node: Semaphore; java: ReturnType<typeof redisson> } {
    const node = lockClient().semaphore(name, permits === undefined ? undefined : { permits });
    return { node, java: redisson(java, node.key) };
  }

  it('uses the key and the channel Redisson uses, hash tag or not', async () => {
    const plain = lockClient().semaphore('crawler');
    const tagged = lockClient().semaphore('{tenant-7}crawler');
    for (const semaphore of [plain, tagged]) {
      const messages: string[] = [];
      const subscriber = await res.connect();
      await subscriber.subscribe(redissonChannel(semaphore.key), (message) => messages.push(message));
      await semaphore.release(2);
      expect(await suite.admin.get(semaphore.key)).toBe('2');
      await waitUntil('the release was announced', () => messages.length === 1);
      expect(messages).toEqual(['2']);
    }
  });

  it('shares permits both ways', async () => {
    const { node, java: other } = both('pdf-renderers');
    expect(await node.trySetPermits(3)).toBe(true);
    expect(await other.trySetPermits(5)).toBe(false);
    expect(await other.tryAcquire(2)).toBe(true);
    expect(await node.availablePermits()).toBe(1);
    expect(await node.tryAcquire(2)).toBe(false);
    expect(await node.tryAcquire()).toBe(true);
    expect(await other.tryAcquire()).toBe(false);
    await other.release(2);
    expect(await node.availablePermits()).toBe(2);
    await node.release();
    expect(await other.tryAcquire(3)).toBe(true);
    expect(await other.availablePermits()).toBe(0);
    await other.release(3);
    await node.acquire(3);
    expect(await other.availablePermits()).toBe(0);

    // A counter Redisson's trySetPermits made is used by latchkey as it is, option or not.
    const second = both('pdf-exporters', 10);
    expect(await second.java.trySetPermits(1)).toBe(true);
    expect(await second.node.tryAcquire(2)).toBe(false);
    expect(await second.node.tryAcquire()).toBe(true);
    expect(await second.java.availablePermits()).toBe(0);
  });

  it('a Redisson release wakes a latchkey waiter within milliseconds', async () => {
    const { node, java: other } = both('mailers', 0);
    const waiting = settle(node.acquire(2, { waitMs: 10_000 }));
    await waitUntil(
      'the waiter is subscribed',
      async () => (await res.numsub(redissonChannel(node.key))) === 1,
    );
    await sleep(100);
    const releasedAt = performance.now();
    await other.release(2);
    const woken = await waiting;
    expect(woken.error).toBeUndefined();
    expect(woken.at - releasedAt).toBeLessThan(500);
    expect(await other.availablePermits()).toBe(0);
  });

  it('a Redisson trySetPermits wakes a latchkey waiter of a missing counter', async () => {
    const { node, java: other } = both('webhooks');
    const waiting = settle(node.acquire({ waitMs: 10_000 }));
    await waitUntil(
      'the waiter is subscribed',
      async () => (await res.numsub(redissonChannel(node.key))) === 1,
    );
    await sleep(100);
    expect(await other.trySetPermits(4)).toBe(true);
    expect((await waiting).error).toBeUndefined();
    expect(await other.availablePermits()).toBe(3);
  });

  it('a latchkey release wakes Redisson’s SemaphorePubSub: the message is the new count', async () => {
    const { node, java: other } = both('exports', 0);
    // SemaphorePubSub.onMessage: wake min(count, waiters) of the process's waiters.
    const localWaiters = 3;
    const wakes: number[] = [];
    const subscriber = await res.connect();
    await subscriber.subscribe(redissonChannel(node.key), (message) => {
      wakes.push(Math.min(Number(message), localWaiters));
    });
    await node.availablePermits();
    await node.release(2);
    await waitUntil('the release was heard', () => wakes.length === 1);
    expect(wakes).toEqual([2]);
    // The woken Redisson waiters retry and take what the message announced.
    expect(await other.tryAcquire()).toBe(true);
    expect(await other.tryAcquire()).toBe(true);
    expect(await other.tryAcquire()).toBe(false);

    await node.addPermits(5);
    await node.trySetPermits(1);
    await node.release();
    await waitUntil('every change was heard', () => wakes.length === 3);
    // addPermits: the new count 5 (3 waiters at most); trySetPermits changed nothing and said
    // nothing; the release: 6.
    expect(wakes).toEqual([2, 3, 3]);
    expect(await other.availablePermits()).toBe(6);
  });
});
