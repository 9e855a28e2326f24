/**
 * The fair lock: Redisson's RFairLock layout (the RLock hash, a list of waiting owners in arrival
 * order, a sorted set of their deadlines by Redis's clock, a channel per waiting owner), served in
 * queue order across processes, a release waking the head alone, waiters that keep their place by
 * asking again, and waiters that give up leaving nothing behind.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  ClientClosedError,
  InvalidArgumentError,
  LockError,
  LockReentryError,
  LockTimeoutError,
  type FairLock,
  type Lease,
  type LockClient,
} from '../../src/index.js';
import { luaScripts } from '../../src/scripts/generated.js';
import type { Worker, WorkerMessage } from '../support/child.js';
import { commandsFrom } from '../support/monitor.js';
import { fairHeartbeatsOf, fairQueueOf, fairTimeoutsOf, uniquePrefix } from '../support/keys.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources, type Redis } from '../support/resources.js';
import { sharedSuite } from '../support/shared-suite.js';
import { settle, sleep, waitUntil } from '../support/wait.js';

/** Redisson's name, spelt out here rather than taken from src/keys.ts. */
const waiterChannelOf = (key: string, field: string): string => `redisson_lock__channel:{${key}}:${field}`;

const WORKER = 'test/support/fixtures/fair-waiter.ts';

/** The queue and the deadlines of a fair lock, as Redis has them. */
async function lineOf(admin: Redis, key: string): Promise<{ queue: string[]; timeouts: string[] }> {
  const [queue, timeouts] = await Promise.all([
    admin.lRange(fairQueueOf(key), 0, -1),
    admin.zRange(fairTimeoutsOf(key), 0, -1),
  ]);
  return { queue, timeouts };
}

/** Redis's clock, in ms since the epoch. */
async function redisNowMs(admin: Redis): Promise<number> {
  const [seconds, micros] = await admin.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** Calls of one script among monitor lines (EVALSHA by its digest). */
function scriptCallsOf(lines: readonly string[], script: keyof typeof luaScripts): string[][] {
  const sha = luaScripts[script].sha1;
  return commandsFrom(lines, { excludeLua: true }).filter(
    (args) => args[0]?.toUpperCase() === 'EVALSHA' && args[1] === sha,
  );
}

/** Fair-lock acquire script calls among monitor lines. */
function acquireCalls(lines: readonly string[]): string[][] {
  return scriptCallsOf(lines, 'fair-lock/acquire');
}

describe('FairLock', () => {
  const suite = sharedSuite('fair');
  const { res, lockClient } = suite;

  it('keeps the RLock hash, re-enters, counts holds and frees the key on the last release', async () => {
    const lock = lockClient({ watchdogTimeoutMs: 5_000 }).fairLock('settlements:eu');
    const admin = suite.admin;
    expect(lock.reentrant).toBe(true);
    expect(lock.waiterTimeoutMs).toBe(10_000);
    expect(await lock.holdCount()).toBe(0);

    await lock.withLock(async (outer) => {
      expect(await admin.type(lock.key)).toBe('hash');
      expect(await admin.pTTL(lock.key)).toBeGreaterThan(4_000);
      expect(await lock.holdCount()).toBe(1);
      expect(outer.holdCount).toBe(1);
      await lock.withLock(async (inner) => {
        expect(inner.holdCount).toBe(2);
        expect(await lock.holdCount()).toBe(2);
        expect(Object.values(await admin.hGetAll(lock.key))).toEqual(['2']);
      });
      expect(await lock.holdCount()).toBe(1);
      expect(await lock.isLocked()).toBe(true);
    });
    expect(await admin.exists([lock.key, fairQueueOf(lock.key), fairTimeoutsOf(lock.key)])).toBe(0);
    expect(await lock.remainingTtlMs()).toBeNull();
  });

  it('refuses re-entry when not reentrant, while side-by-side callbacks exclude each other', async () => {
    const lock = lockClient().fairLock('settlements:strict', { reentrant: false });
    expect(lock.reentrant).toBe(false);
    const inner = await lock.withLock(async () => {
      expect(await lock.holdCount()).toBe(1);
      return settle(lock.acquire({ waitMs: 100 }));
    });
    expect(inner.error).toBeInstanceOf(LockReentryError);
    expect(await lock.holdCount()).toBe(0);

    // Two callbacks of one context: the second waits in line for the first.
    const order: string[] = [];
    const first = lock.withLock(async () => {
      order.push('first in');
      await sleep(200);
      order.push('first out');
    });
    await waitUntil('the first holds it', () => order.length === 1);
    const second = lock.withLock(() => {
      order.push('second in');
    });
    await Promise.all([first, second]);
    expect(order).toEqual(['first in', 'first out', 'second in']);
    expect(await lineOf(suite.admin, lock.key)).toEqual({ queue: [], timeouts: [] });
  });

  it('serves waiters from several processes in the order they queued', async () => {
    const locks = lockClient();
    const lock = locks.fairLock('settlements:fifo');
    const prefix = lock.key.slice(0, -lock.name.length);
    const env = {
      REDIS_URL: suite.url,
      KEY_PREFIX: prefix,
      LOCK_NAME: lock.name,
      WAITER_TIMEOUT_MS: '10000',
    };
    const workers: Worker[] = [res.worker(WORKER, env), res.worker(WORKER, env)];
    await Promise.all(workers.map((worker) => worker.next((msg) => msg.type === 'ready', 20_000)));

    const holder = await lock.acquire();
    // Queue six owners, alternating between the two processes, each only once the one before it
    // is in the line, so the line's order is known.
    const ids = ['a1', 'b1', 'a2', 'b2', 'a3', 'b3'];
    for (const [i, id] of ids.entries()) {
      const worker = workers[i % 2];
      if (worker === undefined) throw new Error('no worker');
      worker.send({ type: 'acquire', id, holdMs: 50 });
      await waitUntil(`${id} queued`, async () => (await suite.admin.lLen(fairQueueOf(lock.key))) === i + 1);
    }
    await holder.release();

    const served: WorkerMessage[] = [];
    for (const worker of workers) {
      for (let i = 0; i < 3; i += 1) served.push(await worker.next((msg) => msg.type === 'acquired', 20_000));
    }
    served.sort((a, b) => (BigInt(String(a.at)) < BigInt(String(b.at)) ? -1 : 1));
    expect(served.map((msg) => msg.id)).toEqual(ids);
    for (const worker of workers) {
      for (let i = 0; i < 3; i += 1) await worker.next((msg) => msg.type === 'released', 20_000);
    }
    expect(await suite.admin.exists([lock.key, fairQueueOf(lock.key), fairTimeoutsOf(lock.key)])).toBe(0);
  });

  it('wakes only the head of the line on a release: one message, one attempt', async () => {
    // A long waiter timeout: no heartbeat falls into the window the test counts in.
    const locks = lockClient();
    const lock = locks.fairLock('settlements:wake', { waiterTimeoutMs: 60_000 });
    const admin = suite.admin;
    const messages: { channel: string; message: string }[] = [];
    const subscriber = await res.connect();
    await subscriber.pSubscribe(`redisson_lock__channel:{${lock.key}}:*`, (message, channel) =>
      messages.push({ channel, message }),
    );

    const holder = await lock.acquire();
    const waiters: Promise<Lease>[] = [];
    for (let i = 0; i < 3; i += 1) {
      waiters.push(lock.acquire());
      await waitUntil(`waiter ${i} queued`, async () => (await admin.lLen(fairQueueOf(lock.key))) === i + 1);
    }
    const [head] = await admin.lRange(fairQueueOf(lock.key), 0, 0);
    if (head === undefined) throw new Error('nobody queued');
    // Every waiter subscribed and tried again; wait until those attempts are done.
    await sleep(300);
    const monitor = await res.monitor();
    await holder.release();
    const [w0, w1, w2] = waiters as [Promise<Lease>, Promise<Lease>, Promise<Lease>];
    const first = await w0;
    await sleep(500);

    expect(messages).toEqual([{ channel: waiterChannelOf(lock.key, head), message: '0' }]);
    const attempts = acquireCalls(monitor.lines);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toContain(head);
    expect(await admin.lRange(fairQueueOf(lock.key), 0, -1)).toHaveLength(2);

    await first.release();
    const second = await w1;
    await second.release();
    await (await w2).release();
    expect(messages).toHaveLength(3);
    expect(await admin.exists([lock.key, fairQueueOf(lock.key), fairTimeoutsOf(lock.key)])).toBe(0);
  });

  it('moves a waiting owner’s heartbeat on with every attempt, by Redis’s clock, and counts its deadline as RFairLock does', async () => {
    const lock = lockClient({ watchdogTimeoutMs: 5_000 }).fairLock('settlements:heartbeat', {
      waiterTimeoutMs: 900,
      waitStepMs: 60_000,
    });
    const admin = suite.admin;
    const holder = await lock.acquire();
    const waiting = lock.acquire();
    await waitUntil('queued', async () => (await admin.lLen(fairQueueOf(lock.key))) === 1);
    const [field] = await admin.lRange(fairQueueOf(lock.key), 0, 0);
    if (field === undefined) throw new Error('nobody queued');
    // RFairLock's deadline: the lock's expiry plus one wait step, set once when it joined.
    const deadline = Number(await admin.zScore(fairTimeoutsOf(lock.key), field));
    const joinedAt = await redisNowMs(admin);
    expect(deadline - joinedAt).toBeGreaterThan(60_000);
    expect(deadline - joinedAt).toBeLessThanOrEqual(65_000);
    const beats: number[] = [];
    for (let i = 0; i < 6; i += 1) {
      const [nowMs, beat] = await Promise.all([
        redisNowMs(admin),
        admin.zScore(fairHeartbeatsOf(lock.key), field),
      ]);
      expect(beat).not.toBeNull();
      // Never more than a waiter timeout ahead, and never lapsed while the waiter lives.
      expect(Number(beat) - nowMs).toBeLessThanOrEqual(900);
      expect(Number(beat)).toBeGreaterThan(nowMs);
      beats.push(Number(beat));
      await sleep(400);
    }
    // A heartbeat every third of the timeout moved it on at least four times; the deadline stayed.
    expect(new Set(beats).size).toBeGreaterThanOrEqual(4);
    expect(Number(await admin.zScore(fairTimeoutsOf(lock.key), field))).toBe(deadline);
    // And the keys expire on their own, a waiter timeout after the latest deadline, once nobody
    // waits any more.
    for (const key of [fairQueueOf(lock.key), fairTimeoutsOf(lock.key), fairHeartbeatsOf(lock.key)]) {
      const ttl = await admin.pTTL(key);
      expect(ttl).toBeGreaterThan(deadline - (await redisNowMs(admin)) - 100);
      expect(ttl).toBeLessThanOrEqual(deadline - joinedAt + 900);
    }
    await holder.release();
    await (await waiting).release();
  });

  it('tryAcquire never queues and never goes ahead of the line', async () => {
    const locks = lockClient();
    const lock = locks.fairLock('settlements:try');
    const admin = suite.admin;
    const holder = await lock.acquire();
    expect(await lock.tryAcquire()).toBeNull();
    expect(await lineOf(admin, lock.key)).toEqual({ queue: [], timeouts: [] });
    await holder.release();

    // The lock is free, but another owner (a Redisson waiter, played here) is next in line.
    const nowMs = await redisNowMs(admin);
    await admin.rPush(fairQueueOf(lock.key), 'redisson-client:7');
    await admin.zAdd(fairTimeoutsOf(lock.key), { score: nowMs + 60_000, value: 'redisson-client:7' });
    expect(await lock.tryAcquire()).toBeNull();
    expect(await admin.exists(lock.key)).toBe(0);
    expect(await lineOf(admin, lock.key)).toEqual({
      queue: ['redisson-client:7'],
      timeouts: ['redisson-client:7'],
    });
    await admin.del([fairQueueOf(lock.key), fairTimeoutsOf(lock.key)]);
    const lease = await lock.tryAcquire();
    expect(lease).not.toBeNull();
    await lease?.release();
  });

  it('serves the next waiter once a head that never asks again lapses, not before', async () => {
    const lock = lockClient().fairLock('settlements:lapse', { waiterTimeoutMs: 10_000 });
    const admin = suite.admin;
    // A head that will not come back (a Redisson waiter whose process is gone), lapsing in 1.5 s.
    const nowMs = await redisNowMs(admin);
    await admin.rPush(fairQueueOf(lock.key), 'gone-client:1');
    await admin.zAdd(fairTimeoutsOf(lock.key), { score: nowMs + 1_500, value: 'gone-client:1' });
    const startedAt = performance.now();
    const lease = await lock.acquire({ waitMs: 10_000 });
    const waited = performance.now() - startedAt;
    expect(waited).toBeGreaterThanOrEqual(1_300);
    // Re-checked when the head could lapse, not a heartbeat (3.3 s) later.
    expect(waited).toBeLessThan(3_000);
    await lease.release();
    expect(await admin.exists([lock.key, fairQueueOf(lock.key), fairTimeoutsOf(lock.key)])).toBe(0);
  });

  it('leaves no queue entry or deadline behind when a wait times out or is aborted', async () => {
    const lock = lockClient().fairLock('settlements:give-up');
    const admin = suite.admin;
    const holder = await lock.acquire();
    // A waiter behind the ones that give up.
    const last = lock.acquire();

    const timedOut = lock.acquire({ waitMs: 400 });
    await waitUntil('queued', async () => (await admin.lLen(fairQueueOf(lock.key))) === 2);
    const startedAt = performance.now();
    const outcome = await settle(timedOut);
    expect(outcome.error).toBeInstanceOf(LockTimeoutError);
    expect(outcome.at - startedAt).toBeLessThan(2_000);
    expect((await lineOf(admin, lock.key)).queue).toHaveLength(1);
    expect((await lineOf(admin, lock.key)).timeouts).toHaveLength(1);

    const controller = new AbortController();
    const aborted = settle(lock.acquire({ signal: controller.signal }));
    await waitUntil('queued', async () => (await admin.lLen(fairQueueOf(lock.key))) === 2);
    const abortedAt = performance.now();
    const reason = new Error('payment run cancelled');
    controller.abort(reason);
    const abortedOutcome = await aborted;
    expect(abortedOutcome.error).toBe(reason);
    expect(abortedOutcome.at - abortedAt).toBeLessThan(500);
    await waitUntil('the aborted waiter left', async () => (await admin.lLen(fairQueueOf(lock.key))) === 1);
    expect(await admin.zCard(fairTimeoutsOf(lock.key))).toBe(1);

    await holder.release();
    await (await last).release();
    expect(await admin.exists([lock.key, fairQueueOf(lock.key), fairTimeoutsOf(lock.key)])).toBe(0);
  });

  it('lets the next waiter go at once when the head gives up while the lock is free', async () => {
    const lock = lockClient().fairLock('settlements:head-leaves', { waiterTimeoutMs: 60_000 });
    const admin = suite.admin;
    const monitor = await res.monitor();
    // A lock held with no expiry by someone who never releases it: only a force-unlock frees it.
    await admin.hSet(lock.key, 'batch-job:1', '1');
    const controller = new AbortController();
    const head = settle(lock.acquire({ signal: controller.signal }));
    await waitUntil('head queued', async () => (await admin.lLen(fairQueueOf(lock.key))) === 1);
    const next = lock.acquire({ waitMs: 20_000 });
    // Each waiter asks once, subscribes, and asks again: only after both second attempts ran may
    // the lock be freed, or the head's second attempt would simply take it.
    // Counted by request (a first call may run as EVALSHA, refused, then EVAL).
    const requests = (lines: readonly string[]): number =>
      new Set(
        commandsFrom(lines, { excludeLua: true })
          .filter((args) => /^EVAL(SHA)?$/i.test(args[0] ?? '') && args[3] === lock.key)
          .map((args) => args[4]),
      ).size;
    await monitor.waitFor((lines) => requests(lines) === 4);
    expect(await admin.lLen(fairQueueOf(lock.key))).toBe(2);
    // Freed behind everyone's back (no message), then the head gives up: its leave wakes the next.
    await admin.del(lock.key);
    const startedAt = performance.now();
    controller.abort();
    expect((await head).error).toBe(controller.signal.reason);
    const lease = await next;
    expect(performance.now() - startedAt).toBeLessThan(2_000);
    await lease.release();
  });

  it('queues one owner once when it waits twice, and keeps its place while one of the two gives up', async () => {
    const locks = lockClient();
    const lock = locks.fairLock('settlements:same-owner');
    const admin = suite.admin;
    const holder = await lock.acquire();
    // One async context (a plain lock's callback) waits for the fair lock twice at once.
    const outcome = await locks.lock('settlements:batch').withLock(async () => {
      const patient = lock.acquire({ waitMs: 20_000 });
      const impatient = settle(lock.acquire({ waitMs: 600 }));
      await waitUntil('queued', async () => (await admin.lLen(fairQueueOf(lock.key))) === 1);
      await sleep(200);
      expect(await admin.lLen(fairQueueOf(lock.key))).toBe(1);
      expect((await impatient).error).toBeInstanceOf(LockTimeoutError);
      // The other acquire of the owner still waits: its place stays.
      expect(await admin.lLen(fairQueueOf(lock.key))).toBe(1);
      expect(await admin.zCard(fairTimeoutsOf(lock.key))).toBe(1);
      await holder.release();
      const lease = await patient;
      const count = await lock.holdCount();
      await lease.release();
      return count;
    });
    expect(outcome).toBe(1);
    expect(await admin.exists([lock.key, fairQueueOf(lock.key), fairTimeoutsOf(lock.key)])).toBe(0);
  });

  it('serves the next waiter within the bound when the head’s client is closed while it waits', async () => {
    const waiterTimeoutMs = 1_000;
    const name = 'settlements:closed';
    const holder = await lockClient().fairLock(name, { waiterTimeoutMs }).acquire();
    const closing = lockClient();
    const head = settle(closing.fairLock(name, { waiterTimeoutMs }).acquire());
    const lock = lockClient().fairLock(name, { waiterTimeoutMs });
    await waitUntil('head queued', async () => (await suite.admin.lLen(fairQueueOf(lock.key))) === 1);
    const next = lock.acquire({ waitMs: 20_000 });
    await waitUntil('next queued', async () => (await suite.admin.lLen(fairQueueOf(lock.key))) === 2);
    // A closed client sends nothing more: its entry stays until its deadline passes.
    await closing.close();
    expect((await head).error).toBeInstanceOf(ClientClosedError);
    const releasedAt = performance.now();
    await holder.release();
    const lease = await next;
    expect(performance.now() - releasedAt).toBeLessThan(waiterTimeoutMs + waiterTimeoutMs / 3 + 1_000);
    await lease.release();
    expect(await suite.admin.exists([lock.key, fairQueueOf(lock.key), fairTimeoutsOf(lock.key)])).toBe(0);
  });

  it('forceUnlock wakes the head', async () => {
    const lock = lockClient().fairLock('settlements:force');
    const holder = await lock.acquire();
    const waiting = lock.acquire();
    await waitUntil('queued', async () => (await suite.admin.lLen(fairQueueOf(lock.key))) === 1);
    expect(await lock.forceUnlock()).toBe(true);
    expect(holder.signal.aborted).toBe(true);
    const lease = await waiting;
    await lease.release();
    expect(await lock.forceUnlock()).toBe(false);
  });

  it('rejects bad options and names before sending anything', async () => {
    const locks: LockClient = lockClient();
    const monitor = await res.monitor();
    const bad: unknown[] = [
      { waiterTimeoutMs: 29 },
      { waiterTimeoutMs: 1.5 },
      { waiterTimeoutMs: -1 },
      { waiterTimeoutMs: '10000' },
      { waiterTimeoutMs: Number.POSITIVE_INFINITY },
      { waiterTimeoutMs: 2_147_483_648 },
      { waitStepMs: 0 },
      { waitStepMs: 2.5 },
      { waitStepMs: '300000' },
      { reentrant: 'yes' },
      { waitMs: 10 },
      'fast',
    ];
    for (const options of bad) {
      expect(() => locks.fairLock('settlements:bad', options as never)).toThrow(InvalidArgumentError);
    }
    expect(() => locks.fairLock('settlements:bad', { waiterTimeoutMs: 29 })).toThrow(
      'Expected `waiterTimeoutMs` to be a whole number of milliseconds from 30 to 2147483647, got `29` (number)',
    );
    expect(() => locks.fairLock('', {})).toThrow(InvalidArgumentError);
    expect(locks.fairLock('settlements:ok', { waiterTimeoutMs: 30 }).waiterTimeoutMs).toBe(30);
    // Redisson's default fairLockWaitTimeout, unless told otherwise.
    expect(locks.fairLock('settlements:ok').waitStepMs).toBe(300_000);
    expect(locks.fairLock('settlements:ok', { waitStepMs: 5_000 }).waitStepMs).toBe(5_000);
    await sleep(200);
    // An earlier test's subscriber may still be leaving its channels (some clients unsubscribe
    // lazily); nothing this test did can unsubscribe, so only those are set aside.
    const lateLeaves = (args: readonly string[]): boolean =>
      /^(?:P|S)?UNSUBSCRIBE$/i.test(args[0] ?? '') && !args.some((arg) => /settlements:(?:bad|ok)/.test(arg));
    expect(commandsFrom(monitor.lines).filter((args) => !lateLeaves(args))).toEqual([]);
  });

  it('never shows an owner field in errors or events', async () => {
    const locks = lockClient();
    const texts: string[] = [];
    for (const event of ['acquired', 'released', 'lockLost', 'error'] as const) {
      locks.on(event, (payload: unknown) => texts.push(JSON.stringify(payload), String(payload)));
    }
    const lock: FairLock = locks.fairLock('settlements:secret');
    const holder = await lock.acquire();
    const [field] = await suite.admin.hKeys(lock.key);
    if (field === undefined) throw new Error('no owner');
    const timedOut = await settle(lock.acquire({ waitMs: 200 }));
    texts.push(String(timedOut.error), (timedOut.error as Error).stack ?? '');
    await holder.release();
    const notOwned = await settle(holder.release());
    texts.push(String(notOwned.error));
    const strict = locks.fairLock('settlements:secret', { reentrant: false });
    const reentry = await settle(strict.withLock(() => strict.acquire()));
    texts.push(String(reentry.error));
    const clientId = field.split(':')[0] ?? field;
    expect(texts.length).toBeGreaterThan(4);
    for (const text of texts) {
      expect(text).not.toContain(field);
      expect(text).not.toContain(clientId);
    }
  });
});

describe('FairLock acquires with an unknown outcome', () => {
  let server: RedisInstance;
  let admin: Redis;
  const perFile = testResources(() => server.url);
  const res = testResources(() => server.url);

  beforeAll(async () => {
    // Paused: a server of this file's own.
    server = await startRedis();
    admin = await perFile.connect();
    // Preloaded, so a request held up by the pause runs as it is sent instead of failing with
    // NOSCRIPT.
    for (const script of Object.values(luaScripts)) {
      await admin.sendCommand(['SCRIPT', 'LOAD', script.source]);
    }
  });
  afterEach(() => res.closeAll());
  afterAll(async () => {
    await perFile.closeAll();
    await server?.stop();
  });

  it('leaves no hold and no place in line, and a late copy of the request is refused', async () => {
    const prefix = uniquePrefix('fair-unknown');
    const locks = await res.lockClient({ keyPrefix: prefix, commandTimeoutMs: 100 });
    const other = await res.lockClient({ keyPrefix: prefix });
    const lock = locks.fairLock('settlements:unknown');
    const key = lock.key;
    const watch = await res.monitor();

    // The lock is free: the request is applied once the server reads it, but no reply comes in time.
    // Redis stays paused until the acquire has ended (by its waitMs + commandTimeoutMs), however
    // late this process's timers run.
    await server.pause();
    const outcome = await settle(lock.acquire({ waitMs: 300 }));
    await server.resume();
    expect(outcome.error).toBeInstanceOf(LockError);
    expect(['REDIS_ERROR', 'ACQUIRE_TIMEOUT']).toContain((outcome.error as LockError).code);
    await waitUntil('the lock is free', async () => (await admin.exists(key)) === 0, 2_000);
    await watch.waitFor(
      (lines) =>
        acquireCalls(lines).length > 0 && scriptCallsOf(lines, 'fair-lock/cancel-acquire').length > 0,
    );
    expect(await lineOf(admin, key)).toEqual({ queue: [], timeouts: [] });

    // Late copies of the given-up request: refused while the lock is free, nothing changes.
    const cancelled = new Set(scriptCallsOf(watch.lines, 'fair-lock/cancel-acquire').map((cmd) => cmd[4]));
    const copies = acquireCalls(watch.lines).filter((cmd) => cancelled.has(cmd[4]));
    expect(copies.length).toBeGreaterThanOrEqual(1);
    for (const copy of copies) expect(await admin.sendCommand(copy)).toBe(-3);
    expect(await admin.exists([key, fairQueueOf(key), fairTimeoutsOf(key)])).toBe(0);

    // Held by someone else, a waiting request whose reply is lost leaves no place in line behind.
    const holder = await other.fairLock('settlements:unknown').acquire();
    await server.pause();
    const waiting = settle(lock.acquire({ waitMs: 300 }));
    await sleep(400);
    await server.resume();
    expect((await waiting).error).toBeInstanceOf(LockError);
    await waitUntil('the line is empty', async () => (await admin.lLen(fairQueueOf(key))) === 0, 2_000);
    expect(await admin.zCard(fairTimeoutsOf(key))).toBe(0);
    await holder.release();
    expect(await admin.exists([key, fairQueueOf(key), fairTimeoutsOf(key)])).toBe(0);
  });
});
