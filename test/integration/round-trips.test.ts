import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockClient } from '../../src/index.js';
import { commandsDuring, type WatchedConnection } from '../support/commands-during.js';
import { uniquePrefix } from '../support/keys.js';
import { clientAddr } from '../support/monitor.js';
import { sharedRedis } from '../support/redis-server.js';
import { testResources, type Redis } from '../support/resources.js';

describe('round trips of the lock operations', () => {
  let url: string;
  /** Used by the LockClient under test and by nothing else but the count markers. */
  let redis: Redis;
  /** For holding a lock from elsewhere. */
  let otherRedis: Redis;
  /** `redis`, its address and a monitor: what commandsDuring() counts on. */
  let watched: WatchedConnection;
  const perFile = testResources(() => url);
  const res = testResources(() => url);

  function lockClient(connection: Redis, keyPrefix = uniquePrefix('round-trips')): LockClient {
    // The default 30 s watchdog: no renewal can go out during a count.
    return res.track(new LockClient(connection, { keyPrefix }));
  }

  const names = (commands: string[][]): string[] =>
    commands.map((command) => command[0]?.toUpperCase() ?? '');

  beforeAll(async () => {
    ({ url } = await sharedRedis());
    redis = await perFile.connect();
    otherRedis = await perFile.connect();
    const addr = await clientAddr(redis);

    // Warm-up: the scripts get loaded into the server's cache (NOSCRIPT -> EVAL) before counting.
    const warm = new LockClient(redis, { keyPrefix: uniquePrefix('round-trips-warm') });
    try {
      await (await warm.lock('warm-up').acquire()).release();
      await warm.lock('warm-up').withLock(async () => {
        await (await warm.lock('warm-up').acquire()).release();
      });
    } finally {
      await warm.close();
    }
    watched = { redis, addr, monitor: await perFile.monitor() };
  });

  afterEach(() => res.closeAll());

  afterAll(() => perFile.closeAll());

  it('sends exactly two commands for an uncontended acquire() + release(): two EVALSHA', async () => {
    const lock = lockClient(redis).lock('invoice:42');
    const commands = await commandsDuring(watched, async () => {
      const lease = await lock.acquire();
      await lease.release();
    });
    expect(names(commands)).toEqual(['EVALSHA', 'EVALSHA']);
    // One script to take the lock, another to give it back, both on the lock's key.
    expect(commands[0]?.[1]).not.toBe(commands[1]?.[1]);
    for (const command of commands) expect(command[3]).toBe(lock.key);
    expect(await otherRedis.exists(lock.key)).toBe(0);
  });

  it('sends exactly one command for a nested re-entry inside withLock, and one for its release', async () => {
    const lock = lockClient(redis).lock('invoice:43');
    await lock.withLock(async () => {
      let inner: Awaited<ReturnType<typeof lock.acquire>> | undefined;
      const acquire = await commandsDuring(watched, async () => {
        inner = await lock.acquire();
      });
      expect(names(acquire)).toEqual(['EVALSHA']);
      expect(inner?.holdCount).toBe(2);
      expect(Object.values(await otherRedis.hGetAll(lock.key))).toEqual(['2']);

      const release = await commandsDuring(watched, async () => {
        await inner?.release();
      });
      expect(names(release)).toEqual(['EVALSHA']);
      expect(Object.values(await otherRedis.hGetAll(lock.key))).toEqual(['1']);
    });
    expect(await otherRedis.exists(lock.key)).toBe(0);
  });

  it('sends exactly two commands for an uncontended withLock', async () => {
    const lock = lockClient(redis).lock('invoice:44');
    let ran = false;
    const commands = await commandsDuring(watched, async () => {
      await lock.withLock(() => {
        ran = true;
      });
    });
    expect(ran).toBe(true);
    expect(names(commands)).toEqual(['EVALSHA', 'EVALSHA']);
    expect(await otherRedis.exists(lock.key)).toBe(0);
  });

  it('sends exactly one command for a tryAcquire() refused by another holder', async () => {
    const prefix = uniquePrefix('round-trips');
    const lock = lockClient(redis, prefix).lock('invoice:45');
    const held = await lockClient(otherRedis, prefix).lock('invoice:45').acquire();
    try {
      const commands = await commandsDuring(watched, async () => {
        expect(await lock.tryAcquire()).toBeNull();
      });
      expect(names(commands)).toEqual(['EVALSHA']);
    } finally {
      await held.release();
    }
  });
});
