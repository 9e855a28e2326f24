/**
 * The counting semaphore (Redisson's RSemaphore layout): permits counted in a string counter
 * without owner or TTL; waiters woken by the new count published on `redisson_sc:{<key>}`, as
 * many per client as the count can serve; waits that end by time or abort leave the counter as
 * it was; calls whose reply is lost change the counter once; bad input sends nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  InvalidArgumentError,
  LockClient,
  LockError,
  LockTimeoutError,
  type Semaphore,
} from '../../src/index.js';
import { luaScripts } from '../../src/scripts/generated.js';
import { uniquePrefix } from '../support/keys.js';
import { commandsFrom } from '../support/monitor.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources, type Redis } from '../support/resources.js';
import { sharedSuite } from '../support/shared-suite.js';
import { settle, sleep, waitUntil, within } from '../support/wait.js';

const WORKER = new URL('../chaos/fixtures/semaphore-worker.ts', import.meta.url).pathname;
const STARTUP_MS = 20_000;

/** Redisson's semaphore channel, spelt out here rather than taken from src/keys.ts. */
function channelOf(key: string): string {
  return `redisson_sc:{${key}}`;
}

/** Calls of one semaphore script on `key` seen by MONITOR (EVALSHA: the scripts are preloaded). */
function scriptCalls(lines: readonly string[], script: keyof typeof luaScripts, key: string): string[][] {
  return commandsFrom(lines, { excludeLua: true }).filter(
    (cmd) => cmd[0] === 'EVALSHA' && cmd[1] === luaScripts[script].sha1 && cmd[3] === key,
  );
}

async function preload(admin: Redis): Promise<void> {
  for (const script of Object.values(luaScripts)) await admin.sendCommand(['SCRIPT', 'LOAD', script.source]);
}

async function counter(admin: Redis, key: string): Promise<number | null> {
  const value = await admin.get(key);
  return value === null ? null : Number(value);
}

describe('Semaphore', () => {
  const suite = sharedSuite('semaphore');
  const { res, lockClient } = suite;
  beforeAll(() => preload(suite.admin));

  it('counts permits in a string counter with no TTL, created with `permits` when missing', async () => {
    const semaphore = lockClient().semaphore('exports', { permits: 3 });
    const { admin } = suite;
    expect(await admin.exists(semaphore.key)).toBe(0);
    expect(await semaphore.availablePermits()).toBe(3);
    expect(await admin.type(semaphore.key)).toBe('string');
    expect(await admin.pTTL(semaphore.key)).toBe(-1);

    await semaphore.acquire(2);
    expect(await counter(admin, semaphore.key)).toBe(1);
    expect(await semaphore.tryAcquire(2)).toBe(false);
    expect(await semaphore.tryAcquire()).toBe(true);
    expect(await semaphore.tryAcquire({ waitMs: 0 })).toBe(false);
    expect(await counter(admin, semaphore.key)).toBe(0);
    await semaphore.release(3);
    expect(await semaphore.availablePermits()).toBe(3);
    expect(await admin.pTTL(semaphore.key)).toBe(-1);
    // Every request record expires.
    for await (const batch of admin.scanIterator({
      MATCH: `latchkey_request:*${semaphore.key}*`,
      COUNT: 1_000,
    })) {
      for (const key of batch) expect(await admin.pTTL(key)).toBeGreaterThan(0);
    }
  });

  it('takes the acquire path from the first call: the counter is created by acquire itself', async () => {
    const semaphore = lockClient().semaphore('thumbnails', { permits: 2 });
    await semaphore.acquire();
    expect(await counter(suite.admin, semaphore.key)).toBe(1);
  });

  it('treats a missing counter as 0 permits without `permits`; trySetPermits sets it once and wakes waiters', async () => {
    const semaphore = lockClient().semaphore('smtp');
    const { admin } = suite;
    expect(await semaphore.availablePermits()).toBe(0);
    expect(await semaphore.tryAcquire()).toBe(false);
    expect(await admin.exists(semaphore.key)).toBe(0);

    const waiting = settle(semaphore.acquire(2, { waitMs: 10_000 }));
    await waitUntil(
      'the waiter is subscribed',
      async () => (await res.numsub(channelOf(semaphore.key))) === 1,
    );
    await sleep(50);
    const setAt = performance.now();
    expect(await lockClient().semaphore('smtp').trySetPermits(5)).toBe(true);
    const woken = await waiting;
    expect(woken.error).toBeUndefined();
    expect(woken.at - setAt).toBeLessThan(1_000);
    expect(await semaphore.trySetPermits(9)).toBe(false);
    expect(await counter(admin, semaphore.key)).toBe(3);
    expect(await admin.pTTL(semaphore.key)).toBe(-1);
  });

  it('adds permits of either sign, drains them, and deletes the counter', async () => {
    const semaphore = lockClient().semaphore('smtp-pool');
    const { admin } = suite;
    await semaphore.addPermits(5);
    expect(await semaphore.availablePermits()).toBe(5);
    await semaphore.addPermits(-7);
    expect(await semaphore.availablePermits()).toBe(-2);
    expect(await semaphore.tryAcquire()).toBe(false);
    expect(await semaphore.drainPermits()).toBe(0);
    expect(await counter(admin, semaphore.key)).toBe(-2);
    await semaphore.addPermits(4);
    expect(await semaphore.drainPermits()).toBe(2);
    expect(await counter(admin, semaphore.key)).toBe(0);
    expect(await semaphore.drainPermits()).toBe(0);
    await semaphore.release(2);
    expect(await semaphore.tryAcquire(2)).toBe(true);
    expect(await semaphore.delete()).toBe(true);
    expect(await admin.exists(semaphore.key)).toBe(0);
    expect(await semaphore.delete()).toBe(false);
  });

  it('withPermits holds the permits while fn runs and gives them back however it ends', async () => {
    const semaphore = lockClient().semaphore('renderers', { permits: 3 });
    const { admin } = suite;
    const value = await semaphore.withPermits(2, async () => {
      expect(await counter(admin, semaphore.key)).toBe(1);
      return 'rendered';
    });
    expect(value).toBe('rendered');
    expect(await counter(admin, semaphore.key)).toBe(3);
    const failure = new Error('render failed');
    await expect(
      semaphore.withPermits(async () => {
        expect(await counter(admin, semaphore.key)).toBe(2);
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(await counter(admin, semaphore.key)).toBe(3);
    await semaphore.acquire(3);
    await expect(semaphore.withPermits(() => 'never', { waitMs: 100 })).rejects.toBeInstanceOf(
      LockTimeoutError,
    );
    expect(await counter(admin, semaphore.key)).toBe(0);
  });

  it('wakes a waiter in another process within milliseconds of a release, without polling', async () => {
    const prefix = uniquePrefix('semaphore-xproc');
    const name = 'crawler';
    const key = prefix + name;
    const holder = new LockClient(suite.redis, { keyPrefix: prefix });
    res.track(holder);
    const semaphore = holder.semaphore(name, { permits: 2 });
    await semaphore.acquire(2);

    const worker = res.worker(WORKER, {
      REDIS_URL: suite.url,
      KEY_PREFIX: prefix,
      SEMAPHORE_NAME: name,
      PERMITS: '2',
    });
    await worker.next((msg) => msg['type'] === 'ready', STARTUP_MS);
    const watch = await res.monitor();
    worker.send({ type: 'acquire', permits: 1 });
    await waitUntil('the worker is subscribed', async () => (await res.numsub(channelOf(key))) === 1, 10_000);
    // Its post-subscribe attempt, then a quiet wait: no polling.
    await waitUntil('two attempts', () => scriptCalls(watch.lines, 'semaphore/acquire', key).length === 2);
    await sleep(1_000);
    expect(scriptCalls(watch.lines, 'semaphore/acquire', key)).toHaveLength(2);
    expect(worker.messages.some((msg) => msg['type'] === 'acquired')).toBe(false);

    const releasedAt = process.hrtime.bigint();
    await semaphore.release();
    const acquired = await worker.next((msg) => msg['type'] === 'acquired' || msg['type'] === 'failed');
    expect(acquired['type']).toBe('acquired');
    const latencyMs = Number(BigInt(String(acquired['at'])) - releasedAt) / 1e6;
    expect(latencyMs).toBeLessThan(200);
    // MONITOR's copy of the winning attempt may reach this test after the worker's message.
    await waitUntil(
      'the attempt after the release',
      () => scriptCalls(watch.lines, 'semaphore/acquire', key).length >= 3,
      2_000,
    );
    expect(scriptCalls(watch.lines, 'semaphore/acquire', key)).toHaveLength(3);
    expect(await counter(suite.admin, key)).toBe(0);
  });

  it('a release of k permits wakes k of a client’s waiters, not all of them', async () => {
    const waiters = lockClient();
    const semaphore = waiters.semaphore('uploads', { permits: 0 });
    const key = semaphore.key;
    const watch = await res.monitor();
    const done: number[] = [];
    const waits = Array.from({ length: 5 }, (_, i) =>
      semaphore.acquire({ waitMs: 20_000 }).then(() => {
        done.push(i);
      }),
    );
    await waitUntil('every waiter is subscribed', async () => (await res.numsub(channelOf(key))) === 1);
    await sleep(300);
    const before = scriptCalls(watch.lines, 'semaphore/acquire', key).length;
    expect(before).toBeGreaterThanOrEqual(5);

    await lockClient().semaphore('uploads').release(2);
    await waitUntil('two waiters got permits', () => done.length === 2);
    await sleep(300);
    expect(done).toHaveLength(2);
    // Two woken, two attempts: the other three slept through the message.
    expect(scriptCalls(watch.lines, 'semaphore/acquire', key)).toHaveLength(before + 2);
    expect(await counter(suite.admin, key)).toBe(0);

    await lockClient().semaphore('uploads').release(3);
    await within(Promise.all(waits), 5_000, 'the other waiters');
    // MONITOR output trails the replies a little.
    await watch.waitFor((lines) => scriptCalls(lines, 'semaphore/acquire', key).length >= before + 5);
    await sleep(200);
    expect(scriptCalls(watch.lines, 'semaphore/acquire', key)).toHaveLength(before + 5);
    expect(await counter(suite.admin, key)).toBe(0);
  });

  it('leaves no waiter asleep while permits are free: many releases at once, mixed demands', async () => {
    const waiters = lockClient();
    const semaphore = waiters.semaphore('workers', { permits: 0 });
    const key = semaphore.key;
    const count = 20;
    const ones = Array.from({ length: count }, () => semaphore.acquire({ waitMs: 20_000 }));
    await waitUntil('every waiter is subscribed', async () => (await res.numsub(channelOf(key))) === 1);
    await sleep(200);
    // Twenty releases pipelined by another client: their messages arrive back to back, several
    // in one read, some while woken waiters' attempts are in flight.
    const releaser = lockClient().semaphore('workers');
    await Promise.all(Array.from({ length: count }, () => releaser.release()));
    await within(Promise.all(ones), 5_000, 'every single-permit waiter');
    expect(await counter(suite.admin, key)).toBe(0);

    // A waiter for three among waiters for one: the small ones pass; the large one is not
    // skipped by the wake-ups once three are free.
    const big = settle(semaphore.acquire(3, { waitMs: 20_000 }));
    const small = [semaphore.acquire({ waitMs: 20_000 }), semaphore.acquire({ waitMs: 20_000 })];
    await sleep(200);
    await releaser.release(2);
    await within(Promise.all(small), 5_000, 'the single-permit waiters');
    await releaser.release(3);
    expect((await within(big, 5_000, 'the three-permit waiter')).error).toBeUndefined();
    expect(await counter(suite.admin, key)).toBe(0);
  });

  it('a waiter woken twice at once passes the wake-up it did not need on to the next one', async () => {
    const semaphore = lockClient().semaphore('importers', { permits: 0 });
    const { admin } = suite;
    const key = semaphore.key;
    const first = semaphore.acquire({ waitMs: 20_000 });
    await waitUntil('the first waiter is subscribed', async () => (await res.numsub(channelOf(key))) === 1);
    await sleep(100);
    let secondDone = false;
    const second = semaphore.acquire({ waitMs: 20_000 }).then(() => {
      secondDone = true;
    });
    await sleep(200);
    // Two permits free, announced by two messages of one each that arrive together: what a
    // release, an acquire in flight and a second release look like to this client. Each message
    // wakes the first local waiter; the second finds it already awake.
    await admin.set(key, '2');
    await admin.multi().publish(channelOf(key), '1').publish(channelOf(key), '1').exec();
    await within(first, 5_000, 'the first waiter');
    await within(second, 5_000, 'the second waiter');
    expect(secondDone).toBe(true);
    expect(await counter(admin, key)).toBe(0);
  });

  it('ends a wait by waitMs or abort promptly, leaving the counter exactly as it was', async () => {
    const semaphore = lockClient().semaphore('reports', { permits: 2 });
    const { admin } = suite;
    await semaphore.acquire(2);

    const startedAt = performance.now();
    expect(await semaphore.tryAcquire(1, { waitMs: 300 })).toBe(false);
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(290);
    expect(performance.now() - startedAt).toBeLessThan(1_500);
    const timedOut = await settle(semaphore.acquire(2, { waitMs: 200 }));
    expect(timedOut.error).toBeInstanceOf(LockTimeoutError);
    expect((timedOut.error as LockTimeoutError).message).toBe(
      'Timed out waiting for 2 permits of semaphore "reports"',
    );

    const controller = new AbortController();
    const reason = new Error('shutting down');
    const aborted = settle(semaphore.acquire({ signal: controller.signal }));
    await sleep(200);
    const abortedAt = performance.now();
    controller.abort(reason);
    const outcome = await aborted;
    expect(outcome.error).toBe(reason);
    expect(outcome.at - abortedAt).toBeLessThan(100);
    await expect(semaphore.acquire({ signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    expect(await counter(admin, semaphore.key)).toBe(0);

    // The permits that come back are exactly the two taken: none lost, none gained.
    await semaphore.release(2);
    expect(await counter(admin, semaphore.key)).toBe(2);
  });

  it('rejects bad input with InvalidArgumentError before any Redis command', async () => {
    const locks = lockClient();
    const watch = await res.monitor();
    const semaphore = locks.semaphore('invoices', { permits: 2 });
    const bad: [string, () => Promise<unknown>][] = [
      [
        'Expected `permits` to be a whole number from 1 to 2147483647, got `0` (number)',
        () => semaphore.acquire(0),
      ],
      [
        'Expected `permits` to be a whole number from 1 to 2147483647, got `-1` (number)',
        () => semaphore.acquire(-1),
      ],
      [
        'Expected `permits` to be a whole number from 1 to 2147483647, got `1.5` (number)',
        () => semaphore.tryAcquire(1.5),
      ],
      [
        'Expected `permits` to be a whole number from 1 to 2147483647, got "2" (string of length 1)',
        () => semaphore.acquire('2' as unknown as number),
      ],
      [
        'Expected `permits` to be a whole number from 1 to 2147483647, got `NaN` (number)',
        () => semaphore.release(Number.NaN),
      ],
      [
        'Expected `permits` to be a whole number from 1 to 2147483647, got `2147483648` (number)',
        () => semaphore.release(2 ** 31),
      ],
      [
        'Expected `permits` to be a whole number from 0 to 2147483647, got `-1` (number)',
        () => semaphore.trySetPermits(-1),
      ],
      [
        'Expected `permits` to be a whole number from -2147483647 to 2147483647, got `0.5` (number)',
        () => semaphore.addPermits(0.5),
      ],
      [
        'Expected `waitMs` to be a whole number of milliseconds from 0 to 2147483647, or Infinity, got `-1` (number)',
        () => semaphore.acquire(1, { waitMs: -1 }),
      ],
      [
        'Unknown option `leaseMs` in `options`; expected one of `waitMs`, `signal`',
        () => semaphore.tryAcquire({ leaseMs: 5 } as never),
      ],
      [
        'Expected `signal` to be an AbortSignal, got `true` (boolean)',
        () => semaphore.acquire({ signal: true } as never),
      ],
      [
        'Expected `fn` to be a function, got "x" (string of length 1)',
        () => semaphore.withPermits(2, 'x' as never),
      ],
      [
        'Expected `permits` to be a whole number from 1 to 2147483647, got `0` (number)',
        () => semaphore.withPermits(0, () => 1),
      ],
    ];
    for (const [message, call] of bad) {
      const outcome = await settle(call());
      expect(outcome.error).toBeInstanceOf(InvalidArgumentError);
      expect((outcome.error as Error).message).toBe(message);
    }
    expect(() => locks.semaphore('invoices', { permits: -1 })).toThrow(
      new InvalidArgumentError(
        'Expected `permits` to be a whole number from 0 to 2147483647, got `-1` (number)',
      ),
    );
    expect(() => locks.semaphore('invoices', { permits: 1.5 })).toThrow(InvalidArgumentError);
    expect(() => locks.semaphore('invoices', { permit: 1 } as never)).toThrow(
      'Unknown option `permit` in `options`; expected one of `permits`',
    );

    const marker = `after-bad-input-${semaphore.key}`;
    await suite.admin.sendCommand(['ECHO', marker]);
    await watch.waitFor((lines) => lines.some((line) => line.includes(marker)));
    const before = commandsFrom(watch.lines);
    const markerAt = before.findIndex((cmd) => cmd[0] === 'ECHO' && cmd[1] === marker);
    expect(markerAt).toBeGreaterThanOrEqual(0);
    const sent = before.slice(0, markerAt);
    expect(sent.filter((cmd) => cmd.some((arg) => arg.includes(semaphore.key)))).toEqual([]);
    expect(sent.filter((cmd) => /^(EVAL|EVALSHA|FCALL|INFO|HELLO)$/i.test(cmd[0] ?? ''))).toEqual([]);
  });
});

describe('Semaphore requests whose reply is lost', () => {
  let server: RedisInstance;
  let admin: Redis;
  const perFile = testResources(() => server.url);
  const res = testResources(() => server.url);

  /** Runs `during` with the server frozen for about `ms`; always thaws it. */
  async function paused(ms: number, during: () => void | Promise<void>): Promise<void> {
    await server.pause();
    try {
      const startedAt = performance.now();
      await during();
      await sleep(Math.max(0, ms - (performance.now() - startedAt)));
    } finally {
      await server.resume();
    }
  }

  beforeAll(async () => {
    // Frozen with SIGSTOP: a server of this file's own.
    server = await startRedis();
    admin = await perFile.connect();
    await preload(admin);
  });

  afterAll(async () => {
    await res.closeAll();
    await perFile.closeAll();
    await server?.stop();
  });

  async function semaphoreOf(name: string, permits: number): Promise<{ semaphore: Semaphore; key: string }> {
    const prefix = uniquePrefix('semaphore-lost');
    const locks = await res.lockClient({ keyPrefix: prefix, commandTimeoutMs: 200 });
    const semaphore = locks.semaphore(name, { permits });
    // The client's first call checks the server; done here, outside the pause.
    expect(await semaphore.availablePermits()).toBe(permits);
    return { semaphore, key: prefix + name };
  }

  it('retries a release once its reply is lost, adding its permits once', async () => {
    const { semaphore, key } = await semaphoreOf('payouts', 3);
    await semaphore.acquire(2);
    const watch = await res.monitor();
    let releasing: Promise<{ error?: unknown }> | undefined;
    await paused(500, () => {
      releasing = settle(semaphore.release(2));
    });
    expect((await releasing)?.error).toBeUndefined();
    expect(await counter(admin, key)).toBe(3);
    await watch.waitFor((lines) => scriptCalls(lines, 'semaphore/add', key).length >= 2);
    // Copies that arrive even later add nothing either.
    for (const copy of scriptCalls(watch.lines, 'semaphore/add', key)) await admin.sendCommand(copy);
    expect(await counter(admin, key)).toBe(3);
  });

  it('retries an acquire once its reply is lost, taking its permits once', async () => {
    const { semaphore, key } = await semaphoreOf('refunds', 3);
    const watch = await res.monitor();
    let acquiring: Promise<{ error?: unknown }> | undefined;
    await paused(500, () => {
      acquiring = settle(semaphore.acquire(2, { waitMs: 5_000 }));
    });
    expect((await acquiring)?.error).toBeUndefined();
    expect(await counter(admin, key)).toBe(1);
    await watch.waitFor((lines) => scriptCalls(lines, 'semaphore/acquire', key).length >= 2);
    for (const copy of scriptCalls(watch.lines, 'semaphore/acquire', key)) await admin.sendCommand(copy);
    expect(await counter(admin, key)).toBe(1);
  });

  it('cancels an acquire whose outcome stays unknown: its permits come back and late copies take none', async () => {
    const { semaphore, key } = await semaphoreOf('chargebacks', 3);
    const watch = await res.monitor();
    let acquiring: Promise<{ error?: unknown }> | undefined;
    // waitMs 0: no retry; the one call times out while Redis is frozen, and runs when it thaws.
    await paused(600, () => {
      acquiring = settle(semaphore.tryAcquire(2));
    });
    const outcome = await acquiring;
    expect(outcome?.error).toBeInstanceOf(LockError);
    expect((outcome?.error as LockError).code).toBe('REDIS_ERROR');
    await watch.waitFor((lines) => scriptCalls(lines, 'semaphore/cancel-acquire', key).length >= 1);
    await waitUntil('the permits are back', async () => (await counter(admin, key)) === 3);
    // The acquire did run (after the thaw), then the cancel gave its permits back.
    const acquires = scriptCalls(watch.lines, 'semaphore/acquire', key);
    expect(acquires.length).toBeGreaterThanOrEqual(1);
    for (const copy of acquires) expect(await admin.sendCommand(copy)).toEqual([-3, 0]);
    await sleep(100);
    expect(await counter(admin, key)).toBe(3);
  });

  it('gives back permits taken by an attempt in flight when the caller aborts', async () => {
    const { semaphore, key } = await semaphoreOf('disputes', 1);
    const controller = new AbortController();
    const reason = new Error('request cancelled');
    let acquiring: Promise<{ error?: unknown; at: number }> | undefined;
    let abortedAt = 0;
    await paused(150, async () => {
      acquiring = settle(semaphore.acquire({ signal: controller.signal }));
      await sleep(50);
      abortedAt = performance.now();
      controller.abort(reason);
    });
    const outcome = await acquiring;
    expect(outcome?.error).toBe(reason);
    expect((outcome?.at ?? 0) - abortedAt).toBeLessThan(100);
    await waitUntil('the permit is back', async () => (await counter(admin, key)) === 1);
    await sleep(200);
    expect(await counter(admin, key)).toBe(1);
  });
});
