/**
 * `waitMs` and `signal` on a lock: tryAcquire gives up on time, one signal serves many waits,
 * an abort before the wait is parked or before the call rejects with exactly `signal.reason`, and
 * a lock that Redis grants after the caller aborted is handed straight back.
 *
 * An `acquire` whose `waitMs` runs out, and an abort of a parked wait, leaving neither a hold nor a
 * subscription behind, are tested for every kind in test/integration/every-kind.test.ts.
 */
import { getEventListeners } from 'node:events';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockClient, LockTimeoutError, type ReleasedEvent } from '../../src/index.js';
import { uniquePrefix } from '../support/keys.js';
import { KINDS, WRITE_LOCK } from '../support/kinds.js';
import { clientAddr, commandsFrom } from '../support/monitor.js';
import { sharedRedis, startRedis, type RedisInstance } from '../support/redis-server.js';
import { commandsOf } from '../support/clients.js';
import { channelOf, testResources, type Redis } from '../support/resources.js';
import { settle, sleep, waitUntil } from '../support/wait.js';

describe('acquire timeouts and aborts', () => {
  let url: string;
  let admin: Redis;
  const perFile = testResources(() => url);
  const res = testResources(() => url);

  /** A lock held by another LockClient; returns its key and the holder's field. */
  async function heldLock(name: string): Promise<{ prefix: string; key: string; holderField: string }> {
    const prefix = uniquePrefix('abort-timeout');
    const holder = await res.lockClient({ keyPrefix: prefix });
    await holder.lock(name).acquire();
    const key = prefix + name;
    const fields = await admin.hKeys(key);
    expect(fields).toHaveLength(1);
    return { prefix, key, holderField: fields[0] ?? '' };
  }

  beforeAll(async () => {
    ({ url } = await sharedRedis());
    admin = await perFile.connect();
  });

  afterEach(() => res.closeAll());

  afterAll(() => perFile.closeAll());

  describe('waitMs', () => {
    it('tryAcquire({ waitMs: 300 }) on a held lock resolves null after about 300 ms', async () => {
      const { prefix, key, holderField } = await heldLock('invoice:2');
      const locks = await res.lockClient({ keyPrefix: prefix });
      const startedAt = performance.now();
      const outcome = await settle(locks.lock('invoice:2').tryAcquire({ waitMs: 300 }));
      const elapsedMs = outcome.at - startedAt;
      expect(outcome.error).toBeUndefined();
      expect(outcome.value).toBeNull();
      expect(elapsedMs).toBeGreaterThanOrEqual(280);
      expect(elapsedMs).toBeLessThan(1_000);
      expect(await admin.hKeys(key)).toEqual([holderField]);
    });

    it('tryAcquire() with the default waitMs resolves null at once', async () => {
      const { prefix, key, holderField } = await heldLock('invoice:3');
      const locks = await res.lockClient({ keyPrefix: prefix });
      const lock = locks.lock('invoice:3');
      // Warm up the script cache, so the timing below measures one round trip.
      expect(await lock.tryAcquire()).toBeNull();
      const startedAt = performance.now();
      const outcome = await settle(lock.tryAcquire());
      expect(outcome.error).toBeUndefined();
      expect(outcome.value).toBeNull();
      expect(outcome.at - startedAt).toBeLessThan(100);
      expect(await admin.hKeys(key)).toEqual([holderField]);
    });

    describe.each(KINDS)('$name', (kind) => {
      it('the LockTimeoutError says how long the call waited and that another owner holds it, with its lease left, and no owner token', async () => {
        const prefix = uniquePrefix('abort-timeout');
        const key = `${prefix}invoice:9`;
        const holder = await res.lockClient({ keyPrefix: prefix });
        // Readers share a read lock: a reader waits for a writer.
        await (kind.exclusive ? kind : WRITE_LOCK).handle(holder, 'invoice:9').acquire({ leaseMs: 10_000 });
        const locks = await res.lockClient({ keyPrefix: prefix });
        const startedAt = performance.now();
        const outcome = await settle(kind.handle(locks, 'invoice:9').acquire({ waitMs: 200 }));
        const elapsedMs = outcome.at - startedAt;
        expect(outcome.error).toBeInstanceOf(LockTimeoutError);
        const message = (outcome.error as Error).message;
        const parts =
          /^Timed out after (\d+) ms waiting for lock "invoice:9": at the last try another owner held it, with (\d+) ms of its lease left$/.exec(
            message,
          );
        expect(parts, message).not.toBeNull();
        const [waitedMs, leftMs] = [Number(parts?.[1]), Number(parts?.[2])];
        expect(waitedMs).toBeGreaterThanOrEqual(200);
        expect(waitedMs).toBeLessThanOrEqual(Math.ceil(elapsedMs));
        expect(leftMs).toBeGreaterThan(0);
        expect(leftMs).toBeLessThanOrEqual(10_000);
        // Whatever Redis keeps of the owners (hash fields, a token) is not in it.
        const secrets =
          (await admin.type(key)) === 'hash' ? await admin.hKeys(key) : [(await admin.get(key)) ?? ''];
        for (const secret of secrets.filter((value) => value.length > 8)) {
          expect(message).not.toContain(secret);
          expect(message).not.toContain(secret.split(':')[0]);
        }
      });
    });
  });

  describe('signal', () => {
    it('one signal shared by 30 waiting acquires gets one listener, no leak warning, and aborts them all', async () => {
      const { prefix, key, holderField } = await heldLock('invoice:4b');
      const locks = await res.lockClient({ keyPrefix: prefix, subscriptionLingerMs: 0 });
      const controller = new AbortController();
      const reason = new Error('shutting down');
      const warnings: Error[] = [];
      const onWarning = (warning: Error): void => {
        if (warning.name === 'MaxListenersExceededWarning') warnings.push(warning);
      };
      process.on('warning', onWarning);
      try {
        const waiting = Array.from({ length: 30 }, () =>
          settle(locks.lock('invoice:4b').acquire({ signal: controller.signal })),
        );
        await waitUntil('the waiters are subscribed', async () => (await res.numsub(channelOf(key))) === 1);
        await sleep(100);
        expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);

        controller.abort(reason);
        const outcomes = await Promise.all(waiting);
        expect(outcomes.map((outcome) => outcome.error)).toEqual(outcomes.map(() => reason));
        expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
        // A warning is emitted on the next tick.
        await sleep(10);
        expect(warnings).toEqual([]);
      } finally {
        process.off('warning', onWarning);
      }
      expect(await admin.hKeys(key)).toEqual([holderField]);

      // A signal that never aborts is let go of by acquires that got the lock.
      const free = await res.lockClient({ keyPrefix: uniquePrefix('abort-shared') });
      const kept = new AbortController();
      for (let i = 0; i < 3; i += 1) {
        const lease = await free.lock(`free:${i}`).acquire({ signal: kept.signal });
        await lease.release();
      }
      expect(getEventListeners(kept.signal, 'abort')).toHaveLength(0);
    });

    it('aborting an acquire before it is parked (attempt in flight or subscribing) rejects with signal.reason too', async () => {
      const { prefix, key, holderField } = await heldLock('invoice:5');
      const locks = await res.lockClient({ keyPrefix: prefix, subscriptionLingerMs: 0 });
      const controller = new AbortController();
      const reason = new Error('shutting down');
      const waiting = settle(locks.lock('invoice:5').acquire({ signal: controller.signal }));
      // Abort within the first round trip or the subscribe that follows it.
      setImmediate(() => controller.abort(reason));
      const abortedAt = performance.now();
      const outcome = await waiting;
      expect(outcome.error).toBe(reason);
      expect(outcome.at - abortedAt).toBeLessThan(100);
      expect(await admin.hKeys(key)).toEqual([holderField]);
      await waitUntil('no subscription is left', async () => (await res.numsub(channelOf(key))) === 0, 1_000);
    });

    it('an already-aborted signal rejects before any Redis command', async () => {
      const prefix = uniquePrefix('abort-early');
      const connection = await res.connectLocks();
      const redis = commandsOf(connection);
      const addr = await clientAddr(redis);
      const locks = res.track(new LockClient(connection, { keyPrefix: prefix }));
      const lock = locks.lock('invoice:6');
      const monitor = await res.monitor();

      const controller = new AbortController();
      const reason = { why: 'aborted before the call' };
      controller.abort(reason);
      let called = false;
      await expect(lock.acquire({ signal: controller.signal })).rejects.toBe(reason);
      await expect(lock.tryAcquire({ signal: controller.signal })).rejects.toBe(reason);
      await expect(
        lock.withLock(
          () => {
            called = true;
          },
          { signal: controller.signal },
        ),
      ).rejects.toBe(reason);
      expect(called).toBe(false);

      const marker = `after-the-aborted-calls-${prefix}`;
      await redis.sendCommand(['ECHO', marker]);
      await monitor.waitFor((lines) =>
        commandsFrom(lines, { clientAddr: addr }).some((cmd) => cmd[0] === 'ECHO' && cmd[1] === marker),
      );
      expect(commandsFrom(monitor.lines, { clientAddr: addr })).toEqual([['ECHO', marker]]);
      expect(commandsFrom(monitor.lines).filter((cmd) => cmd.some((arg) => arg.includes(prefix)))).toEqual([
        ['ECHO', marker],
      ]);
      expect(await admin.exists(`${prefix}invoice:6`)).toBe(0);
    });

    describe('a lock granted after the abort', () => {
      let server: RedisInstance;

      beforeAll(async () => {
        server = await startRedis();
      });

      afterAll(async () => {
        // Unset when beforeAll could not start a server; its own error says why.
        await server?.stop();
      });

      it('is released, and the acquire rejects with signal.reason', async () => {
        const prefix = uniquePrefix('abort-granted');
        const key = `${prefix}invoice:7`;
        const redis = await res.connectLocks({ url: server.url });
        const direct = await res.connect({ url: server.url });
        const locks = res.track(new LockClient(redis, { keyPrefix: prefix }));
        const released: ReleasedEvent[] = [];
        locks.on('released', (event) => released.push(event));
        const lock = locks.lock('invoice:7');
        // Load the scripts, so the paused request is the acquire itself, not a NOSCRIPT round.
        await (await lock.acquire()).release();
        released.length = 0;

        const controller = new AbortController();
        const reason = { why: 'gave up while the request was in flight' };
        await server.pause();
        let outcome: Promise<{ value?: unknown; error?: unknown; at: number }>;
        try {
          // The lock is free: the request is granted as soon as the server reads it.
          outcome = settle(lock.acquire({ signal: controller.signal }));
          await sleep(100);
          const abortedAt = performance.now();
          controller.abort(reason);
          // The caller hears of its abort at once, while its request is still unanswered.
          const settled = await outcome;
          expect(settled.error).toBe(reason);
          expect(settled.at - abortedAt).toBeLessThan(100);
          expect(released).toEqual([]);
        } finally {
          await server.resume();
        }
        // The library did get the lock once Redis read the request, and gave it back.
        await waitUntil('the late grant is given back', () => released.length === 1, 5_000);
        expect(released).toEqual([{ name: 'invoice:7', key, holdCount: 0 }]);
        expect(await direct.exists(key)).toBe(0);
        expect(await lock.isLocked()).toBe(false);
      });
    });
  });
});
