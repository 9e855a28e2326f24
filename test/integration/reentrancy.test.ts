import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockClient, LockReentryError, LockTimeoutError, type Lease } from '../../src/index.js';
import type { Worker } from '../support/child.js';
import { uniquePrefix } from '../support/keys.js';
import { sharedRedis } from '../support/redis-server.js';
import { testResources, type LockConnection, type Redis } from '../support/resources.js';
import { sleep, within } from '../support/wait.js';

const WORKER = new URL('../support/fixtures/reentrancy-worker.ts', import.meta.url).pathname;

/** Resolves once `parties` callers are waiting on it at the same time; fails after 5 s. */
function barrier(parties: number): () => Promise<void> {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return () => {
    arrived += 1;
    if (arrived === parties) open();
    return within(opened, 5_000, `a barrier of ${parties}`);
  };
}

describe('reentrancy: the owner is the async context of the withLock callback', () => {
  let url: string;
  let redis: LockConnection;
  let otherRedis: LockConnection;
  /** For reading the lock's hash. */
  let admin: Redis;
  let worker: Worker;
  const perFile = testResources(() => url);
  const res = testResources(() => url);

  function lockClient(connection: LockConnection, keyPrefix: string): LockClient {
    return res.track(new LockClient(connection, { keyPrefix }));
  }

  /** The hold counts stored in the lock's hash, one per owner field. */
  async function counts(key: string): Promise<string[]> {
    return Object.values(await admin.hGetAll(key));
  }

  async function fields(key: string): Promise<string[]> {
    return Object.keys(await admin.hGetAll(key));
  }

  let tries = 0;
  /** Asks the child process to tryAcquire `key` (its keyPrefix is empty) once. */
  async function workerGets(key: string, nested = false): Promise<boolean> {
    tries += 1;
    const id = tries;
    worker.send({ type: 'try', name: key, nested, id });
    const reply = await worker.next((msg) => msg['type'] === 'result' && msg['id'] === id, 15_000);
    return reply['got'] === true;
  }

  beforeAll(async () => {
    ({ url } = await sharedRedis());
    redis = await perFile.connectLocks();
    otherRedis = await perFile.connectLocks();
    admin = await perFile.connect();
    worker = perFile.worker(WORKER, { REDIS_URL: url, KEY_PREFIX: '' });
    await worker.next((msg) => msg['type'] === 'ready', 25_000);
  });

  afterEach(() => res.closeAll());

  afterAll(async () => {
    try {
      worker?.send({ type: 'exit' });
    } catch {
      // Already gone; closeAll() below stops it all the same.
    }
    await perFile.closeAll();
  });

  it('re-enters from nested async functions: counts 1, 2, 3 in Redis, unwound 3 -> 2 -> 1 -> deleted, while other owners are blocked', async () => {
    const prefix = uniquePrefix('reenter');
    const locks = lockClient(redis, prefix);
    const other = lockClient(otherRedis, prefix);
    const lock = locks.lock('invoice:42');
    const key = lock.key;
    const seenFields = new Set<string>();

    // (a) Another async chain of the same client. It is created here, outside any callback, so
    // its continuation keeps this (owner-less) context even though the gate is opened from
    // inside the critical section.
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => {
      openGate = resolve;
    });
    const sameClientOtherChain = (async (): Promise<Lease | null> => {
      await gate;
      return lock.tryAcquire();
    })();

    const level3 = async (): Promise<void> => {
      const lease = await lock.acquire({ waitMs: 1_000 });
      try {
        expect(await counts(key)).toEqual(['3']);
        for (const field of await fields(key)) seenFields.add(field);
        expect(lease.holdCount).toBe(3);
        expect(await lock.holdCount()).toBe(3);

        // (a) the same client, another async chain
        openGate();
        expect(await sameClientOtherChain).toBeNull();
        // (b) another LockClient on another connection, called from right here
        const otherLock = other.lock('invoice:42');
        expect(await otherLock.tryAcquire()).toBeNull();
        await expect(otherLock.acquire({ waitMs: 100 })).rejects.toBeInstanceOf(LockTimeoutError);
        // (c) another process, plain and from inside a withLock callback of its own
        expect(await workerGets(key)).toBe(false);
        expect(await workerGets(key, true)).toBe(false);

        // None of them changed the hash: still one field at count 3.
        expect(await counts(key)).toEqual(['3']);
      } finally {
        await lease.release();
      }
      expect(await counts(key)).toEqual(['2']);
    };

    const level2 = async (): Promise<void> => {
      await lock.withLock(async (lease) => {
        expect(await counts(key)).toEqual(['2']);
        for (const field of await fields(key)) seenFields.add(field);
        expect(lease.holdCount).toBe(2);
        await level3();
        expect(await counts(key)).toEqual(['2']);
      });
      expect(await counts(key)).toEqual(['1']);
    };

    await lock.withLock(async (lease) => {
      expect(await counts(key)).toEqual(['1']);
      for (const field of await fields(key)) seenFields.add(field);
      expect(lease.holdCount).toBe(1);
      await level2();
      expect(await counts(key)).toEqual(['1']);
      expect(await admin.exists(key)).toBe(1);
    });
    expect(await admin.exists(key)).toBe(0);
    // Every level was the same owner: one field all the way down.
    expect(seenFields.size).toBe(1);

    // The others were blocked by the hold, not by something else: now they all get it.
    expect(await workerGets(key)).toBe(true);
    const otherLease = await other.lock('invoice:42').tryAcquire();
    expect(otherLease).not.toBeNull();
    await otherLease?.release();
    const topLevel = await lock.tryAcquire();
    expect(topLevel).not.toBeNull();
    await topLevel?.release();
    expect(await admin.exists(key)).toBe(0);
  });

  it('gives every top-level acquire outside withLock its own owner, so they exclude each other', async () => {
    const locks = lockClient(redis, uniquePrefix('toplevel'));
    const lock = locks.lock('coupon:7');
    const first = await lock.acquire();
    try {
      expect(await lock.tryAcquire()).toBeNull();
      await expect(lock.acquire({ waitMs: 100 })).rejects.toBeInstanceOf(LockTimeoutError);
      expect(await counts(lock.key)).toEqual(['1']);
    } finally {
      await first.release();
    }
    expect(await admin.exists(lock.key)).toBe(0);
  });

  it('lets siblings forked with Promise.all inside the callback share the owner (both pass at once)', async () => {
    const locks = lockClient(redis, uniquePrefix('siblings'));
    const lock = locks.lock('cart:7');
    const key = lock.key;

    await lock.withLock(async () => {
      const startedAt = performance.now();
      // waitMs 0: a sibling that had to wait for the other would come back null.
      const [a, b] = await Promise.all([lock.tryAcquire(), lock.tryAcquire()]);
      expect(a).not.toBeNull();
      expect(b).not.toBeNull();
      expect(performance.now() - startedAt).toBeLessThan(2_000);
      expect(await counts(key)).toEqual(['3']);
      await a?.release();
      expect(await counts(key)).toEqual(['2']);
      await b?.release();
      expect(await counts(key)).toEqual(['1']);

      // Two sibling critical sections are inside at the same time.
      const bothInside = barrier(2);
      let inside = 0;
      let maxInside = 0;
      const sibling = (): Promise<void> =>
        lock.withLock(async () => {
          inside += 1;
          maxInside = Math.max(maxInside, inside);
          await bothInside();
          expect(await counts(key)).toEqual(['3']);
          inside -= 1;
        });
      await Promise.all([sibling(), sibling()]);
      expect(maxInside).toBe(2);
      expect(await counts(key)).toEqual(['1']);
    });
    expect(await admin.exists(key)).toBe(0);
  });

  it('releases sibling holds given up at the same moment one after the other, and hands the lock over once', async () => {
    const prefix = uniquePrefix('sibling-release');
    const locks = lockClient(redis, prefix);
    const lock = locks.lock('ledger:9');
    const key = lock.key;
    const waiterLocks = lockClient(otherRedis, prefix);
    let waiting: Promise<Lease> | undefined;

    await lock.withLock(async () => {
      const [a, b] = await Promise.all([lock.acquire(), lock.acquire()]);
      expect(await counts(key)).toEqual(['3']);
      waiting = waiterLocks.lock('ledger:9').acquire({ waitMs: 10_000 });
      // Queued in Redis behind the holder before anything is released.
      await within(
        (async () => {
          while ((await admin.lLen(`latchkey_queue:{${key}}`)) === 0) await sleep(5);
        })(),
        5_000,
        'the waiter to queue',
      );
      // Both releases start in the same turn: the first goes out at once, the second waits for
      // its reply on the owner's chain and counts down from what the first left.
      await Promise.all([a.release(), b.release()]);
      expect(await counts(key)).toEqual(['1']);
      expect(a.holdCount).toBe(1);
      const early = await Promise.race([waiting.then(() => 'taken'), sleep(100).then(() => 'waiting')]);
      expect(early).toBe('waiting');
    });
    // The outer hold's release hands the lock to the waiter, whose field is the only one left.
    const taken = await within(waiting as Promise<Lease>, 5_000, 'the hand-over');
    expect(await fields(key)).toHaveLength(1);
    expect(await counts(key)).toEqual(['1']);
    expect(taken.holdCount).toBe(1);
    await taken.release();
    expect(await admin.exists(key)).toBe(0);
  });

  describe('a non-reentrant lock', () => {
    it('rejects a nested withLock/acquire/tryAcquire with LockReentryError at once instead of deadlocking', async () => {
      const locks = lockClient(redis, uniquePrefix('strict'));
      const strict = locks.lock('report:daily', { reentrant: false });
      expect(strict.reentrant).toBe(false);
      const key = strict.key;
      let nestedRan = false;

      await strict.withLock(async () => {
        const before = await admin.hGetAll(key);
        expect(Object.values(before)).toEqual(['1']);
        const startedAt = performance.now();

        const nested = strict.withLock(() => {
          nestedRan = true;
        });
        const error: unknown = await within(nested, 3_000, 'nested withLock').catch((e: unknown) => e);
        expect(error).toBeInstanceOf(LockReentryError);
        expect(error).toMatchObject({ name: 'LockReentryError', code: 'REENTRY_REJECTED' });

        // acquire() waits forever by default: it must still reject rather than wait for itself.
        await expect(within(strict.acquire(), 3_000, 'nested acquire')).rejects.toMatchObject({
          code: 'REENTRY_REJECTED',
        });
        await expect(within(strict.tryAcquire(), 3_000, 'nested tryAcquire')).rejects.toBeInstanceOf(
          LockReentryError,
        );
        // Another handle on the same lock, from deeper in the async tree (after a timer).
        await sleep(1);
        const again = locks.lock('report:daily', { reentrant: false });
        await expect(
          within(again.acquire(), 3_000, 'nested acquire of a second handle'),
        ).rejects.toBeInstanceOf(LockReentryError);
        expect(performance.now() - startedAt).toBeLessThan(2_000);

        expect(nestedRan).toBe(false);
        expect(await strict.holdCount()).toBe(1);
        // Nothing was sent for the rejected attempts: the hold is as it was.
        expect(await admin.hGetAll(key)).toEqual(before);
      });
      expect(await admin.exists(key)).toBe(0);
    });

    it('runs side-by-side withLock callbacks one after the other, at top level and in a shared context', async () => {
      const prefix = uniquePrefix('strict-side');
      const locks = lockClient(redis, prefix);
      const strict = locks.lock('report:weekly', { reentrant: false });
      const reentrant = locks.lock('report:monthly');

      const run = async (
        lock: typeof strict,
        startBoth: (both: () => Promise<void[]>) => Promise<unknown>,
      ): Promise<{ maxInside: number; events: string[] }> => {
        const events: string[] = [];
        let inside = 0;
        let maxInside = 0;
        const section = (label: string) => async (): Promise<void> => {
          inside += 1;
          maxInside = Math.max(maxInside, inside);
          events.push(`${label}:in`);
          await sleep(150);
          events.push(`${label}:out`);
          inside -= 1;
        };
        await within(
          startBoth(() => Promise.all([lock.withLock(section('a')), lock.withLock(section('b'))])),
          10_000,
          'two side-by-side withLock calls',
        );
        return { maxInside, events };
      };

      // Top level: two separate contexts.
      const topLevel = await run(strict, (both) => both());
      expect(topLevel.maxInside).toBe(1);
      expect([
        ['a:in', 'a:out', 'b:in', 'b:out'],
        ['b:in', 'b:out', 'a:in', 'a:out'],
      ]).toContainEqual(topLevel.events);

      // Both started from inside one critical section of another lock, so they share a context.
      const shared = await run(strict, (both) => locks.lock('report:parent').withLock(both));
      expect(shared.maxInside).toBe(1);
      expect([
        ['a:in', 'a:out', 'b:in', 'b:out'],
        ['b:in', 'b:out', 'a:in', 'a:out'],
      ]).toContainEqual(shared.events);

      // The same shape with a reentrant lock does overlap: the check above can see an overlap.
      const overlapping = await run(reentrant, (both) => locks.lock('report:parent').withLock(both));
      expect(overlapping.maxInside).toBe(2);

      expect(await admin.exists(strict.key)).toBe(0);
    });
  });
});
