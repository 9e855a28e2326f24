import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { uniquePrefix } from '../support/keys.js';
import { sharedRedis } from '../support/redis-server.js';
import { channelOf, testResources, type Redis } from '../support/resources.js';
import { sleep, waitUntil } from '../support/wait.js';

const HOLDER = new URL('../support/fixtures/crash-holder.ts', import.meta.url).pathname;
const WAITER = new URL('../support/fixtures/crash-waiter.ts', import.meta.url).pathname;
// Child processes start through tsx, which takes a while on a busy machine.
const STARTUP_MS = 20_000;
const MS = 1_000_000n;

function stamp(value: unknown): bigint {
  if (typeof value !== 'string') throw new Error(`expected a nanosecond stamp, got ${String(value)}`);
  return BigInt(value);
}

describe('a lock holder killed with SIGKILL', () => {
  let url: string;
  let observer: Redis;
  const perFile = testResources(() => url);
  const res = testResources(() => url);

  beforeAll(async () => {
    ({ url } = await sharedRedis());
    observer = await perFile.connect();
  });

  afterEach(() => res.closeAll());

  afterAll(() => perFile.closeAll());

  it('is replaced by a waiter in another process within watchdogTimeoutMs + 1 s', async () => {
    const watchdogMs = 1_000;
    const env = {
      REDIS_URL: url,
      KEY_PREFIX: uniquePrefix('crash'),
      LOCK_NAME: 'settlement:nightly',
      WATCHDOG_MS: String(watchdogMs),
    };
    const holder = res.worker(HOLDER, env);
    const held = await holder.next((msg) => msg['type'] === 'acquired', STARTUP_MS);
    const heldAt = stamp(held['at']);
    const key = String(held['key']);

    const waiter = res.worker(WAITER, env);
    await waiter.next((msg) => msg['type'] === 'waiting', STARTUP_MS);
    // The waiter is parked on the unlock channel once it has subscribed to it.
    await waitUntil(
      'the waiter subscribed to the unlock channel',
      async () => (await res.numsub(channelOf(key))) >= 1,
      10_000,
    );

    // Held well past its first lease: only the holder's watchdog can be keeping it.
    const keepUntil = heldAt + BigInt(Math.round(1.5 * watchdogMs)) * MS;
    const now = process.hrtime.bigint();
    if (now < keepUntil) await sleep(Number((keepUntil - now) / MS) + 1);
    expect(waiter.messages.some((msg) => msg['type'] === 'acquired')).toBe(false);
    expect(holder.messages.some((msg) => msg['type'] === 'lost')).toBe(false);
    expect(await observer.pTTL(key)).toBeGreaterThan(0);

    const killedFrom = process.hrtime.bigint();
    holder.kill('SIGKILL');
    const killedBy = process.hrtime.bigint();
    expect(await holder.exited).toEqual({ code: null, signal: 'SIGKILL' });

    const taken = await waiter.next((msg) => msg['type'] === 'acquired', 10_000);
    const takenAt = stamp(taken['at']);
    expect(taken['key']).toBe(key);
    expect(takenAt).toBeGreaterThan(killedBy);
    expect(takenAt - killedFrom).toBeLessThanOrEqual(BigInt(watchdogMs + 1_000) * MS);
    expect(await observer.exists(key)).toBe(1);

    waiter.send({ type: 'exit' });
    expect(await waiter.exited).toEqual({ code: 0, signal: null });
    // The waiter released the lock on its way out.
    expect(await observer.exists(key)).toBe(0);
  });
});
