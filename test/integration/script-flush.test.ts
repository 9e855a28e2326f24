/**
 * SCRIPT FLUSH (or a server that lost its script cache) breaks nothing: every operation of a
 * lock falls back from EVALSHA to EVAL on NOSCRIPT.
 *
 * For every kind — a wait across flushes, the watchdog's renewals, and forceUnlock telling the
 * local holder — see test/chaos/every-kind-faults.test.ts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { LockLostError, LockLostEvent } from '../../src/index.js';
import { luaScripts } from '../../src/scripts/generated.js';
import { uniquePrefix } from '../support/keys.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources, type Redis } from '../support/resources.js';
import { sleep } from '../support/wait.js';

type ScriptName = keyof typeof luaScripts;

describe('after SCRIPT FLUSH', () => {
  let server: RedisInstance;
  let admin: Redis;
  const perFile = testResources(() => server.url);
  const res = testResources(() => server.url);

  async function loaded(names: readonly ScriptName[]): Promise<boolean[]> {
    const shas = names.map((name) => luaScripts[name].sha1);
    const reply = await admin.sendCommand<unknown[]>(['SCRIPT', 'EXISTS', ...shas]);
    return reply.map((flag) => Number(flag) === 1);
  }

  /**
   * Empties the script cache and checks that it really is empty; one transaction, so a
   * renewal running meanwhile cannot put a script back in between.
   */
  async function flush(): Promise<void> {
    const shas = Object.values(luaScripts).map((script) => script.sha1);
    const replies = await admin
      .multi()
      .addCommand(['SCRIPT', 'FLUSH'])
      .addCommand(['SCRIPT', 'EXISTS', ...shas])
      .exec();
    expect(replies[1]).toEqual(shas.map(() => 0));
  }

  beforeAll(async () => {
    // SCRIPT FLUSH is server-wide: never on a server other tests share.
    server = await startRedis();
    admin = await perFile.connect();
  });

  afterEach(() => res.closeAll());

  afterAll(async () => {
    await perFile.closeAll();
    // Unset when beforeAll could not start a server; its own error says why.
    await server?.stop();
  });

  /**
   * Every operation in turn, `between` before each. With `checkCache`, each step also checks
   * that the scripts it ran are back in the cache (they went through the EVAL fallback).
   */
  async function everyOperation(between: () => Promise<void>, checkCache: boolean): Promise<void> {
    const prefix = uniquePrefix('script-flush');
    const locks = await res.lockClient({ keyPrefix: prefix });
    const other = await res.lockClient({ keyPrefix: prefix });
    const lockLost: LockLostEvent[] = [];
    locks.on('lockLost', (event) => lockLost.push(event));
    const lock = locks.lock('invoice:42');
    const key = `${prefix}invoice:42`;
    const ran = async (scripts: readonly ScriptName[]): Promise<void> => {
      if (checkCache) expect(await loaded(scripts)).toEqual(scripts.map(() => true));
    };

    // acquire, re-enter, partial release, contended tryAcquire, full release.
    await between();
    await lock.withLock(async (outer) => {
      await ran(['lock/acquire']);
      expect(outer.holdCount).toBe(1);
      expect(await admin.hVals(key)).toEqual(['1']);

      await between();
      const inner = await lock.acquire();
      await ran(['lock/acquire']);
      expect(inner.holdCount).toBe(2);
      expect(await admin.hVals(key)).toEqual(['2']);

      await between();
      await inner.release();
      await ran(['lock/release']);
      expect(outer.holdCount).toBe(1);
      expect(await admin.hVals(key)).toEqual(['1']);

      await between();
      expect(await other.lock('invoice:42').tryAcquire()).toBeNull();
      await ran(['lock/acquire']);
      await between();
    });
    await ran(['lock/release']);
    expect(await admin.exists(key)).toBe(0);

    // tryAcquire on a free lock, release.
    await between();
    const tried = await lock.tryAcquire();
    await ran(['lock/acquire']);
    expect(tried?.holdCount).toBe(1);
    await between();
    await tried?.release();
    await ran(['lock/release']);
    expect(await admin.exists(key)).toBe(0);

    // forceUnlock, from this client and from another one.
    const forced = await lock.acquire();
    await between();
    expect(await lock.forceUnlock()).toBe(true);
    await ran(['lock/force-release']);
    expect(await admin.exists(key)).toBe(0);
    expect((forced.signal.reason as LockLostError).reason).toBe('force-unlocked');
    expect(lockLost.map((event) => event.error.reason)).toEqual(['force-unlocked']);
    lockLost.length = 0;
    const forcedElsewhere = await other.lock('invoice:42').acquire();
    await between();
    expect(await lock.forceUnlock()).toBe(true);
    await ran(['lock/force-release']);
    expect(await admin.exists(key)).toBe(0);
    await between();
    expect(await lock.forceUnlock()).toBe(false);
    await expect(forcedElsewhere.release()).rejects.toMatchObject({ code: 'NOT_OWNER' });

    // Waiting and handoff.
    const held = await other.lock('invoice:42').acquire();
    await between();
    let waiterGotIt = false;
    const waiting = lock.acquire({ waitMs: 5_000 }).then((lease) => {
      waiterGotIt = true;
      return lease;
    });
    await sleep(100);
    expect(waiterGotIt).toBe(false);
    await between();
    await held.release();
    const lease = await waiting;
    // The release handed the lock to the queued waiter: no acquire after it.
    await ran(['lock/release']);
    expect(lease.holdCount).toBe(1);
    expect(await admin.hVals(key)).toEqual(['1']);
    await between();
    await lease.release();
    await ran(['lock/release']);
    expect(await admin.exists(key)).toBe(0);
    expect(lockLost).toEqual([]);
  }

  it('every operation works after one flush', async () => {
    await flush();
    await everyOperation(() => Promise.resolve(), false);
  });

  it('every operation works with a flush before each step', async () => {
    await everyOperation(flush, true);
  });
});
