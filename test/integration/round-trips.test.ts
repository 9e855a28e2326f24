import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockClient } from '../../src/index.js';
import { commandsDuring, type WatchedConnection } from '../support/commands-during.js';
import { uniquePrefix } from '../support/keys.js';
import { clientAddr } from '../support/monitor.js';
import { sharedRedis } from '../support/redis-server.js';
import { commandsOf } from '../support/clients.js';
import { testResources, type LockConnection, type Redis } from '../support/resources.js';

describe('round trips of the lock operations', () => {
  let url: string;
  /** Used by the LockClient under test and by nothing else but the count markers. */
  let redis: LockConnection;
  /** For holding a lock from elsewhere. */
  let otherRedis: LockConnection;
  /** For reading keys. */
  let admin: Redis;
  /** `redis`, its address and a monitor: what commandsDuring() counts on. */
  let watched: WatchedConnection;
  const perFile = testResources(() => url);
  const res = testResources(() => url);

  /**
   * A LockClient past its first acquire, whose check of the server version (one INFO, counted
   * in its own test below) is behind it.
   */
  async function lockClient(
    connection: LockConnection,
    keyPrefix = uniquePrefix('round-trips'),
  ): Promise<LockClient> {
    // The default 30 s watchdog: no renewal can go out during a count.
    const locks = res.track(new LockClient(connection, { keyPrefix }));
    await (await locks.lock('warm-up').acquire()).release();
    return locks;
  }

  const names = (commands: string[][]): string[] =>
    commands.map((command) => command[0]?.toUpperCase() ?? '');

  beforeAll(async () => {
    ({ url } = await sharedRedis());
    redis = await perFile.connectLocks();
    otherRedis = await perFile.connectLocks();
    admin = await perFile.connect();
    const addr = await clientAddr(commandsOf(redis));

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
    watched = { redis: commandsOf(redis), addr, monitor: await perFile.monitor() };
  });

  afterEach(() => res.closeAll());

  afterAll(() => perFile.closeAll());

  it('checks the server with one INFO per LockClient, before its first script call, shared by concurrent first acquires, then sends one PUBSUB NUMSUB', async () => {
    const locks = res.track(new LockClient(redis, { keyPrefix: uniquePrefix('round-trips') }));
    const first = await commandsDuring(watched, async () => {
      const leases = await Promise.all(
        ['a', 'b', 'c'].map((name) => locks.lock(`invoice:${name}`).acquire()),
      );
      await Promise.all(leases.map((lease) => lease.release()));
      await (await locks.lock('invoice:d').acquire()).release();
      expect(await locks.lock('invoice:e').forceUnlock()).toBe(false);
    });
    expect(names(first)[0]).toBe('INFO');
    expect(first.filter((command) => command[0]?.toUpperCase() === 'INFO')).toEqual([['INFO', 'server']]);
    // Once the server passed, whether its user may count subscribers (see handover-acl.test.ts),
    // sent beside the first script calls, not before them.
    const numsub = first.filter((command) => command[0]?.toUpperCase() === 'PUBSUB');
    expect(numsub).toHaveLength(1);
    expect(numsub[0]?.slice(1, 2)).toEqual(['NUMSUB']);
    expect(numsub[0]?.[2]).toMatch(/^latchkey_grant:/);
    // Otherwise only script calls (forceUnlock's script may be new to the server: EVALSHA, then EVAL).
    expect(
      names(first)
        .slice(1)
        .every((name) => name === 'EVALSHA' || name === 'EVAL' || name === 'PUBSUB'),
    ).toBe(true);
    expect(names(first).filter((name) => name === 'EVALSHA')).toHaveLength(9);

    // Another LockClient on the same connection checks for itself, once.
    const second = res.track(new LockClient(redis, { keyPrefix: uniquePrefix('round-trips') }));
    const again = await commandsDuring(watched, async () => {
      await (await second.lock('invoice:f').acquire()).release();
      await (await second.lock('invoice:f').acquire()).release();
    });
    expect(names(again).filter((name) => name !== 'PUBSUB')).toEqual([
      'INFO',
      'EVALSHA',
      'EVALSHA',
      'EVALSHA',
      'EVALSHA',
    ]);
    expect(names(again).filter((name) => name === 'PUBSUB')).toHaveLength(1);
  });

  it('sends exactly two commands for an uncontended acquire() + release(): two EVALSHA', async () => {
    const lock = (await lockClient(redis)).lock('invoice:42');
    const commands = await commandsDuring(watched, async () => {
      const lease = await lock.acquire();
      await lease.release();
    });
    expect(names(commands)).toEqual(['EVALSHA', 'EVALSHA']);
    // One script to take the lock, another to give it back, both on the lock's key.
    expect(commands[0]?.[1]).not.toBe(commands[1]?.[1]);
    for (const command of commands) expect(command[3]).toBe(lock.key);
    expect(await admin.exists(lock.key)).toBe(0);
  });

  it('sends exactly one command for a nested re-entry inside withLock, and one for its release', async () => {
    const lock = (await lockClient(redis)).lock('invoice:43');
    await lock.withLock(async () => {
      let inner: Awaited<ReturnType<typeof lock.acquire>> | undefined;
      const acquire = await commandsDuring(watched, async () => {
        inner = await lock.acquire();
      });
      expect(names(acquire)).toEqual(['EVALSHA']);
      expect(inner?.holdCount).toBe(2);
      expect(Object.values(await admin.hGetAll(lock.key))).toEqual(['2']);

      const release = await commandsDuring(watched, async () => {
        await inner?.release();
      });
      expect(names(release)).toEqual(['EVALSHA']);
      expect(Object.values(await admin.hGetAll(lock.key))).toEqual(['1']);
    });
    expect(await admin.exists(lock.key)).toBe(0);
  });

  it('sends exactly two commands for an uncontended withLock', async () => {
    const lock = (await lockClient(redis)).lock('invoice:44');
    let ran = false;
    const commands = await commandsDuring(watched, async () => {
      await lock.withLock(() => {
        ran = true;
      });
    });
    expect(ran).toBe(true);
    expect(names(commands)).toEqual(['EVALSHA', 'EVALSHA']);
    expect(await admin.exists(lock.key)).toBe(0);
  });

  it('sends exactly one command for a tryAcquire() refused by another holder', async () => {
    const prefix = uniquePrefix('round-trips');
    const lock = (await lockClient(redis, prefix)).lock('invoice:45');
    const held = await (await lockClient(otherRedis, prefix)).lock('invoice:45').acquire();
    try {
      const commands = await commandsDuring(watched, async () => {
        expect(await lock.tryAcquire()).toBeNull();
      });
      expect(names(commands)).toEqual(['EVALSHA']);
    } finally {
      await held.release();
    }
  });
  it('two waiters of one client on a lock it has not waited on yet: one attempt each, one re-check by the waiter that subscribed, then hand-overs with no request', async () => {
    const prefix = uniquePrefix('round-trips');
    const locks = await lockClient(redis, prefix);
    const other = await lockClient(otherRedis, prefix);
    // A wait on another lock first: this client now listens for hand-overs, so a first attempt
    // that finds the lock held queues its waiter.
    const blocking = await other.lock('warm-up:grants').acquire();
    const warm = locks.lock('warm-up:grants').acquire();
    await new Promise((resolve) => setTimeout(resolve, 100));
    await blocking.release();
    await (await warm).release();
    const lock = locks.lock('invoice:46');
    let held = await other.lock('invoice:46').acquire();
    const commands = await commandsDuring(watched, async () => {
      // Both first attempts leave before either reply: neither finds the channel subscribed.
      const first = lock.acquire();
      const second = lock.acquire();
      // Time for the subscription and the subscribing waiter's re-check.
      await new Promise((resolve) => setTimeout(resolve, 300));
      await held.release();
      held = await first;
      await held.release();
      await (await second).release();
    });
    expect(names(commands)).toEqual(['EVALSHA', 'EVALSHA', 'EVALSHA', 'EVALSHA', 'EVALSHA']);
  });
});
